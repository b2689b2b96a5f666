"""The loss relay with plain UDP sockets standing in for the two stacks."""

from __future__ import annotations

import socket
from pathlib import Path

from crafted import decode_as
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
