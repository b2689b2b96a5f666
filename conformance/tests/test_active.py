"""The active tester against every selected stack, in the role each probe needs.

``pass`` — behaved as the spec asks; ``tolerated``/``broken`` — the input is one where the spec
allows ignoring it or dropping the connection (4.11 drops it): recorded, not failed; ``fail`` —
crash, hang, corrupted or lost data, or a rule broken.

Each probe starts a fresh process of the stack with the TESTCASE it needs (``transfer``, or
``multiconnect`` for the probe with three connections; skipped when meta.toml does not list it)
and leaves ``probe.log`` and ``probe.pcap`` in its directory, which the report links.
"""

from __future__ import annotations

import pytest
from udtconf.interop import RESULTS_DIR
from udtconf.stacks import Stack
from udtconf.tester import PROBES, Probe, run_probe

pytestmark = [pytest.mark.slow, pytest.mark.active]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(stack: Stack, probe: Probe, record_property) -> None:  # type: ignore[no-untyped-def]
    record_property("udtc_section", probe.section)
    record_property("udtc_requirement", probe.summary)
    if stack.missing():
        pytest.skip(f"stack {stack.name} not built: {', '.join(stack.missing())}")
    if not stack.supports(probe.testcase):
        pytest.skip(f"{stack.name} meta.toml does not list {probe.testcase}, the TESTCASE this probe starts it with")
    workdir = RESULTS_DIR / "active" / stack.name / probe.id.replace("/", "_")
    record_property("udtc_logdir", str(workdir))
    res = run_probe(stack, probe, workdir)
    record_property("udtc_verdict", res.verdict)
    record_property("udtc_detail", res.notes)
    record_property("udtc_log", str(res.log or ""))
    record_property("udtc_pcap", str(res.pcap or ""))
    record_property("udtc_violations", [res.details, *res.notes])
    if res.failed:
        pytest.fail(
            f"{stack.name} ({probe.role}) {probe.id} [UDT4.md §{probe.section}]: {res.details}; {'; '.join(res.notes)}"
            f" (log: {res.log})",
            pytrace=False,
        )
