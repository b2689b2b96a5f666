"""The suite's FRTP peer (udtconf.frtp.peer: SABUL's peer under FRTP's profile) on the virtual
network of udtconf.sabul.pair: fixed IPT for every packet, no SYN, the whole loss list every
20 ms (split past max_loss_length words), an ACK every 100 ms or when the resequencing window
overflows, EXP after 1 s, and the set-up's refusals."""

from __future__ import annotations

import io
import os
from collections.abc import Callable

import pytest
from udtconf.frtp.peer import FrtpReceiver, FrtpSender
from udtconf.frtp.wire import FrtpOptionBlock, decode_frtp_block, ip_word
from udtconf.sabul.pair import Pair
from udtconf.sabul.peer import ProtocolError, ReceiverConfig
from udtconf.sabul.wire import Ack, Data, Err, OptionBlock, Syn, decode_control

RATE = 20_000_000
IPT = 1500 * 8 / RATE  # 600 µs


def frtp_pair(data: bytes, rate: int = RATE, lose: Callable[[int, int], bool] | None = None) -> Pair:
    pair = Pair(data, lose=lose)
    pair.sender = FrtpSender(io.BytesIO(data).read)
    pair.receiver = FrtpReceiver(5000, 7000, pair.receiver_config, data_ip="10.1.0.2", rate_bps=rate)
    return pair


def test_a_transfer_delivers_every_byte_one_ipt_apart() -> None:
    data = os.urandom(300 * 1468 + 5)
    pair = frtp_pair(data)
    assert pair.run() == data
    times = [e.time for e in pair.data_sent()]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) == pytest.approx(IPT, abs=1e-6) and max(gaps) == pytest.approx(IPT, abs=1e-6)


def test_retransmissions_keep_the_ipt_and_the_receiver_never_sends_a_syn() -> None:
    data = os.urandom(200 * 1468)
    pair = frtp_pair(data, lose=lambda seq, n: seq in (10, 50, 51) and n == 0)
    assert pair.run() == data
    sent = pair.data_sent()
    assert sorted(e.seq for e in sent).count(50) == 2
    gaps = [b.time - a.time for a, b in zip(sent, sent[1:], strict=False) if b.time - a.time < 0.5]
    assert min(gaps) >= IPT * 0.999
    assert pair.frames(Syn) == [] and pair.receiver.stats.syns_sent == 0


def test_a_missing_packet_is_listed_again_every_20_ms() -> None:
    data = os.urandom(100 * 1468)
    pair = frtp_pair(data, lose=lambda seq, n: seq == 30 and n < 4)
    assert pair.run() == data
    times = [t for t, f in pair.frames(Err) if isinstance(f, Err) and 30 in range(f.first, f.first + f.lost)]
    periodic = [b - a for a, b in zip(times[1:], times[2:], strict=False)]
    assert len(times) == 4 and periodic == [pytest.approx(0.020, abs=0.002)] * 2


def test_acks_come_every_100_ms() -> None:
    data = os.urandom(1000 * 1468)  # 0.6 s at 20 Mbit/s
    pair = frtp_pair(data)
    assert pair.run() == data
    times = [t for t, _ in pair.frames(Ack)]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) >= 5 and min(gaps) == pytest.approx(0.1, abs=0.002)


def test_a_lost_tail_comes_back_after_the_1_s_exp() -> None:
    data = os.urandom(20 * 1468)
    pair = frtp_pair(data, lose=lambda seq, n: seq == 19 and n == 0)
    assert pair.run() == data
    tail = [e.time for e in pair.data_sent() if e.seq == 19]
    assert len(tail) == 2 and 1.0 <= tail[1] - tail[0] <= 1.2
    assert pair.sender.stats.exp_events == 1


def test_the_sender_ignores_syn_frames() -> None:
    s = FrtpSender(io.BytesIO(b"x" * 5000).read)
    s.handle_block(FrtpOptionBlock(OptionBlock(5000), ip_word("10.0.0.2"), RATE).encode(), 0.0)
    before = s.rc.interval
    for n in (0, 1, 1 << 31):
        s.handle_control(Syn(n), 0.001)
    assert s.rc.interval == before == pytest.approx(IPT * 1e6)


def test_a_whole_loss_list_past_366_words_is_split() -> None:
    r = FrtpReceiver(5000, 7000, data_ip="10.0.0.2", rate_bps=RATE)
    r.handle_echo(r.option_block(0.0), 0.0)
    for seq in range(0, 1601, 2):  # 800 single losses: 800 words
        r.handle_data(Data(seq, b"x").encode(), 0.001)
    r.poll_control()
    r.handle_timeout(0.021)
    errs = [decode_control(f) for f in r.poll_control()]
    assert [len(e.words) for e in errs if isinstance(e, Err)] == [366, 366, 68]
    listed = [n for e in errs if isinstance(e, Err) for a, b in e.ranges() for n in range(a, b + 1)]
    assert listed == list(range(1, 1600, 2))


def test_a_packet_beyond_the_window_gets_an_ack_even_unchanged() -> None:
    r = FrtpReceiver(5000, 7000, ReceiverConfig(flag_size=10), data_ip="10.0.0.2", rate_bps=RATE)
    r.handle_echo(r.option_block(0.0), 0.0)
    r.handle_data(Data(0, b"x").encode(), 0.001)
    r.handle_data(Data(15, b"x").encode(), 0.002)
    r.handle_data(Data(16, b"x").encode(), 0.003)
    assert [decode_control(f) for f in r.poll_control()] == [Ack(1), Ack(1)]


@pytest.mark.parametrize(("rate", "why"), [(RATE + 1, "above this sender's maximum"), (0, "rate_bps is 0")])
def test_the_sender_refuses_a_rate_above_its_maximum_or_zero(rate: int, why: str) -> None:
    s = FrtpSender(io.BytesIO(b"").read, max_rate_bps=RATE)
    with pytest.raises(ProtocolError, match=why):
        s.handle_block(FrtpOptionBlock(OptionBlock(5000), 0, rate).encode(), 0.0)


def test_the_receiver_announces_its_data_address_and_rejects_a_changed_echo() -> None:
    r = FrtpReceiver(5000, 7000, data_ip="10.1.0.2", rate_bps=RATE)
    block = decode_frtp_block(r.option_block(0.0))
    assert block.data_address("192.168.0.2") == ("10.1.0.2", 5000) and block.rate_bps == RATE
    with pytest.raises(ProtocolError, match="rate_bps"):
        r.handle_echo(FrtpOptionBlock(block.sabul, block.data_ip, RATE * 2).encode(), 0.01)


def test_after_idle_the_schedule_restarts_so_a_resend_burst_keeps_the_ipt() -> None:
    data = os.urandom(20 * 1468)
    pair = frtp_pair(data, lose=lambda seq, n: seq >= 15 and n == 0)  # a lost tail: only EXP finds it
    assert pair.run() == data
    again = [e.time for e in pair.data_sent() if e.seq >= 15][5:]
    gaps = [b - a for a, b in zip(again, again[1:], strict=False)]
    assert len(again) == 5 and min(gaps) == pytest.approx(IPT, abs=1e-6)
