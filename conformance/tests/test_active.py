"""The active tester against every selected stack, in the role each probe needs.

``pass`` — behaved as the spec asks; ``tolerated``/``broken`` — the input is one where the spec
allows ignoring it or dropping the connection (4.11 drops it): recorded, not failed; ``fail`` —
crash, hang, corrupted or lost data, or a rule broken.

Each probe starts a fresh process of the stack with the TESTCASE it needs (``transfer``,
``multiconnect`` for the probes with three connections, ``dgram`` for the DGRAM drop requests;
skipped when meta.toml does not list it)
and leaves ``probe.log`` and ``probe.pcap`` in its directory, which the report links.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from script_stack import script_stack
from udtconf.udt.peer import ClientSession, Wire
from udtconf.udt.tester import ABSURD_HANDSHAKES, DEADLINES, PROBES, Probe, run_probe
from udtconf.udt.tester.msg_drop import _whole_messages
from udtconf.udt.wire import Ack, Handshake
from udtharness.pcap import read_udp
from udtharness.stacks import Stack
from verdicts import RecordProperty, probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("udt")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(stack: Stack, probe: Probe, results_dir: Path, record_property: RecordProperty) -> None:
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="UDT4.md", plays=probe.role)


# ---------------------------------------------------------------------------------------------
# How the tester drives a stack (docs/conformance/adapter-contract.md, Active tester)

CRASHING_SERVER = r"""
import json, os, socket, sys
env = {k: os.environ.get(k) for k in ("ROLE", "TESTCASE", "CONNECTIONS", "CLIENT_ADDR", "CLIENT_PORT", "MSS")}
open(os.path.join(os.environ["LOGDIR"], f"env-{os.environ['TESTCASE']}.json"), "w").write(json.dumps(env))
if os.environ["TESTCASE"] not in ("transfer", "multiconnect"):
    raise SystemExit(127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
s.recvfrom(65535)
print("thread 'main' panicked at src/listener.rs:42:9:\nindex out of bounds: the len is 3 but the index is 3",
      file=sys.stderr)
raise SystemExit(101)
"""


def _crashing_stack(tmp_path: Path) -> Stack:
    return script_stack(tmp_path, "crashy", CRASHING_SERVER, ["transfer", "multiconnect"])


def test_a_probe_runs_a_fresh_transfer_server_and_reports_its_crash(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/malformed-then-serve")
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    assert "crashy log: thread 'main' panicked at src/listener.rs:42:9: index out of bounds" in res.details
    env = json.loads((tmp_path / "probe/env-transfer.json").read_text())
    assert env == {
        "ROLE": "server",
        "TESTCASE": "transfer",
        "CONNECTIONS": None,
        "CLIENT_ADDR": None,
        "CLIENT_PORT": None,
        "MSS": None,
    }
    assert res.log is not None and res.verdict in res.log.read_text()
    assert res.pcap is not None and read_udp(res.pcap)  # what the tester sent, written by the tester


def test_the_many_connections_probe_asks_for_multiconnect(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/many-connections-one-port")
    assert probe.testcase == "multiconnect"
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    env = json.loads((tmp_path / "probe/env-multiconnect.json").read_text())
    assert (env["TESTCASE"], env["CONNECTIONS"]) == ("multiconnect", "3")


# ---------------------------------------------------------------------------------------------
# The hostile-peer probes (issue 14) have teeth: a receiver that trusts its peer fails them

NAIVE_RECEIVER = r"""
import os, socket, time
from dataclasses import replace
from udtconf.seq import incseq
from udtconf.udt.wire import Ack, DataPacket, Handshake, MsgDropRequest, Shutdown, decode

# A UDT listener with no backlog that honours a message drop request even on a STREAM: it
# acknowledges past the dropped numbers and writes the stream without them.
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
s.settimeout(0.01)
conns, by_peer = {}, {}  # own socket ID -> connection; (address, peer ID) -> own socket ID
while True:
    try:
        raw, src = s.recvfrom(65535)
        p = decode(raw)
    except (OSError, ValueError):
        p = None
    if isinstance(p, Handshake) and p.req_type == 1:
        s.sendto(replace(p, cookie=7, dst_id=p.socket_id).encode(), src)
    elif isinstance(p, Handshake) and p.cookie == 7:
        sid = by_peer.setdefault((src, p.socket_id), 1000 + len(by_peer))
        conns.setdefault(sid, {"peer": src, "id": p.socket_id, "isn": p.isn, "got": {}, "dropped": set()})
        s.sendto(replace(p, socket_id=sid, dst_id=p.socket_id, mss=min(p.mss, 1500)).encode(), src)
    elif p is not None and p.dst_id in conns:
        c = conns[p.dst_id]
        if isinstance(p, DataPacket):
            c["got"][p.seq] = p.payload
        elif isinstance(p, MsgDropRequest):
            q = p.first_seq
            while q != incseq(p.last_seq):
                c["dropped"].add(q)
                q = incseq(q)
        elif isinstance(p, Shutdown):
            q, out = c["isn"], []
            while q in c["got"] or q in c["dropped"]:
                out.append(c["got"].get(q, b""))
                q = incseq(q)
            open(os.environ["OUTPUT"], "wb").write(b"".join(out))
            raise SystemExit(0)
    for c in conns.values():
        q = c["isn"]
        while q in c["got"] or q in c["dropped"]:
            q = incseq(q)
        if c["got"]:
            ack = Ack(dst_id=c["id"], ack_seq_no=1, ack_no=q, rtt=10000, rtt_var=5000, avail_buffer=8192,
                      arrival_speed=1000, link_capacity=1000)
            s.sendto(ack.encode(), c["peer"])
"""


def _naive_stack(tmp_path: Path) -> Stack:
    return script_stack(tmp_path, "naive", NAIVE_RECEIVER, ["transfer"])


def test_a_stream_receiver_that_honours_a_drop_request_fails_on_the_hole(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/msg-drop-stream-hole")
    res = run_probe(_naive_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    assert f"stack wrote {(64 - 10) * 1456} bytes, expected {64 * 1456}" in res.details


def test_a_listener_without_a_backlog_fails_the_completed_handshake_flood(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/completed-handshake-flood")
    res = run_probe(_naive_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    assert "connections accepted with backlog 1" in res.details
    assert any("VmRSS" in n for n in res.notes)


def test_absurd_handshakes_report_each_value_and_the_crash(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/handshake-absurd-mss-ffs")
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    assert [n.split(":")[0] for n in res.notes] == [label for label, _, _ in ABSURD_HANDSHAKES]
    assert "MSS 0: crashed" in res.details
    assert "index out of bounds" in res.notes[0]  # each value's own stack log
    # issue 41: each value's stack ran in a subdirectory of its own, and probe.log tails each log
    assert res.log is not None
    text = res.log.read_text()
    assert "last 0 lines" not in text
    assert "crashy server log (mss-0/server.log), last 2 lines:" in text
    assert text.count("index out of bounds") > len(ABSURD_HANDSHAKES)  # the notes', then each log's


def test_the_error_signal_probe_asks_for_three_connections(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/error-signal-among-three")
    assert probe.testcase == "multiconnect"
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    env = json.loads((tmp_path / "probe/env-multiconnect.json").read_text())
    assert (env["TESTCASE"], env["CONNECTIONS"]) == ("multiconnect", "3")


def test_whole_messages_reject_a_partial_message() -> None:
    msgs = [b"aa", b"bbbb", b"cc"]
    assert _whole_messages(b"aacc", msgs) == [1, 3]
    assert _whole_messages(b"aabbcc", msgs) is None


def test_the_tester_ignores_an_ack_beyond_what_it_sent() -> None:
    w = Wire()
    try:
        sess = ClientSession(w, ("127.0.0.1", 9), 1, 2, 100, 1500, Handshake(), Handshake())
        sess.next_seq = 110
        sess.handle(Ack(dst_id=1, ack_seq_no=1, ack_no=100 + (1 << 30), rtt=1, rtt_var=1, avail_buffer=2), {})
        assert sess.last_ack == 100
        sess.handle(Ack(dst_id=1, ack_seq_no=2, ack_no=105, rtt=1, rtt_var=1, avail_buffer=2), {})
        assert sess.last_ack == 105
    finally:
        w.close()


# A listener that never stops sending: every address it hears from gets a keep-alive every 10 ms.
NEVER_QUIET = r"""
import os, select, socket, struct
if os.environ["TESTCASE"] != "transfer":
    raise SystemExit(127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
heard = set()
while True:
    if select.select([s], [], [], 0.01)[0]:
        heard.add(s.recvfrom(65535)[1])
    for a in heard:
        s.sendto(struct.pack("!IIII", 0x80010000, 0, 0, 0), a)
"""


def test_a_probe_ends_at_its_deadline_however_the_stack_behaves(tmp_path: Path) -> None:
    # issue 41: server/malformed-then-serve waited 20 minutes for such a listener to go quiet
    probe = next(p for p in PROBES if p.id == "server/malformed-then-serve")
    t0 = time.monotonic()
    res = run_probe(
        script_stack(tmp_path, "chatty", NEVER_QUIET, ["transfer"]), probe, tmp_path / "probe", deadline=3.0
    )
    wall = time.monotonic() - t0
    assert res.failed
    assert res.details.startswith("ran into its 3 s deadline, still waiting on the stack in _serve_transfer()")
    assert res.details.endswith("the stack was stopped there")
    assert wall < 3.0 + 5.0, f"{wall:.1f} s: the deadline did not hold"  # a bound on a hang, not a speed


def test_every_deadline_is_a_probe_s() -> None:
    assert set(DEADLINES) <= {p.id for p in PROBES}
