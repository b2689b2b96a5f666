"""The suite's SABUL peer (udtconf.sabul.peer) on a virtual clock (udtconf.sabul.pair): byte-exact
transfers and the behaviours of SABUL.md §5–§8 and §10, deterministic and fast."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from udtconf.sabul import peer
from udtconf.sabul.pair import Pair
from udtconf.sabul.peer import ProtocolError, ReceiverConfig, SabulReceiver, SabulSender, SenderConfig
from udtconf.sabul.rate import I_MAX, RateControl
from udtconf.sabul.wire import Ack, Data, Err, OptionBlock, Syn, decode_control

PAYLOAD = 1468


@pytest.mark.parametrize("size", [0, 1, PAYLOAD - 1, PAYLOAD, PAYLOAD + 1, 3 * PAYLOAD + 5, 1 << 20])
def test_transfer_is_byte_exact(size: int) -> None:
    data = os.urandom(size)
    pair = Pair(data)
    assert pair.run() == data
    assert pair.sender.finished and pair.sender.stats.retrans == 0


def test_transfer_under_loss_is_byte_exact_and_retransmits_only_the_losses() -> None:
    data = os.urandom(2 << 20)
    lost = {5, 20, 21, *range(40, 60), 300}
    pair = Pair(data, lose=lambda seq, n: n == 0 and seq in lost)
    assert pair.run() == data
    sends = Counter(e.seq for e in pair.data_sent())
    assert sorted(s for s, n in sends.items() if n > 1) == sorted(lost)


def test_gap_is_reported_at_once_by_one_err_of_exactly_the_gap() -> None:
    pair = Pair(os.urandom(100 * PAYLOAD), lose=lambda seq, n: n == 0 and seq in (5, 6, 7))
    pair.run()
    arrival_of_8 = next(e.time for e in pair.data_sent() if e.seq == 8) + pair.one_way
    t, first = pair.frames(Err)[0]
    assert isinstance(first, Err) and first.ranges() == [(5, 7)] and first.words == (0x80000005, 7)
    assert t == pytest.approx(arrival_of_8)


def test_unrepaired_loss_is_re_reported_after_k_rtt_k_2_3() -> None:
    # Packet 5 and its first two retransmissions are lost; RTT is the 20 ms floor (§2 step 5).
    pair = Pair(os.urandom(100 * PAYLOAD), lose=lambda seq, n: seq == 5 and n < 3)
    assert pair.run() == pair.data
    times = [t for t, f in pair.frames(Err) if isinstance(f, Err) and f.ranges() == [(5, 5)]]
    assert len(times) == 3
    rtt = pair.receiver.rtt
    assert rtt == pytest.approx(0.020)
    # each re-report comes after k·RTT and within one 20 ms ERR period of it
    assert 2 * rtt <= times[1] - times[0] < 2 * rtt + 0.021
    assert 3 * rtt <= times[2] - times[1] < 3 * rtt + 0.021


def test_syn_counts_every_datagram_on_arrival_duplicates_and_out_of_window_included() -> None:
    r = SabulReceiver(5000, 7000, ReceiverConfig(flag_size=10))
    r.option_block(0.0)
    r.handle_echo(r.block.encode(), 0.001)
    one = Data(0, b"a").encode()
    for raw in (one, one, Data(50, b"far").encode(), b"\x80\x00\x00\x00x", b"\x00\x00"):
        r.handle_data(raw, 0.002)
    r.handle_timeout(0.0115)
    syns = [decode_control(f) for f in r.poll_control() if decode_control(f).ctype == 4]
    assert syns == [Syn(3)]  # the duplicate and the out-of-window packet count, the malformed do not
    assert r.stats.duplicates == 1 and r.stats.out_of_window == 1 and r.stats.malformed == 2


def test_exp_requeues_everything_unacknowledged_and_gives_up_after_ten() -> None:
    pair = Pair(os.urandom(400 * PAYLOAD), silent=lambda now: now > 0.004)
    with pytest.raises(ProtocolError, match="receiver silent: 10 EXP events"):
        pair.run(until=30.0)
    s = pair.sender
    unacked = set(range(s.last_ack, s.next_seq))
    assert unacked and s.stats.exp_events == 10
    first_exp = min(e.time for e in pair.data_sent() if e.time > 0.5)
    resent = {e.seq for e in pair.data_sent() if first_exp <= e.time < first_exp + 0.5}
    assert resent == unacked
    assert 11.0 > pair.now > 10.0


def test_freeze_after_a_new_congestion_event_lasts_one_syn() -> None:
    pair = Pair(os.urandom(3000 * PAYLOAD), SenderConfig(slow_start=False), lose=lambda seq, n: n == 0 and seq == 150)
    pair.run()
    times = [e.time for e in pair.data_sent()]
    gaps = sorted((b - a for a, b in zip(times, times[1:], strict=False)), reverse=True)
    decreased = 10.0 * 1.125 / 1e6  # the interval after the one decrease
    assert gaps[0] == pytest.approx(peer.SYN + decreased, abs=1e-6)
    assert gaps[1] < 0.001  # one freeze only


def test_slow_start_ends_at_the_first_err() -> None:
    pair = Pair(os.urandom(2000 * PAYLOAD), lose=lambda seq, n: n == 0 and seq == 300)
    pair.run()
    assert not pair.sender.rc.slow_start and pair.sender.rc.window == 25_600


def test_lossless_transfer_below_the_slow_start_window_keeps_its_initial_rate() -> None:
    """SABUL.md §14.1: 1000 packets at an initial 100 Mb/s (I = 120 µs)."""
    data = os.urandom(1000 * PAYLOAD)
    on = Pair(data, SenderConfig(interval_us=120.0))
    assert on.run() == data
    assert on.sender.rc.interval == 120.0 and on.sender.rc.slow_start
    off = Pair(data, SenderConfig(interval_us=120.0, slow_start=False))
    assert off.run() == data
    assert isinstance(off.sender.rc, RateControl)  # SABUL's own (the hook's default)
    assert off.sender.rc.interval < 120.0 and off.sender.rc.increases > 0


def test_a_sender_with_a_smaller_packet_lowers_the_echo_and_cuts_its_data() -> None:
    data = os.urandom(10_000)
    pair = Pair(data, SenderConfig(pkt_size=1024), ReceiverConfig(pkt_size=1252))
    assert pair.run() == data
    echo = pair.receiver.echo
    assert echo is not None and (echo.pkt_size, echo.max_loss_length) == (1024, 254)
    assert {len(e.raw) for e in pair.data_sent()} == {1024, 4 + 10_000 - 9 * 1020}


def test_receiver_reports_a_hole_at_eof() -> None:
    r = SabulReceiver(5000, 7000)
    r.option_block(0.0)
    r.handle_echo(r.block.encode(), 0.0)
    r.handle_data(Data(0, b"a").encode(), 0.001)
    r.handle_data(Data(2, b"c").encode(), 0.001)
    assert r.take_output() == b"a"
    with pytest.raises(ProtocolError, match="1 packet\\(s\\) missing from sequence number 1"):
        r.handle_eof()


def _started(packets: int) -> SabulSender:
    chunks = [b"y" * PAYLOAD] * packets
    s = SabulSender(lambda n: chunks.pop() if chunks else b"", SenderConfig(slow_start=False))
    s.handle_block(OptionBlock(7001).encode(), 0.0)
    t = 0.0
    while s.poll_transmit(t) is not None or s.next_seq < packets:
        t += 0.001
    return s


def test_sender_aborts_on_feedback_beyond_what_it_sent() -> None:
    s = _started(10)
    with pytest.raises(ProtocolError, match="ACK 11 is beyond the data sent"):
        s.handle_control(Ack(11), 1.0)
    s = _started(10)
    with pytest.raises(ProtocolError, match="ERR reports 12 as lost, beyond the data sent"):
        s.handle_control(Err.from_losses([3, 12]), 1.0)
    assert s.stats.losses == 0  # validated whole before any effect
    nothing = SabulSender(lambda n: b"")
    nothing.handle_block(OptionBlock(7001).encode(), 0.0)
    with pytest.raises(ProtocolError, match="nothing sent"):
        nothing.handle_control(Err((0,)), 0.1)


def test_sender_rejects_an_invalid_option_block_without_an_echo() -> None:
    s = SabulSender(lambda n: b"")
    with pytest.raises(ProtocolError, match="option block rejected: .*reserved word"):
        s.handle_block(OptionBlock(7001, reserved=7).encode(), 0.0)
    assert s.block is None


def test_receiver_rejects_an_echo_that_changed_its_block() -> None:
    r = SabulReceiver(5000, 7000)
    r.option_block(0.0)
    with pytest.raises(ProtocolError, match="echo changed data_port"):
        r.handle_echo(OptionBlock(5001, 7000).encode(), 0.01)
    with pytest.raises(ProtocolError, match="echo raised pkt_size"):
        SabulReceiver(5000, 7000, ReceiverConfig(pkt_size=1024)).handle_echo(r.block.encode(), 0.0)


def test_rtt_estimate_from_the_setup_round_trip() -> None:
    r = SabulReceiver(5000, 7000)
    r.option_block(1.0)
    r.handle_echo(r.block.encode(), 1.1)
    assert r.rtt == pytest.approx(0.15)


def test_err_never_exceeds_max_loss_length_words() -> None:
    # every other packet of 40 lost twice: 20 lone losses re-reported, with a 6-word limit (pkt 32)
    pair = Pair(
        os.urandom(60 * 28),
        SenderConfig(pkt_size=32),
        ReceiverConfig(pkt_size=32),
        lose=lambda seq, n: n < 2 and seq % 2 == 1 and seq < 40,
    )
    assert pair.run() == pair.data
    assert max(len(f.words) for _, f in pair.frames(Err) if isinstance(f, Err)) <= 6


def test_clamp_after_decreases_in_a_real_session() -> None:
    """SABUL.md §14.2 item 2 end to end: heavy loss drives I past 1000 µs; the first increase after
    the losses stop snaps it to exactly 1000 µs."""
    pair = Pair(os.urandom(3000 * 28), SenderConfig(pkt_size=32, slow_start=False), ReceiverConfig(pkt_size=32))
    pair.sender.rc.interval = 900.0
    pair.lose = lambda seq, n: n == 0 and 20 <= seq < 400 and seq % 3 == 0
    seen: list[float] = []
    while pair.eof_at is None and pair.now < 120:
        pair.step()
        seen.append(pair.sender.rc.interval)
    assert max(seen) > I_MAX and I_MAX in seen
