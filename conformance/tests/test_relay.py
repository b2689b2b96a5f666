"""The loss relay with plain UDP sockets standing in for the two stacks; and the wrap case through
it with a pair whose handshake the relay cannot read."""

from __future__ import annotations

import socket
from pathlib import Path

from crafted import decode_as
from script_stack import script_stack
from udtconf.family import RUNS
from udtconf.runner import InteropRunner, RunStatus
from udtconf.seq import MAX, incseq
from udtconf.udt.relay import LossRelay, wrap_target
from udtconf.udt.wire import Ack, DataPacket, Handshake, Nak, encode_loss_list
from udtharness.pcap import read_udp


def _sock() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(2.0)
    return s


def test_drops_chosen_offsets_once_and_shifts_across_wrap(tmp_path: Path) -> None:
    server, client = _sock(), _sock()
    isn = 1000
    target = wrap_target(3)  # ISN appears as MAX-2: offsets 0,1,2 before the wrap, 3 → 0
    with LossRelay(server.getsockname(), drop=[1, 4], isn_target=target, capture=tmp_path / "r.pcap") as relay:
        client.sendto(Handshake(isn=isn, socket_id=7).encode(), relay.address)
        hs, up = server.recvfrom(2048)
        assert decode_as(Handshake, hs).isn == target
        # the response's ISN is translated back
        server.sendto(Handshake(isn=target, socket_id=9, req_type=-1, dst_id=7).encode(), up)
        assert decode_as(Handshake, client.recv(2048)).isn == isn
        for off in range(6):
            client.sendto(DataPacket(seq=isn + off, msg_no=1, dst_id=9).encode(), relay.address)
        client.sendto(DataPacket(seq=isn + 1, msg_no=1, dst_id=9).encode(), relay.address)  # retransmission
        got = [decode_as(DataPacket, server.recv(2048)).seq for _ in range(5)]
        expect = [incseq(target, o) for o in (0, 2, 3, 5, 1)]
        assert got == expect
        assert relay.dropped == [incseq(target, 1), incseq(target, 4)]
        # feedback is translated back into the client's numbering, range flag kept
        lost = [incseq(target, 1), incseq(target, 2), incseq(target, 3)]  # MAX-1, MAX, 0
        assert lost == [MAX - 1, MAX, 0]
        server.sendto(Nak(dst_id=7, words=tuple(encode_loss_list(lost))).encode(), up)
        assert decode_as(Nak, client.recv(2048)).losses() == [isn + 1, isn + 2, isn + 3]
        server.sendto(Ack(dst_id=7, ack_no=incseq(target, 6)).encode(), up)
        assert decode_as(Ack, client.recv(2048)).ack_no == isn + 6
    legs = read_udp(tmp_path / "r.pcap")
    assert len(legs) == 2 * (2 + 5 + 2) + 2  # both legs of forwarded packets + 2 dropped (one leg)


def test_without_shift_numbers_pass_unchanged() -> None:
    server, client = _sock(), _sock()
    with LossRelay(server.getsockname()) as relay:
        client.sendto(Handshake(isn=5, socket_id=7).encode(), relay.address)
        assert decode_as(Handshake, server.recv(2048)).isn == 5
        client.sendto(DataPacket(seq=5, msg_no=1, dst_id=9).encode(), relay.address)
        assert decode_as(DataPacket, server.recv(2048)).seq == 5


def test_client_isn_with_bit_31_set_passes_both_ways_byte_for_byte() -> None:
    # A client that draws its ISN (and socket ID) from all 32 bits reaches a server directly;
    # through a relay that moves nothing, it must reach it the same way: every byte unchanged.
    server, client = _sock(), _sock()
    isn, cid = 0x80001234, 0x80000007
    with LossRelay(server.getsockname(), drop=[3]) as relay:
        request = Handshake(isn=isn, socket_id=cid, req_type=1).encode()
        client.sendto(request, relay.address)
        got, up = server.recvfrom(2048)
        assert got == request
        reply = Handshake(isn=isn, socket_id=cid, req_type=1, cookie=77, dst_id=cid).encode()
        server.sendto(reply, up)
        assert client.recv(2048) == reply
        data = DataPacket(seq=isn & MAX, msg_no=1, dst_id=9).encode()
        client.sendto(data, relay.address)
        assert server.recv(2048) == data


def test_a_shift_returns_the_client_its_own_isn_word_with_bit_31() -> None:
    server, client = _sock(), _sock()
    isn, target = 0x80000010, wrap_target(5)
    with LossRelay(server.getsockname(), isn_target=target) as relay:
        client.sendto(Handshake(isn=isn, socket_id=7).encode(), relay.address)
        hs, up = server.recvfrom(2048)
        assert decode_as(Handshake, hs).isn == target
        server.sendto(Handshake(isn=target, socket_id=9, req_type=-1, dst_id=7).encode(), up)
        assert decode_as(Handshake, client.recv(2048)).isn == isn
        client.sendto(DataPacket(seq=isn & MAX, msg_no=1, dst_id=9).encode(), relay.address)
        assert decode_as(DataPacket, server.recv(2048)).seq == target


def test_bottleneck_paces_and_tail_drops() -> None:
    import time

    server, client = _sock(), _sock()
    with LossRelay(server.getsockname(), rate_pps=200, queue=5) as relay:
        client.sendto(Handshake(isn=0, socket_id=7).encode(), relay.address)
        server.recv(2048)
        t0 = time.monotonic()
        for s in range(10):
            client.sendto(DataPacket(seq=s, msg_no=1, dst_id=9).encode(), relay.address)
        got = [decode_as(DataPacket, server.recv(2048)).seq for _ in range(5)]
        elapsed = time.monotonic() - t0
    assert got == [0, 1, 2, 3, 4]  # handshake's slot freed before the burst; 5 queued, the rest tail-dropped
    assert relay.dropped == [5, 6, 7, 8, 9] and relay.tail_drops == 5
    assert elapsed >= 4 / 200  # five packets at 200 pps: at least 20 ms


def test_drop_rexmit_drops_the_original_and_its_first_retransmission() -> None:
    server, client = _sock(), _sock()
    isn = 50
    with LossRelay(server.getsockname(), drop=[1], drop_rexmit=[3]) as relay:
        client.sendto(Handshake(isn=isn, socket_id=7).encode(), relay.address)
        server.recv(2048)
        # offsets 0..4, then offset 3 three times (two retransmissions) and offset 1 once more
        for off in [0, 1, 2, 3, 4, 3, 3, 1]:
            client.sendto(DataPacket(seq=isn + off, msg_no=1, dst_id=9).encode(), relay.address)
        got = [decode_as(DataPacket, server.recv(2048)).seq - isn for _ in range(5)]
    assert got == [0, 2, 4, 3, 1]  # only the second retransmission of 3 gets through
    assert relay.dropped == [isn + 1, isn + 3, isn + 3]


def test_the_relay_says_whether_the_server_saw_the_wrap() -> None:
    server, client = _sock(), _sock()
    isn = 1000
    with LossRelay(server.getsockname(), isn_target=wrap_target(2)) as relay:
        client.sendto(Handshake(isn=isn, socket_id=7).encode(), relay.address)
        server.recv(2048)
        for off in range(2):  # MAX - 1, MAX: not yet across
            client.sendto(DataPacket(seq=isn + off, msg_no=1, dst_id=9).encode(), relay.address)
            server.recv(2048)
    assert relay.wrap_missed() == "no data packet numbered past the 2^31 wrap reached the server (2 passed on)"
    with LossRelay(server.getsockname(), isn_target=wrap_target(2)) as relay:
        client.sendto(Handshake(isn=isn, socket_id=7).encode(), relay.address)
        server.recv(2048)
        for off in range(3):  # MAX - 1, MAX, 0
            client.sendto(DataPacket(seq=isn + off, msg_no=1, dst_id=9).encode(), relay.address)
            server.recv(2048)
    assert relay.wrap_missed() is None


def test_a_handshake_too_short_for_an_isn_moves_nothing_and_the_relay_says_so() -> None:
    # issue 41: a stack whose handshake body is 28 bytes, not 4.x's 48, went through the wrap
    # relay untouched, and its wrap cell passed although nothing had wrapped
    server, client = _sock(), _sock()
    with LossRelay(server.getsockname(), isn_target=wrap_target(100)) as relay:
        client.sendto(Handshake(isn=1000, socket_id=7).encode()[:44], relay.address)
        assert len(server.recv(2048)) == 44
        for off in range(150):
            client.sendto(DataPacket(seq=1000 + off, msg_no=1, dst_id=9).encode(), relay.address)
            assert decode_as(DataPacket, server.recv(2048)).seq == 1000 + off  # not moved
    assert relay.wrap_missed() == (
        "the relay saw only handshakes of 44 bytes from the client, not UDT4's 64 (§5.1): with no ISN to "
        "read it moved no sequence number, so the server never saw the 2^31 wrap"
    )


# Both roles of a stack whose handshake has a 28-byte body (44-byte datagrams): the client sends
# INPUT's packets twice (the wrap relay drops three of them once each), then a Shutdown; the
# server writes them in order once it has that Shutdown.
SHORT_HANDSHAKE_PAIR = r"""
import os, socket, struct, time
if os.environ["TESTCASE"] != "wrap":
    raise SystemExit(127)
HDR = struct.Struct("!IIII")
SHUTDOWN = 0x80050000
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if os.environ["ROLE"] == "server":
    s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
    s.settimeout(20)
    got = {}
    while (pkt := s.recvfrom(65535)[0]) and HDR.unpack_from(pkt)[0] != SHUTDOWN:
        if not HDR.unpack_from(pkt)[0] & 0x80000000:
            got.setdefault(HDR.unpack_from(pkt)[0], pkt[16:])
    with open(os.environ["OUTPUT"], "wb") as out:
        out.write(b"".join(got[k] for k in sorted(got)))
else:
    to = (os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"]))
    s.sendto(HDR.pack(0x80000000, 0, 0, 0) + bytes(28), to)
    data = open(os.environ["INPUT"], "rb").read()
    chunks = [data[i : i + 1456] for i in range(0, len(data), 1456)]
    for _ in range(2):
        for k, chunk in enumerate(chunks):
            s.sendto(HDR.pack(1000 + k, 0, 0, 0) + chunk, to)
            time.sleep(0.0002)
    time.sleep(0.2)
    s.sendto(HDR.pack(SHUTDOWN, 0, 0, 0), to)
"""


def test_a_wrap_case_that_never_wrapped_is_inconclusive(tmp_path: Path) -> None:
    stack = script_stack(tmp_path, "shorths", SHORT_HANDSHAKE_PAIR, ["wrap"])
    res = InteropRunner(RUNS, tmp_path / "results", capture=False).run(stack, stack, "wrap")
    assert res.status == RunStatus.INCONCLUSIVE, res.reason
    assert res.reason.startswith("inconclusive: the relay saw only handshakes of 44 bytes"), res.reason
    assert res.reason.endswith("bytes delivered intact"), res.reason
