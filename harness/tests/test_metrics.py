"""Metrics against values computed by hand from the definitions (UDT4.md §17, seeds §3.4–3.7)."""

from __future__ import annotations

import math

import pytest
from udtharness.metrics import (
    convergence_time,
    efficiency,
    jain_index,
    rtt_fairness_ratio,
    stability_index,
    tcp_friendliness_index,
)


def test_jain_equal_flows_is_one() -> None:
    assert jain_index([5, 5, 5, 5]) == 1.0


def test_jain_one_flow_takes_all_is_one_over_n() -> None:
    assert jain_index([10, 0, 0, 0]) == pytest.approx(0.25)


def test_jain_hand_computed() -> None:
    # (1+2+3)^2 / (3*(1+4+9)) = 36/42
    assert jain_index([1, 2, 3]) == pytest.approx(6 / 7)
    # paper Fig. 12 TCP numbers: (754+151+27)^2 / (3*(568516+22801+729)) = 868624/1776138
    assert jain_index([754, 151, 27]) == pytest.approx(868624 / 1776138)


def test_jain_rejects_empty_and_all_zero() -> None:
    with pytest.raises(ValueError):
        jain_index([])
    with pytest.raises(ValueError):
        jain_index([0, 0])


def test_stability_constant_flows_is_zero() -> None:
    assert stability_index([[3, 3, 3], [7, 7, 7]]) == 0.0


def test_stability_hand_computed() -> None:
    # flow 1: 1,3 → mean 2, s = sqrt(((1)^2+(1)^2)/1) = sqrt(2), cv = sqrt(2)/2
    # flow 2: 2,4,6 → mean 4, s = sqrt((4+0+4)/2) = 2, cv = 0.5
    expected = (math.sqrt(2) / 2 + 0.5) / 2
    assert stability_index([[1, 3], [2, 4, 6]]) == pytest.approx(expected)


def test_stability_needs_two_samples() -> None:
    with pytest.raises(ValueError):
        stability_index([[1.0]])


def test_tcp_friendliness_hand_computed() -> None:
    # mixed: 2 TCP flows averaging 30; alone: 4 TCP flows averaging 40 → 0.75 (UDT overruns TCP)
    assert tcp_friendliness_index([20, 40], [40, 40, 40, 40]) == pytest.approx(0.75)
    # TCP gets exactly its fair share
    assert tcp_friendliness_index([25, 25], [25, 25, 25, 25]) == 1.0


def test_tcp_friendliness_rejects_shorter_alone_run() -> None:
    with pytest.raises(ValueError):
        tcp_friendliness_index([1, 2, 3], [1, 2])


def test_rtt_fairness_ratio() -> None:
    assert rtt_fairness_ratio(450.0, 500.0) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        rtt_fairness_ratio(1.0, 0.0)


def test_efficiency() -> None:
    # paper Fig. 12: three UDT flows at ~325 Mb/s on 1 Gb/s
    assert efficiency([325, 325, 325], 1000) == pytest.approx(0.975)


def test_convergence_first_reach() -> None:
    t = [0, 1, 2, 3, 4, 5]
    x = [10, 50, 85, 91, 80, 95]
    assert convergence_time(t, x, capacity=100, start=1) == 2  # 91 at t=3, 3-1
    assert convergence_time(t, x, capacity=100, start=1, sustained=True) == 4  # stays from t=5
    assert convergence_time(t, x, capacity=200) is None


def test_convergence_exact_threshold_counts() -> None:
    assert convergence_time([0.0, 7.5], [0.0, 90.0], capacity=100) == 7.5
