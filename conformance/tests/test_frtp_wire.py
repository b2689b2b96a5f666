"""The FRTP codec (udtconf.frtp.wire) on the worked examples of FRTP.md §8 and on malformed
option blocks: FRTP's DATA, ACK and ERR are SABUL's (udtconf.sabul.wire), its 52-byte block is
SABUL's ten words + data_ip + a 64-bit rate."""

from __future__ import annotations

import pickle

import pytest
from udtconf.frtp.wire import (
    FRTP_BLOCK_LEN,
    FrtpOptionBlock,
    FrtpWireError,
    decode_frtp_block,
    ip_text,
    ip_word,
    ipt_seconds,
)
from udtconf.sabul.wire import Ack, Err, OptionBlock, SabulWireError, decode_control

SPEC_BLOCK = bytes.fromhex(
    "00001b59 00001b58 000005c0 000005bc 0000016e 00000000 02710000 02710000 00006400 00000000"
    " c0a80a02 00000000 1dcd6500".replace(" ", "")
)


def test_the_spec_option_block_decodes_to_its_fields_and_back() -> None:
    b = decode_frtp_block(SPEC_BLOCK)
    assert b.sabul == OptionBlock(7001, 7000)  # every SABUL default (SABUL.md §12)
    assert ip_text(b.data_ip) == "192.168.10.2" and b.rate_bps == 500_000_000
    assert b.encode() == SPEC_BLOCK and len(SPEC_BLOCK) == FRTP_BLOCK_LEN == 52
    assert FrtpOptionBlock.build(7001, "192.168.10.2", 500_000_000, ctrl_port=7000).encode() == SPEC_BLOCK


def test_the_spec_ipt_is_24_microseconds_at_500_mbit() -> None:
    assert decode_frtp_block(SPEC_BLOCK).ipt() == pytest.approx(24e-6)
    assert ipt_seconds(1472, 50_000_000) == pytest.approx(240e-6)


def test_the_spec_ack_and_whole_list_err_are_sabul_frames() -> None:
    assert decode_control(bytes.fromhex("0000000100012345")) == Ack(0x12345)
    err = bytes.fromhex("0000000200000003000123458001235000012352")
    assert decode_control(err) == Err.from_losses([0x12345, 0x12350, 0x12351, 0x12352])
    assert Err.from_losses([0x12345, 0x12350, 0x12351, 0x12352]).encode() == err


def test_the_rate_is_64_bits_high_word_first() -> None:
    b = FrtpOptionBlock(OptionBlock(7001), ip_word("10.0.0.1"), (1 << 40) + 7)
    raw = b.encode()
    assert raw[44:52] == bytes.fromhex("0000010000000007")
    assert decode_frtp_block(raw) == b


@pytest.mark.parametrize("length", [0, 40, 51, 53, 80])
def test_a_block_of_the_wrong_length_is_rejected(length: int) -> None:
    raw = (SPEC_BLOCK * 2)[:length]
    with pytest.raises(FrtpWireError, match=f"option block of {length} bytes, not 52"):
        decode_frtp_block(raw)


def test_a_truncated_block_is_a_sabul_wire_error_citing_frtp() -> None:
    with pytest.raises(SabulWireError) as e:
        decode_frtp_block(SPEC_BLOCK[:-1])
    assert "FRTP.md §3.3" in str(e.value)
    assert pickle.loads(pickle.dumps(e.value)).section == "3.3"


@pytest.mark.parametrize(
    ("data_ip", "rate", "problem"),
    [
        ("192.168.10.2", 0, "rate_bps is 0"),
        ("224.0.0.1", 500_000_000, "multicast or broadcast"),
        ("255.255.255.255", 500_000_000, "multicast or broadcast"),
    ],
)
def test_a_zero_rate_or_a_multicast_data_address_is_invalid(data_ip: str, rate: int, problem: str) -> None:
    raw = FrtpOptionBlock(OptionBlock(7001), ip_word(data_ip), rate).encode()
    with pytest.raises(FrtpWireError, match=problem):
        decode_frtp_block(raw)
    assert decode_frtp_block(raw, validate=False).rate_bps == rate


def test_bad_sabul_words_make_the_frtp_block_invalid() -> None:
    raw = FrtpOptionBlock(OptionBlock(7001, max_loss_length=9), ip_word("10.0.0.2"), 1).encode()
    with pytest.raises(FrtpWireError, match="max_loss_length"):
        decode_frtp_block(raw)


def test_data_ip_zero_means_the_control_peer() -> None:
    assert FrtpOptionBlock(OptionBlock(7001), 0, 1).data_address("10.9.8.7") == ("10.9.8.7", 7001)
    assert FrtpOptionBlock(OptionBlock(7001), ip_word("10.1.0.2"), 1).data_address("10.9.8.7") == ("10.1.0.2", 7001)


def test_the_echo_keeps_data_ip_and_rate_and_may_lower_the_packet_size() -> None:
    b = decode_frtp_block(SPEC_BLOCK)
    echo = b.echo(1024)
    assert echo.pkt_size == 1024 and echo.data_ip == b.data_ip and echo.rate_bps == b.rate_bps
    assert b.echo_problems(echo) == []
    changed = FrtpOptionBlock(b.sabul, b.data_ip + 1, b.rate_bps // 2)
    assert b.echo_problems(changed) == [
        "echo changed data_ip: 192.168.10.2 → 192.168.10.3",
        "echo changed rate_bps: 500000000 → 250000000",
    ]
