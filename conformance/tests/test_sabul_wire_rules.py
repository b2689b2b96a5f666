"""SABUL wire rules (udtconf.sabul.checks) on the captures of the SABUL interop runs: both
channels, the UDP data and the reassembled TCP control stream (udtconf.sabul.trace).

A failure names the rule (``sabul/<section>/<rule>``), SABUL.md section, grade, the stack and
side (sender / receiver) the rule constrains and the capture frame where it shows.
"""

from __future__ import annotations

import pytest
from udtconf.runner import InteropRunner
from udtconf.sabul.cases import CASES
from udtconf.sabul.checks import SabulContext, SabulRule
from udtconf.sabul.interop import SabulRunResult
from udtharness.stacks import Stack
from verdicts import RecordProperty, rule_run, rule_verdict

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("sabul")]


def test_sabul_rule(
    sabul_rule: tuple[Stack, Stack, str, SabulRule], runner: InteropRunner, record_property: RecordProperty
) -> None:
    server, client, case, rule = sabul_rule
    res = rule_run(rule, server, client, case, runner, record_property)
    assert isinstance(res, SabulRunResult)
    names = {"sender": server.name, "receiver": client.name}
    ctx = SabulContext(case, CASES[case].mss, set(res.dropped))
    rule_verdict(
        rule,
        res,
        [s for s in res.sessions if rule.applies(s)],
        ctx,
        names,
        record_property,
        spec="SABUL.md",
        no_capture="no capture of the session (needs root for dumpcap/tcpdump)",
        blame=lambda v: names[rule.side],
    )
