"""The FRTP active tester (udtconf.frtp.tester) against every selected FRTP stack, in the role
each probe needs: the stack as the sender (the tester connects as a misbehaving receiver) or as
the receiver (the tester listens as a misbehaving sender). ``pass``: the stack refused, aborted
or coped as FRTP.md asks; ``fail``: it echoed what it must refuse, hung, crashed, exceeded the
negotiated rate, or lost or invented data."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_stack import script_stack
from test_sabul_active import NAIVE as SABUL_NAIVE
from udtconf.frtp.tester import PROBES, FrtpProbe, run_probe
from udtharness.stacks import Stack
from verdicts import RecordProperty, probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("frtp")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_frtp_probe(stack: Stack, probe: FrtpProbe, results_dir: Path, record_property: RecordProperty) -> None:
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="FRTP.md", plays=f"as the {probe.role}")


# ---------------------------------------------------------------------------------------------
# The probes can fail: a naive FRTP stack that trusts its peer (echoes any block, takes a reset for
# the end of the stream)


def _naive_frtp() -> str:
    """test_sabul_active's naive SABUL script with FRTP's 52-byte block (data_ip 0, 40 Mbit/s)."""
    script = SABUL_NAIVE
    for old, new in [
        ("c.recv(40, socket.MSG_WAITALL)", "c.recv(52, socket.MSG_WAITALL)"),
        ("tcp.sendall(block); tcp.recv(40,", "tcp.sendall(block + struct.pack('!IQ', 0, 40_000_000)); tcp.recv(52,"),
    ]:
        assert old in script
        script = script.replace(old, new)
    return script


@pytest.mark.parametrize(
    ("probe_id", "why"),
    [
        ("sender/rate-above-maximum", "echoed a rate of 2^63 bit/s"),
        ("receiver/control-cut-mid-transfer", "exit 0 after the control connection was cut"),
    ],
)
def test_a_naive_stack_fails_the_probe(probe_id: str, why: str, tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == probe_id)
    stack = script_stack(tmp_path, "naive", _naive_frtp(), ["transfer"], protocol="frtp")
    res = run_probe(stack, probe, tmp_path / "probe")
    assert res.failed and why in res.details
    assert res.log is not None and res.verdict in res.log.read_text()
