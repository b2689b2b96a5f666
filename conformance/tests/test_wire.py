"""The codec against every hex example of UDT4.md §15, byte for byte, and malformed inputs."""

from __future__ import annotations

import pytest
from crafted import decode_as
from udtconf.seq import MAX, decseq, incseq, seqcmp, seqlen, seqoff
from udtconf.udt import wire
from udtconf.udt.wire import (
    Ack,
    Ack2,
    AckKind,
    Boundary,
    DataPacket,
    ErrorSignal,
    Handshake,
    KeepAlive,
    MsgDropRequest,
    Nak,
    Shutdown,
    UserDefined,
    WireError,
    decode,
    decode_loss_list,
    encode_loss_list,
)


def h(text: str) -> bytes:
    """Hex dump (with optional offset columns) to bytes."""
    out = []
    for line in text.strip().splitlines():
        parts = line.split()
        if len(parts[0]) == 4 and len(parts) > 1 and all(len(p) == 2 for p in parts[1:]):
            parts = parts[1:]
        out.extend(parts)
    return bytes(int(b, 16) for b in out)


CLIENT_ID, SERVER_ID, ISN, COOKIE = 0x1A2B3C4D, 0x00C0FFEE, 0x0BADF00D, 0x5EED1234

HS_REQUEST = h("""
0000  80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0010  00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
0020  00 00 20 00 00 00 00 01 1a 2b 3c 4d 00 00 00 00
0030  02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00
""")
HS_COOKIE = h("""
0000  80 00 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
0010  00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
0020  00 00 20 00 00 00 00 01 1a 2b 3c 4d 5e ed 12 34
0030  02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00
""")
HS_SECOND = h("""
0000  80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0010  00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
0020  00 00 20 00 ff ff ff ff 1a 2b 3c 4d 5e ed 12 34
0030  02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00
""")
HS_FINAL = h("""
0000  80 00 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
0010  00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
0020  00 00 20 00 ff ff ff ff 00 c0 ff ee 5e ed 12 34
0030  01 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00
""")


def _hs(req: int, sid: int, cookie: int, peer: str, dst: int) -> Handshake:
    return Handshake(
        dst_id=dst,
        version=4,
        sock_type=wire.SocketType.STREAM,
        isn=ISN,
        mss=1500,
        flight_flag_size=8192,
        req_type=req,
        socket_id=sid,
        cookie=cookie,
        peer_ip=wire.peer_ip_field(peer),
    )


HANDSHAKES = [
    ("15.1 request", HS_REQUEST, _hs(1, CLIENT_ID, 0, "10.0.0.2", 0)),
    ("15.1 cookie reply", HS_COOKIE, _hs(1, CLIENT_ID, COOKIE, "10.0.0.2", CLIENT_ID)),
    ("15.1 second request", HS_SECOND, _hs(-1, CLIENT_ID, COOKIE, "10.0.0.2", 0)),
    ("15.1 final response", HS_FINAL, _hs(-1, SERVER_ID, COOKIE, "10.0.0.1", CLIENT_ID)),
]

FIXTURES = HANDSHAKES + [
    (
        "15.2 data",
        h("0b ad f0 0d c0 00 00 01 00 00 27 10 00 c0 ff ee 55 44 54 34"),
        DataPacket(
            seq=ISN,
            msg_no=1,
            boundary=Boundary.SOLO,
            in_order=False,
            timestamp=10_000,
            dst_id=SERVER_ID,
            payload=b"UDT4",
        ),
    ),
    (
        "15.3 full ack",
        h("""
0000  80 02 00 00 00 00 00 07 00 00 00 00 1a 2b 3c 4d
0010  0b ad f0 a0 00 00 61 a8 00 00 18 6a 00 00 1f 40
0020  00 01 3c 68 00 01 73 18"""),
        Ack(
            dst_id=CLIENT_ID,
            ack_seq_no=7,
            ack_no=0x0BADF0A0,
            rtt=25_000,
            rtt_var=6_250,
            avail_buffer=8000,
            arrival_speed=81_000,
            link_capacity=95_000,
        ),
    ),
    ("15.3 ack2", h("80 06 00 00 00 00 00 07 00 00 00 00 00 c0 ff ee 00 00 00 00"), Ack2(dst_id=SERVER_ID, addl=7)),
    (
        "15.3 medium ack",
        h("""
0000  80 02 00 00 00 00 00 08 00 00 00 00 1a 2b 3c 4d
0010  0b ad f0 b0 00 00 5d c0 00 00 13 88 00 00 1f 36"""),
        Ack(dst_id=CLIENT_ID, ack_seq_no=8, ack_no=0x0BADF0B0, rtt=24_000, rtt_var=5_000, avail_buffer=7990),
    ),
    (
        "15.3 light ack",
        h("80 02 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d 0b ad f0 e0"),
        Ack(dst_id=CLIENT_ID, ack_seq_no=0, ack_no=0x0BADF0E0),
    ),
    (
        "15.4 nak",
        h("""
0000  80 03 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
0010  0b ad f0 10 8b ad f0 12 0b ad f0 15 0b ad f0 20
0020  8b ad f0 30 0b ad f0 31"""),
        Nak(dst_id=CLIENT_ID, words=(0x0BADF010, 0x8BADF012, 0x0BADF015, 0x0BADF020, 0x8BADF030, 0x0BADF031)),
    ),
    ("15.5 keep-alive", h("80 01 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00"), KeepAlive(dst_id=SERVER_ID)),
    ("15.5 shutdown", h("80 05 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00"), Shutdown(dst_id=SERVER_ID)),
    (
        "15.5 error 4000",
        h("80 08 00 00 00 00 0f a0 00 00 00 00 00 c0 ff ee 00 00 00 00"),
        ErrorSignal(dst_id=SERVER_ID, addl=4000),
    ),
    (
        "15.5 user ext 1",
        h("ff ff 00 01 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00"),
        UserDefined(dst_id=SERVER_ID, ext_type=1),
    ),
    (
        "15.5 drop request",
        h("80 07 00 00 00 00 00 05 00 00 00 00 00 c0 ff ee 0b ad f2 00 0b ad f2 03"),
        MsgDropRequest(dst_id=SERVER_ID, msg_no=5, first_seq=0x0BADF200, last_seq=0x0BADF203),
    ),
]


@pytest.mark.parametrize("name,raw,pkt", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_spec_example_decodes_to_expected_fields(name: str, raw: bytes, pkt: wire.Packet) -> None:
    assert decode(raw) == pkt


@pytest.mark.parametrize("name,raw,pkt", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_spec_example_encodes_byte_exact(name: str, raw: bytes, pkt: wire.Packet) -> None:
    assert pkt.encode() == raw
    assert decode(raw).encode() == raw


def test_handshake_lengths_are_64() -> None:
    for _, raw, _ in HANDSHAKES:
        assert len(raw) == 64


def test_peer_ip_is_little_endian_words() -> None:
    assert wire.peer_ip_field("127.0.0.1") == bytes.fromhex("0100007f") + bytes(12)
    assert decode_as(Handshake, HS_FINAL).peer_address == "10.0.0.1"
    v6 = "2001:db8::1"
    assert wire.peer_ip_from_field(wire.peer_ip_field(v6)) == v6


def test_word0_of_builtin_control_types() -> None:
    assert KeepAlive().encode()[:4] == bytes.fromhex("80010000")
    assert Nak(words=(1,)).encode()[:4] == bytes.fromhex("80030000")
    assert Ack2().encode()[:4] == bytes.fromhex("80060000")


def test_data_message_word_examples() -> None:
    assert DataPacket(seq=0, msg_no=1).msg_word == 0xC0000001
    words = [
        DataPacket(seq=0, msg_no=42, boundary=b, in_order=True).msg_word
        for b in (Boundary.FIRST, Boundary.MIDDLE, Boundary.LAST)
    ]
    assert words == [0xA000002A, 0x2000002A, 0x6000002A]


def test_ack_kind_by_length() -> None:
    assert decode_as(Ack, FIXTURES[5][1]).kind is AckKind.FULL
    assert decode_as(Ack, FIXTURES[7][1]).kind is AckKind.MEDIUM
    assert decode_as(Ack, FIXTURES[8][1]).kind is AckKind.LIGHT


def test_sixteen_byte_empty_control_is_accepted() -> None:
    pkt = decode(bytes.fromhex("80010000000000000000000000c0ffee"))
    assert isinstance(pkt, KeepAlive) and pkt.info_len == 0


# -- malformed inputs ------------------------------------------------------------------------

MALFORMED = [
    ("empty", b"", "2"),
    ("15-byte header", bytes(15), "2"),
    ("handshake 47 bytes info", HS_REQUEST[:-1], "2"),  # not a multiple of 4 first
    ("handshake 44 bytes info", HS_REQUEST[:-4], "5.1"),
    ("handshake 52 bytes info", HS_REQUEST + bytes(4), "5.1"),
    ("ack 8 bytes", bytes.fromhex("800200000000000100000000000000010000000100000002"), "5.3"),
    ("ack 20 bytes", bytes.fromhex("80020000000000010000000000000001") + bytes(20), "5.3"),
    ("ack empty", bytes.fromhex("80020000000000010000000000000001"), "5.3"),
    ("nak empty", bytes.fromhex("80030000000000000000000000000001"), "5.4"),
    ("nak trailing range start", bytes.fromhex("800300000000000000000000000000010000000380000005"), "5.4"),
    ("nak start > end", bytes.fromhex("800300000000000000000000000000018000000a00000005"), "5.4"),
    ("nak end with flag", bytes.fromhex("80030000000000000000000000000001800000058000000a"), "5.4"),
    ("keep-alive 8 bytes", bytes.fromhex("80010000000000000000000000000001") + bytes(8), "2"),
    ("shutdown nonzero pad", bytes.fromhex("8005000000000000000000000000000100000001"), "2"),
    ("odd control length", bytes.fromhex("80010000000000000000000000000001") + bytes(3), "2"),
    ("unknown type 9", bytes.fromhex("80090000000000000000000000000001") + bytes(4), "3.2"),
    ("ext type on builtin", bytes.fromhex("80010001000000000000000000000001") + bytes(4), "3.2"),
    ("drop request 4 bytes", bytes.fromhex("80070000000000050000000000000001") + bytes(4), "5.8"),
]


@pytest.mark.parametrize("name,raw,section", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_raises_with_section(name: str, raw: bytes, section: str) -> None:
    with pytest.raises(WireError) as exc:
        decode(raw)
    assert exc.value.section == section
    assert f"§{section}" in str(exc.value)


# -- loss-list compression --------------------------------------------------------------------


def test_loss_list_paper_vectors() -> None:
    ranges = decode_loss_list([0x00000003, 0x80000006, 0x0000000F, 0x00000012])
    assert ranges == [(3, 3), (6, 15), (18, 18)]
    assert encode_loss_list([2, *range(6, 12), 14]) == [0x00000002, 0x80000006, 0x0000000B, 0x0000000E]


def test_two_packet_run_is_a_range() -> None:
    assert encode_loss_list([5, 6]) == [0x80000005, 0x00000006]
    assert encode_loss_list([5]) == [5]


def test_loss_list_across_wrap() -> None:
    lost = [MAX - 1, MAX, 0, 1]
    words = encode_loss_list(lost)
    assert words == [(MAX - 1) | 0x80000000, 1]
    assert Nak(words=tuple(words)).losses() == lost


def test_loss_list_rejects_decreasing_input() -> None:
    with pytest.raises(WireError):
        encode_loss_list([5, 3])


def test_section_15_4_losses() -> None:
    nak = decode(FIXTURES[9][1])
    assert isinstance(nak, Nak)
    assert len(nak.losses()) == 8


# -- sequence arithmetic (§4) ----------------------------------------------------------------


def test_seq_functions_wrap() -> None:
    assert incseq(MAX) == 0 and decseq(0) == MAX
    assert seqcmp(0, MAX) > 0 and seqcmp(MAX, 0) < 0
    assert seqlen(MAX, 0) == 2 and seqlen(5, 5) == 1
    assert seqoff(MAX, 1) == 2 and seqoff(1, MAX) == -2
    assert incseq(MAX - 1, 3) == 1
