"""The SABUL codec (udtconf.sabul.wire) against SABUL.md §12 byte for byte, every packet's round
trip, the malformed inputs of §3.2–3.4, and properties over arbitrary bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from udtconf.sabul.wire import (
    Ack,
    ControlReader,
    Data,
    Err,
    OptionBlock,
    SabulWireError,
    Syn,
    decode_control,
    decode_control_stream,
    decode_data,
    decode_option_block,
    describe,
    encode_raw_control,
)
from udtconf.seq import MAX


def h(text: str) -> bytes:
    """A hex dump of SABUL.md §12 (offset column optional) as bytes."""
    out: list[str] = []
    for line in text.strip().splitlines():
        parts = line.split()
        out.extend(parts[1:] if len(parts[0]) == 4 else parts)
    return bytes(int(b, 16) for b in out)


# SABUL.md §12, verbatim.
OPTION_BLOCK = h("""
0000  00 00 1b 59 00 00 1b 58 00 00 05 c0 00 00 05 bc
0010  00 00 01 6e 00 00 00 00 02 71 00 00 02 71 00 00
0020  00 00 64 00 00 00 00 00
""")
DATA = h("0000  00 00 00 01 53 41 42 55 4c")
ACK = h("0000  00 00 00 01 00 00 04 00")
SYN = h("0000  00 00 00 04 00 00 03 e8")
ERR = h("""
0000  00 00 00 02 00 00 00 04 00 00 00 64 80 00 00 c8
0010  00 00 00 cb 00 00 01 2c
""")


def test_section_12_option_block() -> None:
    block = decode_option_block(OPTION_BLOCK)
    assert block == OptionBlock(data_port=7001, ctrl_port=7000)  # every other word at its default
    assert (block.pkt_size, block.payload_size, block.max_loss_length) == (1472, 1468, 366)
    assert (block.send_buf_size, block.recv_buf_size, block.recv_flag_size) == (40_960_000, 40_960_000, 25_600)
    assert block.encode() == OPTION_BLOCK
    assert OptionBlock.for_packet_size(1472, 7001, 7000) == block


def test_section_12_data() -> None:
    assert decode_data(DATA) == Data(1, b"SABUL")
    assert Data(1, b"SABUL").encode() == DATA


def test_section_12_ack_and_syn() -> None:
    assert decode_control(ACK) == Ack(1024) and Ack(1024).encode() == ACK
    assert decode_control(SYN) == Syn(1000) and Syn(1000).encode() == SYN


def test_section_12_err() -> None:
    err = decode_control(ERR)
    assert isinstance(err, Err)
    assert err.words == (0x64, 0x800000C8, 0xCB, 0x12C)
    assert err.ranges() == [(100, 100), (200, 203), (300, 300)]
    assert (err.lost, err.first) == (6, 100)
    assert Err.from_losses([100, 200, 201, 202, 203, 300]).encode() == ERR


def test_uncompressed_err_as_the_2003_code_sent_it_decodes() -> None:
    err = decode_control(encode_raw_control(2, 3, [5, 6, 7]))
    assert isinstance(err, Err) and err.ranges() == [(5, 5), (6, 6), (7, 7)] and err.lost == 3


@pytest.mark.parametrize(
    "frame",
    [Ack(0), Ack(MAX), Syn(0), Syn(0xFFFFFFFF), Err((7,)), Err.from_losses([MAX - 1, MAX, 0, 1, 9])],
    ids=str,
)
def test_control_round_trip(frame: Ack | Syn | Err) -> None:
    assert decode_control(frame.encode()) == frame


def test_err_across_the_wrap_is_one_range() -> None:
    err = Err.from_losses([MAX - 1, MAX, 0, 1])
    assert err.words == (0x80000000 | (MAX - 1), 1) and err.lost == 4


@pytest.mark.parametrize(
    ("raw", "section", "what"),
    [
        (b"\x00\x00\x00", "3.2", "shorter than its 8-byte header"),
        (encode_raw_control(9, 0), "3.2", "unknown control type 9"),
        (encode_raw_control(3, 0), "3.2", "never on the wire"),
        (encode_raw_control(1, 0x80000000), "3.2", "bit 31"),
        (encode_raw_control(2, 0), "3.2", "no loss-list words"),
        (encode_raw_control(2, 1_000_000_000), "3.2", "claims 1000000000 loss-list words"),
        (encode_raw_control(2, 2, [5]), "3.2", "header says 16"),
        (ACK + b"\x00", "3.2", "header says 8"),
        (encode_raw_control(2, 1, [0x80000005]), "3.3", "range-start word"),
        (encode_raw_control(2, 2, [0x80000009, 5]), "3.3", "after its end"),
        (encode_raw_control(2, 2, [0x80000005, 0x80000009]), "3.3", "bit 31 set"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_control(raw: bytes, section: str, what: str) -> None:
    with pytest.raises(SabulWireError, match=what) as e:
        decode_control(raw)
    assert e.value.section == section and f"SABUL.md §{section}" in str(e.value)


def test_err_limit_follows_the_session_max_loss_length() -> None:
    raw = Err.from_losses(range(0, 300, 2)).encode()  # 150 single words
    assert isinstance(decode_control(raw, max_loss_length=150), Err)
    with pytest.raises(SabulWireError, match="claims 150 .* is 149"):
        decode_control(raw, max_loss_length=149)


@pytest.mark.parametrize(
    ("raw", "pkt_size", "what"),
    [
        (b"", None, "0 bytes"),
        (b"\x00\x00\x00\x01", None, "needs the 4-byte header and a payload"),
        (b"\x80\x00\x00\x01x", None, "bit 31"),
        (b"\x00" * 4 + b"x" * 1469, 1472, "exceeds the packet size 1472"),
    ],
)
def test_malformed_data(raw: bytes, pkt_size: int | None, what: str) -> None:
    with pytest.raises(SabulWireError, match=what):
        decode_data(raw, pkt_size)


def test_full_data_packet_fits() -> None:
    assert len(decode_data(b"\x00" * 4 + b"x" * 1468, 1472).payload) == 1468


def test_data_encoder_refuses_what_no_stack_may_send() -> None:
    with pytest.raises(SabulWireError):
        Data(MAX + 1, b"x").encode()
    with pytest.raises(SabulWireError):
        Data(0, b"").encode()


def test_reader_reassembles_frames_split_anywhere() -> None:
    stream = ACK + ERR + SYN + Ack(2048).encode()
    reader = ControlReader()
    frames = [f for b in stream for f in reader.feed(bytes([b]))]
    reader.finish()
    assert frames == [Ack(1024), decode_control(ERR), Syn(1000), Ack(2048)]
    assert reader.consumed == len(stream) and reader.pending == 0
    assert decode_control_stream(stream) == frames


def test_reader_rejects_a_huge_err_from_its_header_alone() -> None:
    reader = ControlReader()
    with pytest.raises(SabulWireError, match="claims 1000000000"):
        reader.feed(encode_raw_control(2, 1_000_000_000))  # nothing of the body needed, none allocated
    with pytest.raises(SabulWireError):
        reader.feed(ACK)  # the stream is broken for good


def test_reader_reports_a_stream_cut_inside_a_frame() -> None:
    reader = ControlReader()
    assert reader.feed(ERR[:13]) == [] and reader.pending == 13
    with pytest.raises(SabulWireError, match="ends inside a frame"):
        reader.finish()


# --- option block and echo (§3.4) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"data_port": 0}, "data_port 0"),
        ({"pkt_size": 31, "payload_size": 27, "max_loss_length": 5}, "pkt_size 31"),
        ({"pkt_size": 70000, "payload_size": 69996, "max_loss_length": 17498}, "pkt_size 70000"),
        ({"payload_size": 1472}, "payload_size 1472"),
        ({"max_loss_length": 367}, "max_loss_length 367"),
        ({"blockable": 2}, "blockable 2"),
        ({"recv_flag_size": 0}, "recv_flag_size 0"),
        ({"recv_flag_size": 1 << 30}, "recv_flag_size 1073741824"),
        ({"reserved": 1}, "reserved word"),
    ],
)
def test_invalid_option_block(change: dict[str, int], what: str) -> None:
    raw = OptionBlock(**{"data_port": 7001, **change}).encode()
    assert decode_option_block(raw, validate=False).problems()
    with pytest.raises(SabulWireError, match=what):
        decode_option_block(raw)


@pytest.mark.parametrize("size", [0, 39, 41])
def test_option_block_is_exactly_40_bytes(size: int) -> None:
    with pytest.raises(SabulWireError, match=f"{size} bytes, not 40"):
        decode_option_block(bytes(size))


def test_echo_lowers_the_packet_size_and_derives_max_loss_length() -> None:
    block = OptionBlock.for_packet_size(1252, data_port=40000, ctrl_port=7000)
    echo = block.echo(1024)
    assert (echo.pkt_size, echo.payload_size, echo.max_loss_length) == (1024, 1020, 254)
    assert echo.data_port == 40000 and echo.recv_flag_size == block.recv_flag_size
    assert block.echo_problems(echo) == []
    assert block.echo(1472) == block  # a larger sender keeps the receiver's size: a byte-identical echo
    assert decode_option_block(echo.encode()) == echo


def test_echo_problems_name_what_changed() -> None:
    block = OptionBlock(data_port=7001)
    from dataclasses import replace

    assert "echo changed data_port: 7001 → 7002" in block.echo_problems(replace(block, data_port=7002))
    raised = OptionBlock.for_packet_size(1500, 7001)
    assert "echo raised pkt_size 1472 → 1500" in block.echo_problems(raised)
    assert any("max_loss_length" in p for p in block.echo_problems(replace(block.echo(1024), max_loss_length=366)))


def test_describe() -> None:
    assert describe(Ack(5)) == "ACK 5" and describe(Syn(3)) == "SYN 3"
    assert describe(Data(1, b"ab")) == "DATA seq=1 len=6"
    assert describe(decode_control(ERR)).startswith("ERR 0x00000064,0x800000c8")
    assert "pkt_size=1472" in describe(OptionBlock(7001))


# --- properties ------------------------------------------------------------------------------

seqs = st.integers(min_value=0, max_value=MAX)


@given(st.sets(st.integers(min_value=0, max_value=5000), min_size=1, max_size=300), seqs)
def test_err_round_trip_and_count(offsets: set[int], base: int) -> None:
    lost = [(base + o) & MAX for o in sorted(offsets)]
    err = Err.from_losses(lost)
    back = decode_control(err.encode(), max_loss_length=1000)
    assert back == err and isinstance(back, Err)
    assert back.lost == len(lost) and back.first == lost[0]
    assert len(err.words) <= 2 * len(lost)


@given(seqs, st.binary(min_size=1, max_size=1468))
def test_data_round_trip(seq: int, payload: bytes) -> None:
    assert decode_data(Data(seq, payload).encode(), 1472) == Data(seq, payload)


@given(st.binary(max_size=64))
def test_decoders_raise_only_their_own_error(raw: bytes) -> None:
    for decode in (decode_data, decode_control, decode_option_block):
        try:
            decode(raw)
        except SabulWireError:
            pass


@given(st.lists(st.binary(max_size=24), max_size=12), st.integers(min_value=1, max_value=400))
def test_reader_raises_only_its_own_error(chunks: list[bytes], limit: int) -> None:
    reader = ControlReader(limit)
    try:
        for c in chunks:
            for frame in reader.feed(c):
                assert isinstance(frame, Ack | Syn | Err)
        reader.finish()
    except SabulWireError:
        pass


@given(st.lists(st.sampled_from([ACK, SYN, ERR, Ack(7).encode(), Err((1, 0x80000003, 9)).encode()]), max_size=20))
def test_reader_decodes_any_valid_stream_in_any_chunking(frames: list[bytes]) -> None:
    stream = b"".join(frames)
    reader = ControlReader()
    got = [f for i in range(0, len(stream), 5) for f in reader.feed(stream[i : i + 5])]
    reader.finish()
    assert got == [decode_control(f) for f in frames]
