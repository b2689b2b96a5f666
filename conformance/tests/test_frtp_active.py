"""The FRTP active tester (udtconf.frtp.tester) against every selected FRTP stack, in the role
each probe needs: the stack as the sender (the tester connects as a misbehaving receiver) or as
the receiver (the tester listens as a misbehaving sender). ``pass``: the stack refused, aborted
or coped as FRTP.md asks; ``fail``: it echoed what it must refuse, hung, crashed, exceeded the
negotiated rate, or lost or invented data."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_stack import script_stack
from udtconf.frtp.tester import PROBES, FrtpProbe, run_probe
from udtconf.stacks import Stack
from verdicts import probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("frtp")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_frtp_probe(stack: Stack, probe: FrtpProbe, results_dir: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="FRTP.md", plays=f"as the {probe.role}")


# ---------------------------------------------------------------------------------------------
# The probes can fail: a naive FRTP stack that trusts its peer

NAIVE = r"""
import os, socket, struct, sys
role, case = os.environ["ROLE"], os.environ["TESTCASE"]
if case != "transfer":
    raise SystemExit(127)
addr = (os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"]))
if role == "server":  # echoes any block, whatever rate it asks for, then stops
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind(addr); ls.listen(1)
    c, _ = ls.accept()
    c.sendall(c.recv(52, socket.MSG_WAITALL))
    raise SystemExit(0)
tcp = socket.create_connection(addr)  # a receiver that takes a reset for the end of the stream
data_ip = os.environ.get("DATA_ADDR", "127.0.0.1")
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind((data_ip, 0))
block = struct.pack("!10I", udp.getsockname()[1], addr[1], 1472, 1468, 366, 0, 40960000, 40960000, 25600, 0)
tcp.sendall(block + socket.inet_aton(data_ip) + struct.pack("!Q", 40_000_000)); tcp.recv(52, socket.MSG_WAITALL)
out, got, nxt = open(os.environ["OUTPUT"], "wb"), {}, 0
tcp.setblocking(False); udp.settimeout(0.05)
while True:
    try:
        raw = udp.recv(65536)
        got[struct.unpack_from("!I", raw)[0]] = raw[4:]
        while nxt in got:
            out.write(got.pop(nxt)); nxt += 1
        tcp.send(struct.pack("!II", 1, nxt))
    except (TimeoutError, BlockingIOError):
        pass
    try:
        if not tcp.recv(100):
            break
    except BlockingIOError:
        pass
    except OSError:
        break
out.close()
raise SystemExit(0)
"""


@pytest.mark.parametrize(
    ("probe_id", "why"),
    [
        ("sender/rate-above-maximum", "echoed a rate of 2^63 bit/s"),
        ("receiver/control-cut-mid-transfer", "exit 0 after the control connection was cut"),
    ],
)
def test_a_naive_stack_fails_the_probe(probe_id: str, why: str, tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == probe_id)
    stack = script_stack(tmp_path, "naive", NAIVE, ["transfer"], protocol="frtp")
    res = run_probe(stack, probe, tmp_path / "probe")
    assert res.failed and why in res.details
    assert res.log is not None and res.verdict in res.log.read_text()
