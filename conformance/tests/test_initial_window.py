"""udt4/11/initial-window on hand-made traces: a sender within its initial window passes, one
packet beyond it is a violation naming the sender (UDT4.md §7 step 2, §11, §12.1)."""

from __future__ import annotations

import crafted
import pytest
from crafted import CID, SID, conn_of
from udtconf.checks import Inconclusive
from udtconf.seq import MAX, incseq
from udtconf.udt.checks import Context, rule_by_id
from udtconf.udt.trace import Connection
from udtconf.udt.wire import Ack, DataPacket

RULE = "udt4/11/initial-window"


def trace(isn: int, *pkts: tuple[str, bytes], ffs: int = 8192) -> Connection:
    hs = [(sender, raw) for sender, _, raw in crafted.handshake(isn=isn, ffs=ffs)]
    return conn_of(*[(sender, i * 0.001, raw) for i, (sender, raw) in enumerate([*hs, *pkts], start=1)])


def data(seq: int, sender: str = "client") -> tuple[str, bytes]:
    return (sender, DataPacket(seq=seq, msg_no=1, dst_id=SID, payload=b"x" * 100).encode())


def burst(isn: int, n: int) -> list[tuple[str, bytes]]:
    out, s = [], isn
    for _ in range(n):
        out.append(data(s))
        s = incseq(s)
    return out


def full_ack(ack_no: int) -> tuple[str, bytes]:
    a = Ack(
        dst_id=CID, ack_seq_no=1, ack_no=ack_no, rtt=1, rtt_var=1, avail_buffer=8192, arrival_speed=1, link_capacity=1
    )
    return ("server", a.encode())


def violations(conn: Connection) -> list[tuple[str, int | None, str]]:
    return [(v.party, v.frame, v.message) for v in rule_by_id(RULE).run(conn, Context("transfer"))]


def test_sixteen_packets_then_an_ack_pass() -> None:
    isn = 1000
    c = trace(isn, *burst(isn, 16), full_ack(isn + 16), *burst(isn + 16, 32))
    assert violations(c) == []


def test_the_seventeenth_packet_before_any_ack_names_the_sender() -> None:
    isn = 1000
    c = trace(isn, *burst(isn, 17), full_ack(isn + 17))
    got = violations(c)
    assert len(got) == 1
    sender, frame, msg = got[0]
    assert sender == "client" and frame == 4 + 17
    assert "17 packets unacknowledged" in msg and "initial window is 16" in msg


def test_retransmissions_do_not_count_and_the_window_wraps() -> None:
    isn = MAX - 5  # the window wraps past MAX (§4)
    c = trace(isn, *burst(isn, 16), data(isn), data(incseq(isn, 3)), full_ack(incseq(isn, 16)))
    assert violations(c) == []


def test_light_ack_slides_the_window_but_does_not_grow_it() -> None:
    isn = 1000
    light = ("server", Ack(dst_id=CID, ack_no=isn + 4).encode())
    assert violations(trace(isn, *burst(isn, 16), light, *burst(isn + 16, 4))) == []
    assert violations(trace(isn, *burst(isn, 16), light, *burst(isn + 16, 5)))


def test_a_small_peer_flow_window_bounds_the_burst() -> None:
    isn = 1000
    assert violations(trace(isn, *burst(isn, 8), ffs=8)) == []
    assert violations(trace(isn, *burst(isn, 9), ffs=8))


def test_no_data_is_inconclusive() -> None:
    with pytest.raises(Inconclusive):
        violations(trace(1000))
