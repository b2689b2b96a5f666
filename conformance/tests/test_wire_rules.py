"""Wire rules (udtconf.checks) on the captures of the interop runs.

A failure names the case id, spec section, grade, the stack the rule constrains (the party
that failed to do what it requires, udtconf.checks.Violation) and the frame number in the
run's capture.pcap where it shows.
"""

from __future__ import annotations

import pytest
from udtconf.checks import Context, Inconclusive, Rule
from udtconf.interop import InteropRunner
from udtconf.stacks import Stack

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("udt")]


def test_rule(matrix_rule: tuple[Stack, Stack, str, Rule], runner: InteropRunner, record_property) -> None:  # type: ignore[no-untyped-def]
    server, client, case, rule = matrix_rule
    record_property("udtc_grade", rule.grade)
    record_property("udtc_section", rule.section)
    record_property("udtc_requirement", rule.requirement)
    res = runner.run(server, client, case)
    record_property("udtc_logdir", str(res.logdir))
    record_property("udtc_pcap", str(res.pcap or ""))
    if res.status in ("skipped", "unsupported"):
        pytest.skip(f"run {res.status}: {res.reason}")
    if not res.conns:
        pytest.skip("no capture (needs root for tcpdump/dumpcap)")
    if res.capture_lost:
        pytest.skip(f"capture incomplete: the capture tool dropped {res.capture_lost} packets (host overloaded)")
    names = {"server": server.name, "client": client.name}
    ctx = Context(case, set(res.dropped), res.client_leg)
    violations: list[str] = []
    blamed: set[str] = set()
    inconclusive: list[str] = []
    for conn in res.conns:
        try:
            found = rule.run(conn, ctx)
        except Inconclusive as e:
            inconclusive.append(str(e))
            continue
        violations += [v.render(names) for v in found]
        blamed |= {names.get(v.party, v.party) for v in found}
    record_property("udtc_violations", violations)
    record_property("udtc_blamed", sorted(blamed))  # the stacks a waiver must name (expectations.py)
    if violations:
        shown = "\n  ".join(violations[:10])
        more = f"\n  … and {len(violations) - 10} more" if len(violations) > 10 else ""
        pytest.fail(
            f"{rule.grade} violated: {rule.id} (UDT4.md §{rule.section}) in {case}, server {server.name} × client "
            f"{client.name}, capture {res.pcap}:\n  {shown}{more}\n  requirement: {rule.requirement}",
            pytrace=False,
        )
    if inconclusive and len(inconclusive) == len(res.conns):
        pytest.skip(f"inconclusive: {inconclusive[0]}")
