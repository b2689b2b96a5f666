"""Evaluation metrics of the UDT papers (UDT4.md §17; SC'04 paper §3.4–3.8).

Plain functions over throughput numbers (any consistent unit). Each raises ``ValueError`` on
input the definition does not cover instead of returning a misleading number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise


def jain_index(throughputs: Sequence[float]) -> float:
    """Jain's fairness index ``(Σx)² / (n·Σx²)``: 1 = fair, 1/n = one flow takes all."""
    n = len(throughputs)
    if n == 0:
        raise ValueError("Jain's index needs at least one flow")
    if any(x < 0 for x in throughputs):
        raise ValueError("throughputs must be non-negative")
    sq = sum(x * x for x in throughputs)
    if sq == 0:
        raise ValueError("Jain's index is undefined when every flow has zero throughput")
    return sum(throughputs) ** 2 / (n * sq)


def stability_index(samples: Sequence[Sequence[float]]) -> float:
    """Mean over flows of the sample standard deviation (``m−1``) divided by the flow mean.

    ``samples[i][k]`` is the k-th throughput sample of flow i (the paper samples every second).
    0 = perfectly stable.
    """
    if not samples:
        raise ValueError("stability index needs at least one flow")
    total = 0.0
    for i, flow in enumerate(samples):
        m = len(flow)
        if m < 2:
            raise ValueError(f"flow {i} has {m} samples; the stability index needs at least 2")
        mean = sum(flow) / m
        if mean <= 0:
            raise ValueError(f"flow {i} has a non-positive mean throughput")
        total += math.sqrt(sum((x - mean) ** 2 for x in flow) / (m - 1)) / mean
    return total / len(samples)


def tcp_friendliness_index(tcp_mixed: Sequence[float], tcp_alone: Sequence[float]) -> float:
    """``T = mean(TCP throughputs next to m UDT flows) / mean(throughputs of m+n TCP flows)``.

    ``tcp_mixed`` has the n TCP means of the mixed run, ``tcp_alone`` the m+n means of the
    all-TCP run. T = 1 ideal, T > 1 UDT too friendly, T < 1 UDT overruns TCP.
    """
    if not tcp_mixed or not tcp_alone:
        raise ValueError("both runs need at least one TCP flow")
    if len(tcp_alone) < len(tcp_mixed):
        raise ValueError("the all-TCP run has m+n flows, at least as many as the mixed run's n")
    fair_share = sum(tcp_alone) / len(tcp_alone)
    if fair_share <= 0:
        raise ValueError("the all-TCP fair share is zero")
    return (sum(tcp_mixed) / len(tcp_mixed)) / fair_share


def rtt_fairness_ratio(long_rtt_flow: float, short_rtt_flow: float) -> float:
    """Average throughput of the longer-RTT flow over the shorter-RTT one (paper Fig. 6);
    1 = RTT-fair. The paper claims ``|ratio − 1| ≤ 0.1`` for RTTs from 1 to 1000 ms."""
    if short_rtt_flow <= 0:
        raise ValueError("the reference (short-RTT) flow has zero throughput")
    return long_rtt_flow / short_rtt_flow


def efficiency(throughputs: Sequence[float], capacity: float) -> float:
    """Aggregate throughput over link capacity (same unit)."""
    if capacity <= 0:
        raise ValueError("link capacity must be positive")
    return sum(throughputs) / capacity


def convergence_time(
    times: Sequence[float],
    throughput: Sequence[float],
    capacity: float,
    start: float = 0.0,
    fraction: float = 0.9,
    sustained: bool = False,
) -> float | None:
    """Time from ``start`` (e.g. the loss event) until the throughput first reaches
    ``fraction × capacity`` (the paper's "recovery to 90 % of link capacity").

    With ``sustained=True`` the first sample from which the throughput *stays* at or above the
    threshold to the end of the series counts. Returns None if it never gets there.
    """
    if len(times) != len(throughput):
        raise ValueError("times and throughput differ in length")
    if any(b < a for a, b in pairwise(times)):
        raise ValueError("times must be non-decreasing")
    threshold = fraction * capacity
    pts = [(t, x) for t, x in zip(times, throughput, strict=True) if t >= start]
    if not sustained:
        for t, x in pts:
            if x >= threshold:
                return t - start
        return None
    hit: float | None = None
    for t, x in pts:
        if x >= threshold:
            if hit is None:
                hit = t
        else:
            hit = None
    return None if hit is None else hit - start
