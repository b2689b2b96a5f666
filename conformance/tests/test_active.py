"""The active tester against every selected stack, in the role each probe needs.

``pass`` — behaved as the spec asks; ``tolerated``/``broken`` — the input is one where the spec
allows ignoring it or dropping the connection (4.11 drops it): recorded, not failed; ``fail`` —
crash, hang, corrupted or lost data, or a rule broken.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from udtconf.stacks import Stack
from udtconf.tester import PROBES, Probe, run_probe

pytestmark = [pytest.mark.slow, pytest.mark.active]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(stack: Stack, probe: Probe, results_dir: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    record_property("udtc_section", probe.section)
    record_property("udtc_requirement", probe.summary)
    if stack.missing():
        pytest.skip(f"stack {stack.name} not built: {', '.join(stack.missing())}")
    if not stack.supports("transfer"):
        pytest.skip(f"{stack.name} does not support the transfer case the tester drives")
    workdir = results_dir / "active" / stack.name / probe.id.replace("/", "_")
    record_property("udtc_logdir", str(workdir))
    res = run_probe(stack, probe, workdir)
    record_property("udtc_violations", [res.details, *res.notes])
    assert not res.failed, (
        f"{stack.name} ({probe.role}) {probe.id} [UDT4.md §{probe.section}]: {res.details}; {'; '.join(res.notes)}"
    )
    print(f"{stack.name} {probe.id}: {res.outcome} — {res.details}")
