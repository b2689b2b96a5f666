"""The SABUL active tester (udtconf.sabul.tester) against every selected SABUL stack, in the role
each probe needs: the stack as the sender (the tester connects as a misbehaving receiver) or as
the receiver (the tester listens as a misbehaving sender). ``pass``: the stack aborted (reset,
exit ≠ 0) or coped as SABUL.md asks; ``fail``: it claimed success, hung, crashed, closed with a
FIN where it had to reset, or lost or invented data."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_stack import script_stack
from udtconf.sabul.tester import PROBES, SabulProbe, run_probe
from udtharness.stacks import Stack
from verdicts import RecordProperty, probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("sabul")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_sabul_probe(stack: Stack, probe: SabulProbe, results_dir: Path, record_property: RecordProperty) -> None:
    plays = f"as the {probe.role}"
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="SABUL.md", plays=plays)


# ---------------------------------------------------------------------------------------------
# The probes can fail: naive stacks that trust their peer

NAIVE = r"""
import os, socket, struct, sys
role, case = os.environ["ROLE"], os.environ["TESTCASE"]
if case != "transfer":
    raise SystemExit(127)
addr = (os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"]))
if role == "server":  # echoes any block, then stops: no validation at all
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind(addr); ls.listen(1)
    c, _ = ls.accept()
    c.sendall(c.recv(40, socket.MSG_WAITALL))
    raise SystemExit(0)
tcp = socket.create_connection(addr)  # a receiver that takes any close, a reset too, for the end
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
block = struct.pack("!10I", udp.getsockname()[1], addr[1], 1472, 1468, 366, 0, 40960000, 40960000, 25600, 0)
tcp.sendall(block); tcp.recv(40, socket.MSG_WAITALL)
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


def _naive_stack(tmp_path: Path) -> Stack:
    return script_stack(tmp_path, "naive", NAIVE, ["transfer"], protocol="sabul")


@pytest.mark.parametrize(
    ("probe_id", "why"),
    [
        ("sender/bogus-option-block", "echoed an invalid block"),
        ("receiver/reset-mid-transfer", "exit 0 after a reset"),
    ],
)
def test_a_naive_stack_fails_the_probe(probe_id: str, why: str, tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == probe_id)
    res = run_probe(_naive_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed and why in res.details
    assert res.log is not None and res.verdict in res.log.read_text()
    assert res.pcap is not None and res.pcap.stat().st_size > 24  # the tester's side, recorded by the tester
