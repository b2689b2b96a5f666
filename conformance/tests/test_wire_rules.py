"""Wire rules (udtconf.udt.checks) on the captures of the interop runs.

A failure names the case id, spec section, grade, the stack the rule constrains (the party
that failed to do what it requires, udtconf.checks.Violation) and the frame number in the
run's capture.pcap where it shows.
"""

from __future__ import annotations

import pytest
from udtconf.checks import Rule
from udtconf.runner import InteropRunner
from udtconf.udt.checks import Context
from udtconf.udt.interop import UdtRunResult
from udtconf.udt.trace import Connection
from udtharness.stacks import Stack
from verdicts import RecordProperty, rule_run, rule_verdict

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("udt")]


def test_rule(
    matrix_rule: tuple[Stack, Stack, str, Rule[Connection, Context]],
    runner: InteropRunner,
    record_property: RecordProperty,
) -> None:
    server, client, case, rule = matrix_rule
    res = rule_run(rule, server, client, case, runner, record_property)
    assert isinstance(res, UdtRunResult)
    names = {"server": server.name, "client": client.name}
    ctx = Context(case, set(res.dropped), res.client_leg)
    rule_verdict(
        rule,
        res,
        res.conns,
        ctx,
        names,
        record_property,
        spec="UDT4.md",
        no_capture="no capture (needs root for tcpdump/dumpcap)",
        blame=lambda v: names.get(v.party, v.party),
    )
