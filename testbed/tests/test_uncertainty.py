"""A figure with its interval, and bands judged three ways on it (udtharness.uncertainty), and a
part's bands judged over its repeats (udtbed.results.repeats)."""

from __future__ import annotations

import math

import pytest
from conftest import part_of_repeats
from udtbed.results import repeats
from udtbed.results.results import FlowResult, PartResult, Series, StackResult, Verdict
from udtharness import uncertainty
from udtharness.uncertainty import Judgement


def test_the_interval_of_known_samples_is_student_s_t() -> None:
    iv = uncertainty.mean_interval([10.0, 12.0, 14.0])
    # mean 12, sd 2, t(0.975, 2) = 4.3027: half-width 4.3027 * 2 / sqrt(3) = 4.968.
    assert iv.mean == 12.0 and iv.n == 3 and iv.method == "student-t"
    assert math.isclose(iv.high - iv.mean, 4.3027 * 2 / math.sqrt(3), rel_tol=1e-4), iv
    assert math.isclose(iv.low, 12.0 - (iv.high - 12.0))


def test_one_sample_has_no_interval_and_is_judged_by_its_value() -> None:
    iv = uncertainty.mean_interval([0.9])
    assert (iv.low, iv.high, iv.n, iv.method) == (0.9, 0.9, 1, "single run")
    assert uncertainty.judge(iv, 0.85, None) is Judgement.MET
    assert uncertainty.judge(iv, 0.95, None) is Judgement.MISSED
    assert uncertainty.repeats_to_decide(iv, 0.95, None) == 1, "decided already"


def test_an_interval_inside_outside_or_across_a_band_is_met_missed_or_inconclusive() -> None:
    iv = uncertainty.mean_interval([0.97, 0.99, 1.01, 0.98])
    assert uncertainty.judge(iv, 0.9, None) is Judgement.MET
    assert uncertainty.judge(iv, 1.05, None) is Judgement.MISSED
    assert uncertainty.judge(iv, None, 0.9) is Judgement.MISSED
    assert uncertainty.judge(iv, 0.98, None) is Judgement.INCONCLUSIVE
    assert uncertainty.judge(iv, 0.9, 1.0) is Judgement.INCONCLUSIVE, "the upper edge straddled"


def test_an_inconclusive_band_says_about_how_many_repeats_would_decide_it() -> None:
    iv = uncertainty.mean_interval([0.96, 1.0, 0.98, 1.02, 0.97, 0.99])
    assert uncertainty.judge(iv, 1.0, None) is Judgement.INCONCLUSIVE
    n = uncertainty.repeats_to_decide(iv, 1.0, None)
    assert n is not None and n > iv.n
    # At that n, the same mean and spread lie below the edge.
    t = uncertainty._t(n)
    assert iv.mean + t * iv.sd / math.sqrt(n) < 1.0
    assert iv.mean + uncertainty._t(n - 1) * iv.sd / math.sqrt(n - 1) >= 1.0 or n - 1 == iv.n
    # A mean on the edge is never decided.
    on = uncertainty.mean_interval([0.9, 1.1])
    assert uncertainty.repeats_to_decide(on, 1.0, None) is None


def test_a_ratio_is_taken_per_pair() -> None:
    iv = uncertainty.ratio_interval([(90.0, 100.0), (45.0, 50.0), (180.0, 200.0)])
    assert iv.mean == pytest.approx(0.9) and iv.low == pytest.approx(0.9) and iv.n == 3, "drift cancels"
    with pytest.raises(ValueError):
        uncertainty.ratio_interval([(1.0, 0.0)])


def _verdict(
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    ref_value: float | None = None,
    relative: bool = False,
    band: str = "mean_mbps(f) >= 85",
) -> Verdict:
    return Verdict(
        metric="mean_mbps",
        band=band,
        paper="",
        why="",
        value=value,
        low=low,
        high=high,
        ok=None,
        ref_value=ref_value,
        relative=relative,
        ref_stack="libudt" if ref_value is not None else "",
    )


def _part(values: list[dict[str, list[Verdict]]]) -> PartResult:
    """A part with stacks udt-rs and libudt, one repeat per entry of ``values``: {stack: [verdicts]}."""

    def res(stack: str, verdicts: list[Verdict]) -> StackResult:
        return StackResult(stack=stack, protocol="udt", verdicts=verdicts)

    runs = [{s: res(s, vs) for s, vs in rep.items()} for rep in values]
    return part_of_repeats(runs)


def test_a_part_run_once_keeps_its_own_verdicts() -> None:
    v = _verdict(90.0, low=85.0)
    part = _part([{"udt-rs": [v]}])
    assert repeats.judged(part)["udt-rs"] == [v]


def test_repeats_give_each_band_an_interval_and_a_three_way_reading() -> None:
    # udt-rs's goodput straddles 85; libudt's is inside; the relative band is judged per pair.
    reps: list[dict[str, list[Verdict]]] = []
    for rs, lib in ((84.0, 90.0), (88.0, 91.0), (86.0, 89.0)):
        reps.append(
            {
                "udt-rs": [
                    _verdict(rs, low=85.0, ref_value=lib),
                    _verdict(rs, low=0.95 * lib, ref_value=lib, relative=True, band="mean_mbps(f) >= 0.95 x reference"),
                ],
                "libudt": [_verdict(lib, low=85.0)],
            }
        )
    out = repeats.judged(_part(reps))
    own, rel = out["udt-rs"]
    assert own.n == 3 and own.judgement == "inconclusive" and own.reading == "inconclusive" and own.ok is None
    assert own.ci_low is not None and own.ci_high is not None
    assert own.ci_low < 85.0 < own.ci_high and own.value == pytest.approx(86.0)
    assert own.repeats_to_decide is not None and own.repeats_to_decide > 3
    assert "n = 3" in own.line() and "repeats would decide it" in own.line()
    assert rel.ratio == pytest.approx((84 / 90 + 88 / 91 + 86 / 89) / 3) and rel.n == 3
    (libudt,) = out["libudt"]
    assert libudt.judgement == "met" and libudt.reading == "PASS" and libudt.samples == [90.0, 91.0, 89.0]


def test_a_band_missed_by_the_reference_too_over_the_repeats_is_a_4_11_deviation() -> None:
    reps = [
        {"udt-rs": [_verdict(v, low=85.0, ref_value=r)], "libudt": [_verdict(r, low=85.0)]}
        for v, r in ((70.0, 72.0), (71.0, 73.0), (69.0, 71.0))
    ]
    out = repeats.judged(_part(reps))
    assert out["libudt"][0].reading == "4.11 deviation", "the reference's own miss"
    assert out["udt-rs"][0].judgement == "missed" and out["udt-rs"][0].reading == "4.11 deviation"
    reps = [
        {"udt-rs": [_verdict(v, low=85.0, ref_value=90.0)], "libudt": [_verdict(90.0, low=85.0)]}
        for v in (70.0, 71.0, 69.0)
    ]
    assert repeats.judged(_part(reps))["udt-rs"][0].reading == "FAIL"


def test_a_repeat_that_could_not_be_measured_is_counted_apart() -> None:
    reps = [{"udt-rs": [_verdict(v, low=85.0)]} for v in (90.0, None, 91.0)]
    (v,) = repeats.judged(_part(reps))["udt-rs"]
    assert v.n == 2 and v.samples == [90.0, None, 91.0] and "1 of 3 repeats not measured" in v.note


def _flow(name: str, mbps: float, series: Series, exact: bool | None = None) -> FlowResult:
    return FlowResult(
        name=name,
        src="a",
        dst="b",
        start_s=0.0,
        series_1s=series,
        series_raw=[],
        mean_mbps=mbps,
        bytes=0,
        exact=exact,
    )


def test_a_figure_over_repeats_counts_only_the_repeats_that_measured_it() -> None:
    runs = [
        StackResult(stack="udt-rs", protocol="udt", flows=[_flow("f", m, [])], metrics={"jain_index": j})
        for m, j in ((90.0, 0.9), (94.0, None), (92.0, 0.8))
    ]
    goodput = repeats.across(runs, lambda r: r.flows[0].mean_mbps)
    assert goodput is not None and goodput.n == 3 and goodput.mean == pytest.approx(92.0)
    # Student's t at 2 degrees of freedom: 4.303 x sd 2 / sqrt 3.
    assert goodput.high - goodput.mean == pytest.approx(4.303 * 2 / 3**0.5, rel=1e-3)
    jain = repeats.across(runs, lambda r: r.metrics.get("jain_index"))
    assert jain is not None and jain.n == 2 and jain.mean == pytest.approx(0.85)
    assert repeats.across(runs, lambda r: r.metrics.get("stability_index")) is None


def test_a_flows_series_over_repeats_keeps_the_seconds_every_repeat_measured() -> None:
    runs = [
        StackResult(stack="udt-rs", protocol="udt", flows=[_flow("f", 0, [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)])]),
        StackResult(stack="udt-rs", protocol="udt", flows=[_flow("f", 0, [(1.0, 14.0), (2.0, 24.0)])]),
        StackResult(stack="udt-rs", protocol="udt", flows=[_flow("other", 0, [(1.0, 99.0)])]),
    ]
    band = repeats.series_across(runs, "f")
    assert [t for t, _ in band] == [1.0, 2.0], "second 3 was measured in one of the two repeats with the flow"
    assert [iv.mean for _, iv in band] == [12.0, 22.0] and all(iv.n == 2 for _, iv in band)
    assert all(iv.low < iv.mean < iv.high for _, iv in band)
