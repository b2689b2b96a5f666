"""FRTP wire rules (udtconf.frtp.checks: FRTP's own ``frtp/…`` rules and the SABUL rules FRTP
inherits) on the captures of the FRTP interop runs: both paths, the UDP data path to the
announced data address (127.0.0.2) and the reassembled TCP control stream (127.0.0.1).

A failure names the rule, its spec section (FRTP.md, or SABUL.md for an inherited rule), grade,
the stack and side (sender / receiver) the rule constrains and the capture frame where it shows.
"""

from __future__ import annotations

import pytest
from udtconf.runner import InteropRunner
from udtconf.sabul.checks import SabulContext, SabulRule
from udtconf.sabul.interop import SabulRunResult
from udtharness.stacks import Stack
from verdicts import RecordProperty, rule_run, rule_verdict

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("frtp")]


def test_frtp_rule(
    frtp_rule: tuple[Stack, Stack, str, SabulRule], runner: InteropRunner, record_property: RecordProperty
) -> None:
    server, client, case, rule = frtp_rule
    res = rule_run(rule, server, client, case, runner, record_property)
    assert isinstance(res, SabulRunResult)
    names = {"sender": server.name, "receiver": client.name}
    rule_verdict(
        rule,
        res,
        [s for s in res.sessions if rule.applies(s)],
        SabulContext(case, {}, set(res.dropped)),
        names,
        record_property,
        spec="FRTP.md" if rule.id.startswith("frtp/") else "SABUL.md",
        no_capture="no capture of the session (needs root for dumpcap/tcpdump)",
        blame=lambda v: names[rule.side],
    )
