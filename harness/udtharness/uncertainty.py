"""A figure with its uncertainty, and a band judged on it three ways.

A measurement repeated N times (a testbed part under ``udtbed run --repeat N``, a bench's
rounds) gives each summarised value N samples, one per repeat. Each is a mean over many
seconds of a run, so the repeats' values are close to normal and few: the interval is Student's
t at 95 % (``scipy.stats.t``), not a bootstrap, which needs more samples than a testbed run
has. A ratio to the reference stack is taken per repeat pair (the two stacks ran one after the
other on the same network, A B A B ...) and gets its own interval: the pairing removes the
drift both saw.

A band is **met** when the whole interval lies inside it, **missed** when the whole interval
lies outside, and **inconclusive** when the interval straddles an edge; then
:func:`repeats_to_decide` estimates how many repeats would shrink the interval, at the same mean
and spread, to one side of that edge. One sample has no interval: it is judged by its value, as
a single run always was, and says so (``n = 1``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scipy import stats  # type: ignore[import-untyped]

CONFIDENCE = 0.95
# Beyond this many repeats an estimate is "more than" it: the band's edge sits on the mean.
MAX_REPEATS = 1000


class Judgement(StrEnum):
    MET = "met"
    MISSED = "missed"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` samples and its two-sided confidence interval (``low`` = ``high`` =
    ``mean`` for one sample or samples that do not vary)."""

    mean: float
    low: float
    high: float
    n: int
    sd: float
    method: str  # "student-t" or "single run"

    def text(self, digits: int = 3) -> str:
        if self.n < 2:
            return f"{self.mean:.{digits}g} (n = 1)"
        return f"{self.mean:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}] n = {self.n}"


def _t(n: int) -> float:
    """The two-sided Student's t quantile for ``n`` samples at :data:`CONFIDENCE`."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def mean_interval(samples: Sequence[float]) -> Interval:
    """Student's t interval of the mean of ``samples`` (at least one)."""
    if not samples:
        raise ValueError("no samples")
    n = len(samples)
    mean = statistics.fmean(samples)
    if n == 1:
        return Interval(mean, mean, mean, 1, 0.0, "single run")
    sd = statistics.stdev(samples)
    half = _t(n) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, sd, "student-t")


def ratio_interval(pairs: Sequence[tuple[float, float]]) -> Interval:
    """The interval of ``a / b`` taken per pair (a repeat's stack and the reference beside it);
    pairs whose ``b`` is 0 carry no ratio and are left out."""
    ratios = [a / b for a, b in pairs if b]
    if not ratios:
        raise ValueError("no pair with a non-zero reference")
    return mean_interval(ratios)


def judge(iv: Interval, low: float | None, high: float | None) -> Judgement:
    """``iv`` against the band ``[low, high]`` (either may be open)."""
    if (low is not None and iv.high < low) or (high is not None and iv.low > high):
        return Judgement.MISSED
    if (low is None or iv.low >= low) and (high is None or iv.high <= high):
        return Judgement.MET
    return Judgement.INCONCLUSIVE


def repeats_to_decide(iv: Interval, low: float | None, high: float | None) -> int | None:
    """For an inconclusive ``iv``: about how many repeats in all, at the same mean and spread,
    would put the interval on one side of the edge it straddles (None: the mean sits on the
    edge, or more than :data:`MAX_REPEATS` would be needed; ``iv.n`` when it is decided)."""
    if judge(iv, low, high) is not Judgement.INCONCLUSIVE:
        return iv.n
    edges = [e for e in (low, high) if e is not None and iv.low < e < iv.high]
    if not edges or iv.n < 2:
        return None
    gap = min(abs(iv.mean - e) for e in edges)
    if gap == 0:
        return None
    for n in range(iv.n + 1, MAX_REPEATS + 1):
        if _t(n) * iv.sd / math.sqrt(n) < gap:
            return n
    return None


__all__ = [
    "CONFIDENCE",
    "Interval",
    "Judgement",
    "judge",
    "mean_interval",
    "ratio_interval",
    "repeats_to_decide",
]
