"""End-to-end self-test of the live pipeline with an impostor stack.

The impostor moves the bytes over plain UDP with a UDT-looking data header but no handshake,
no ACK and no Shutdown. The interop comparison (bytes intact) cannot tell; the wire rules on the
capture must.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from udtconf.checks import Inconclusive
from udtconf.family import RUNS
from udtconf.runner import InteropRunner, RunStatus
from udtconf.udt.checks import Context, rule_by_id
from udtconf.udt.interop import UdtRunResult
from udtharness.capture import can_capture
from udtharness.stacks import load

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

IMPOSTOR = r"""
import os, socket, struct
role, addr, port = os.environ["ROLE"], os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])
if os.environ["TESTCASE"] != "handshake":
    raise SystemExit(127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if role == "server":
    s.bind((addr, port))
    data, _ = s.recvfrom(65535)
    open(os.environ["OUTPUT"], "wb").write(data[16:])
else:
    payload = open(os.environ["INPUT"], "rb").read()
    s.sendto(struct.pack("!IIII", 5, 0xC0000001, 0, 0) + payload, (addr, port))
"""


@pytest.mark.skipif(not can_capture(), reason="needs root to capture")
def test_wire_rules_catch_what_byte_comparison_cannot(tmp_path: Path) -> None:
    d = tmp_path / "impostor"
    d.mkdir()
    (d / "meta.toml").write_text('name = "impostor"\nversion = "0"\ntestcases = ["handshake"]\n')
    (d / "impostor.py").write_text(IMPOSTOR)
    ep = d / "entrypoint"
    ep.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$(dirname "$0")/impostor.py"\n')
    ep.chmod(0o755)
    stack = load(d)
    res = InteropRunner(RUNS, tmp_path / "results").run(stack, stack, "handshake")
    assert res.status == RunStatus.PASS, res.reason  # the bytes did arrive intact
    assert isinstance(res, UdtRunResult)
    (conn,) = res.conns
    ctx = Context("handshake")
    (v,) = rule_by_id("udt4/6.1/cookie-round").run(conn, ctx)
    assert v.party == "client" and "without any handshake" in v.message
    with pytest.raises(Inconclusive):  # no handshake at all: nothing to compare socket IDs with
        rule_by_id("udt4/3.3/destination-id").run(conn, ctx)
    with pytest.raises(Inconclusive):  # nothing was acknowledged: no close was due
        rule_by_id("udt4/5.6/shutdown-on-close").run(conn, ctx)
