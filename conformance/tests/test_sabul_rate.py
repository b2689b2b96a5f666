"""SABUL's rate control (udtconf.sabul.rate) against SABUL.md §7–§8 and the consequences of §14.

``loss_model`` is the model behind the table of SABUL.md §14.2."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from udtconf.sabul.rate import (
    ALPHA,
    I_MAX,
    SYN_US,
    RateControl,
    increase_step,
    increased,
    interval_for_rate,
)


@pytest.mark.parametrize(
    ("interval", "inc", "after"),
    [(12.0, 1.0, 11.986), (100.0, 0.1, 99.90), (1000.0, 0.01, 999.00), (20_000.0, 0.001, 1000.0)],
)
def test_section_7_2_increase_examples(interval: float, inc: float, after: float) -> None:
    assert increase_step(interval) == pytest.approx(inc)
    assert increased(interval) == pytest.approx(after, abs=0.005)


def test_increase_step_floor_is_one_over_mtu() -> None:
    assert increase_step(200_000.0) == pytest.approx(1 / 1500)  # 0.05 packets per SYN


def test_initial_rate_conversion() -> None:
    assert interval_for_rate(100) == 120.0 and interval_for_rate(1200) == 10.0


def test_syn_event_increases_by_inc_packets_per_syn() -> None:
    rc = RateControl(interval=100.0, slow_start=False)
    rc.on_sent(100)
    assert rc.on_syn()
    assert SYN_US / rc.interval == pytest.approx(SYN_US / 100.0 + 0.1)


def test_nothing_sent_means_no_rate_control() -> None:
    rc = RateControl(interval=100.0, slow_start=False)
    rc.lost = 3
    assert not rc.on_syn() and rc.interval == 100.0 and rc.lost == 0 and rc.history == 0.0


def test_ewma_weights_and_sent_at_least_lost() -> None:
    rc = RateControl(interval=100.0, slow_start=False)
    rc.on_sent(10)
    rc.on_err(first=5, lost=20, largest_sent=9)  # more reported than sent: sent := lost
    assert not rc.on_syn()
    assert rc.history == pytest.approx(0.9)  # 0.1·0 + 0.9·(20/20)
    rc.on_sent(100)
    rc.on_syn()
    assert rc.history == pytest.approx(0.09)


def test_decreases_on_condition_1_then_the_16th_32nd_64th_err() -> None:
    rc = RateControl(interval=100.0, slow_start=False)
    rc.on_err(first=50, lost=1, largest_sent=99)  # condition 1): a new congestion event
    assert rc.interval == pytest.approx(112.5) and rc.freeze and rc.last_dec_seq == 99
    decreased_at = []
    for n in range(2, 130):  # further ERRs of the same event (first ≤ LastDecSeq)
        before = rc.interval
        rc.on_err(first=60, lost=1, largest_sent=200)
        if rc.interval > before:
            decreased_at.append(n)
    assert decreased_at == [16, 32, 64, 128]
    assert rc.take_freeze() and not rc.take_freeze()  # only condition 1) froze, once
    rc.on_err(first=100, lost=1, largest_sent=300)  # later than LastDecSeq 99: condition 1) again
    assert rc.freeze and rc.err_count == 1 and rc.dec_count == 4 and rc.last_dec_seq == 300


def test_slow_start_window_grows_by_acknowledged_packets_and_ends_at_max() -> None:
    rc = RateControl(max_window=100)
    assert rc.window == 1
    rc.on_ack(1)
    rc.on_ack(2)
    assert rc.window == 4 and rc.slow_start
    rc.on_ack(96)
    assert rc.window == 100 and not rc.slow_start


def test_slow_start_ends_at_the_first_err_and_skips_increases_until_then() -> None:
    rc = RateControl(interval=120.0)
    rc.on_sent(50)
    assert not rc.on_syn() and rc.interval == 120.0  # lossless, H = 0, but slow start
    rc.on_err(first=3, lost=1, largest_sent=49)
    assert not rc.slow_start and rc.window == rc.max_window
    assert rc.interval == pytest.approx(135.0)  # decreases apply during slow start


def test_decreases_are_not_clamped_and_the_next_increase_clamps_at_1000us() -> None:
    """SABUL.md §14.2 item 2."""
    rc = RateControl(interval=10.0, slow_start=False)
    for seq in range(40):
        rc.on_err(first=10 * seq, lost=1, largest_sent=10 * seq + 5)
    assert rc.interval == pytest.approx(10 * 1.125**40) and rc.interval > I_MAX
    rc.on_sent(1000)
    rc.on_syn()  # H > α after those losses: no increase yet
    for _ in range(3):
        rc.on_sent(10)
        if rc.on_syn():
            break
    assert rc.interval == I_MAX
    assert increased(2000.0) == I_MAX and 2000.0 * SYN_US / (2000.0 * 0.01 + SYN_US) == pytest.approx(1996.0, abs=0.05)


@given(st.floats(min_value=0, max_value=1), st.integers(min_value=1, max_value=899))
def test_a_period_with_loss_ratio_above_alpha_over_0_9_never_increases(history: float, sent: int) -> None:
    """SABUL.md §14.2 item 1: H ≥ 0.9·x, so one reported loss among fewer than 900 packets blocks
    the increase whatever the history."""
    rc = RateControl(interval=100.0, slow_start=False, history=history)
    rc.on_sent(sent)
    rc.lost = 1
    assert 1 / sent > ALPHA / 0.9
    assert not rc.on_syn()


def test_lossless_period_increases_iff_history_at_most_ten_alpha() -> None:
    for history, want in ((0.0099, True), (0.0101, False)):
        rc = RateControl(interval=100.0, slow_start=False, history=history)
        rc.on_sent(100)
        assert rc.on_syn() is want


# --- the model of SABUL.md §14.2 ---------------------------------------------------------------


def loss_model(p: float, seconds: float = 60.0, seed: int = 1, feedback_s: float = 0.001) -> dict[str, float]:
    """Packets lost independently with probability ``p``, each loss reported ``feedback_s`` later
    as its own ERR, slow start off, no window limit, from I = 10 µs. Returns the mean rate
    (Mb/s at 1500-byte packets) and the range of I over the second half, and the increase /
    decrease events per second."""
    rnd = random.Random(seed)
    rc = RateControl(interval=10.0, slow_start=False)
    t, next_syn, seq = 0.0, SYN_US, 0
    reports: list[tuple[float, int]] = []
    samples: list[float] = []
    while t < seconds * 1e6:
        while reports and reports[0][0] <= t:
            _, s = reports.pop(0)
            rc.on_err(first=s, lost=1, largest_sent=seq - 1)
        while t >= next_syn:
            rc.on_syn()
            next_syn += SYN_US
            samples.append(rc.interval)
        rc.on_sent()
        if rnd.random() < p:
            reports.append((t + feedback_s * 1e6, seq))
        seq += 1
        t += rc.interval + (SYN_US if rc.take_freeze() else 0.0)
    tail = samples[len(samples) // 2 :]
    return {
        "mean_mbps": sum(1500 * 8 / i for i in tail) / len(tail),
        "min_interval": min(tail),
        "max_interval": max(tail),
        "increases_per_s": rc.increases / seconds,
        "decreases_per_s": rc.decreases / seconds,
    }


def test_random_loss_of_one_percent_holds_sabul_near_the_1000us_clamp() -> None:
    """SABUL.md §14.2 item 3: at p = 1 % the rate settles around 12 Mb/s, I straddling 1000 µs."""
    m = loss_model(0.01, seconds=30.0)
    assert 8.0 < m["mean_mbps"] < 20.0
    assert m["min_interval"] < I_MAX < m["max_interval"]
    assert m["increases_per_s"] > 10 and m["decreases_per_s"] > 1


def test_model_is_deterministic() -> None:
    assert loss_model(0.01, seconds=2.0) == loss_model(0.01, seconds=2.0)
    assert not math.isnan(loss_model(0.0005, seconds=2.0)["mean_mbps"])


def test_application_limits_clamp_an_increase() -> None:
    # §7.1: the application may set I_min and I_max (the testbed scales them with its links).
    rc = RateControl(interval=20_000.0, slow_start=False, i_min=100.0, i_max=10_000.0)
    rc.on_sent(1)
    rc.on_syn()
    assert rc.interval == 10_000.0
    rc = RateControl(interval=50.0, slow_start=False, i_min=100.0, i_max=10_000.0)
    rc.on_sent(1)
    rc.on_syn()
    assert rc.interval == 100.0
