"""SABUL wire rules (udtconf.sabul.checks) on the captures of the SABUL interop runs: both
channels, the UDP data and the reassembled TCP control stream (udtconf.sabul.trace).

A failure names the rule (``sabul/<section>/<rule>``), SABUL.md section, grade, the stack and
side (sender / receiver) the rule constrains and the capture frame where it shows.
"""

from __future__ import annotations

import pytest
from udtconf.checks import Inconclusive
from udtconf.interop import InteropRunner
from udtconf.sabul.checks import SabulContext, SabulRule
from udtconf.sabul.interop import CASE_MSS
from udtconf.stacks import Stack

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("sabul")]


def test_sabul_rule(sabul_rule: tuple[Stack, Stack, str, SabulRule], runner: InteropRunner, record_property) -> None:  # type: ignore[no-untyped-def]
    server, client, case, rule = sabul_rule
    record_property("udtc_grade", rule.grade)
    record_property("udtc_section", rule.section)
    record_property("udtc_requirement", rule.requirement)
    res = runner.run(server, client, case)
    record_property("udtc_logdir", str(res.logdir))
    record_property("udtc_pcap", str(res.pcap or ""))
    if res.status in ("skipped", "unsupported"):
        pytest.skip(f"run {res.status}: {res.reason}")
    sessions = [s for s in res.sabul if rule.applies(s)]
    if not sessions:
        pytest.skip("no capture of the session (needs root for dumpcap/tcpdump)")
    if res.capture_lost:
        pytest.skip(f"capture incomplete: the capture tool dropped {res.capture_lost} packets (host overloaded)")
    names = {"sender": server.name, "receiver": client.name}
    ctx = SabulContext(case, CASE_MSS.get(case, {}), set(res.dropped))
    violations: list[str] = []
    inconclusive: list[str] = []
    for session in sessions:
        try:
            violations += [v.render(names) for v in rule.run(session, ctx)]
        except Inconclusive as e:
            inconclusive.append(str(e))
    record_property("udtc_violations", violations)
    record_property("udtc_blamed", [names[rule.side]] if violations else [])
    if violations:
        shown = "\n  ".join(violations[:10])
        more = f"\n  … and {len(violations) - 10} more" if len(violations) > 10 else ""
        pytest.fail(
            f"{rule.grade} violated: {rule.id} (SABUL.md §{rule.section}) in {case}, sender {server.name} × receiver "
            f"{client.name}, capture {res.pcap}:\n  {shown}{more}\n  requirement: {rule.requirement}",
            pytrace=False,
        )
    if inconclusive and len(inconclusive) == len(sessions):
        pytest.skip(f"inconclusive: {inconclusive[0]}")
