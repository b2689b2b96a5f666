"""Judging a stack's part against the part's tolerance bands (``[[part.band]]`` of the
experiment files): the same verdicts for the report's summary and the quick profiles' asserts.

A band's bounds are given in units (``of``) that make it independent of the run's scale: a
fraction of the bottleneck, of a fair share, or Mb/s at the paper's rates. A run shorter than a
band was set for is judged all the same, with a note: the band's measured ranges are for the
profile's duration.

Every verdict is also read against the reference stack's (libudt, UDT 4.11: ``reference = true``
in the registry) on the same band in the same run: PASS within the band; FAIL outside it while
the reference is within it, or when no reference ran; ``4.11 deviation`` outside it on the same
side as the reference, whose own misses read so too. The band stays where the paper puts it.

A band ``of = "reference"`` is the other way round: its unit is the reference stack's own value
in the same run (udt-rs's goodput within 5 % of libudt's, issue 13), so it is judged only beside
the reference (:func:`against_reference`) and reads PASS or FAIL. The quick profiles judge it
with the band's ``profile_min`` / ``profile_max``: one loss epoch moves a 25-40 s mean by 10-20 %.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..results.results import Reading, StackResult, Verdict
from .experiment import Band, Part


def metric_value(band: Band, res: StackResult, warmup_s: float) -> float | None:
    """The value ``band`` bounds, from ``res`` (None: not measured)."""
    if band.metric == "mean_mbps":
        f = res.flow(band.flow or "")
        return f.mean_after(band.after_s if band.after_s is not None else warmup_s)
    if band.metric == "time_to_90pct_s":
        return res.flow(band.flow or "").time_to_90pct_s
    if band.metric == "loss_pct":
        return res.flow(band.flow or "").loss_pct
    if band.metric == "rcvbuf_drops":
        drops = res.flow(band.flow or "").rcvbuf_drops
        return None if drops is None else float(drops)
    if band.metric == "bytes_exact":
        exact = res.flow(band.flow or "").exact
        return None if exact is None else float(exact)
    if band.metric == "flow_ratio":
        num, den = res.flow(band.flow or "").mean_mbps, res.flow(band.over or "").mean_mbps
        return num / den if den > 0 else None
    return res.metrics.get(band.metric)


def unit_value(band: Band, res: StackResult, scale: float) -> float | None:
    """What 1.0 of the band's ``of`` unit is in this run, Mb/s (None: no capacity known)."""
    if band.of == "absolute":
        return 1.0
    if band.of == "paper_mbps":
        return scale
    if band.of == "rate":
        return res.flow(band.flow).rate_mbps if band.flow else None
    # A flow's mean against that flow's bottleneck; a part's metric against the part's.
    flows = [res.flow(band.flow)] if band.flow and band.metric == "mean_mbps" else res.flows
    caps = [f.capacity_mbps for f in flows]
    known = [c for c in caps if c]
    if not known:
        return None
    cap = max(known)
    return cap / len(res.flows) if band.of == "fair_share" else cap


def judge(
    band: Band,
    res: StackResult,
    scale: float,
    warmup_s: float,
    duration_s: float,
    part: Part,
    ref: StackResult | None = None,
    profile: bool = False,
) -> Verdict:
    """``band`` judged on ``res``; a reference-relative band against ``ref``, the reference
    stack's result in the same run; ``profile``: with the quick profile's bounds."""
    value = metric_value(band, res, warmup_s)
    unit = (
        (None if ref is None else metric_value(band, ref, warmup_s)) if band.relative else unit_value(band, res, scale)
    )
    lo, hi = band.bounds(profile)
    low = lo * unit if lo is not None and unit is not None else None
    high = hi * unit if hi is not None and unit is not None else None
    ok: bool | None = None
    note = shown = ""
    # A flow that ran and never got to 90 % has an outcome, not a missing value: its time is
    # later than the run.
    unreached = band.metric == "time_to_90pct_s" and value is None and bool(res.flow(band.flow or "").series_1s)
    if unreached:
        shown = f"not within the {duration_s:g} s run"
    if band.relative and band.metric == "time_to_90pct_s" and (value is None) != (unit is None):
        ok = value is not None  # one of the two never reached 90 %: the one that did is the earlier
        note = f"{'this stack' if value is None else 'the reference'} never reached 90 %"
    elif unreached and band.relative:
        note = "neither this stack nor the reference reached 90 % within the run" if ref is not None else ""
    elif unreached:
        # Judged when the run lasted at least the band's bound: the flow did not get there in time.
        ok = False if high is not None and duration_s >= high else None
        note = "" if ok is False else "the run ended before the band's bound"
    elif value is None or unit is None:
        note = "" if value is None else "no bottleneck rate to scale the band by"
    else:
        ok = (low is None or value >= low) and (high is None or value <= high)
    if (lo, hi) != (band.min, band.max):
        floor = " and ".join(f"{op} {b:g}" for op, b in ((">=", lo), ("<=", hi)) if b is not None)
        note = "; ".join(n for n in (note, f"the quick profile's bound: {floor} x {band.of}") if n)
    if part.profile and duration_s < part.profile.duration:
        note = "; ".join(n for n in (note, f"the band is set for {part.profile.duration:g} s runs") if n)
    return Verdict(
        metric=band.metric,
        band=band.describe(),
        paper=band.paper,
        why=band.why,
        value=value,
        low=low,
        high=high,
        ok=ok,
        note=note,
        shown=shown,
        # A reference-relative band's unit is the reference's value (no reference: not judged).
        ref_stack=ref.stack if band.relative and ref is not None else "",
        ref_value=unit if band.relative else None,
        relative=band.relative,
    )


def judge_all(
    part: Part, res: StackResult, scale: float, warmup_s: float, duration_s: float, reference: bool = False
) -> list[Verdict]:
    """The verdicts of every band of ``part`` that applies to ``res``'s protocol, read as the
    reference stack's (``reference``) or as if no reference ran (until :func:`against_reference`).
    The reference-relative bands wait for :func:`against_reference`."""
    bands = [b for b in part.bands if b.protocol == res.protocol and not b.relative]
    verdicts = [judge(b, res, scale, warmup_s, duration_s, part) for b in bands]
    for v in verdicts:
        v.reading = reading(v, None, reference)
    return verdicts


def _side(v: Verdict) -> str | None:
    """Which side of its band ``v``'s value is on: 'below', 'above' or None (within, or not judged)."""
    if v.ok is not False:
        return None
    if v.value is None:  # a time to 90 % later than the run: above its bound
        return "above"
    return "below" if v.low is not None and v.value < v.low else "above"


def reading(v: Verdict, ref: Verdict | None, reference: bool) -> Reading | None:
    """``v`` read against ``ref``, the reference stack's verdict on the same band in the same run
    (None: no reference ran); ``reference``: ``v`` is the reference's own. None: not measured."""
    if v.ok is None:
        return None
    if v.ok:
        return "PASS"
    if reference or (ref is not None and _side(ref) == _side(v)):
        return "4.11 deviation"
    return "FAIL"


def against_reference(
    stacks: Mapping[str, StackResult],
    reference: str,
    part: Part,
    scale: float,
    warmup_s: float,
    duration_s: float,
    profile: bool = False,
) -> list[StackResult]:
    """Read the verdicts of a part's other stacks of the reference's protocol against the
    reference stack's verdicts on the same bands: each carries the reference's value and whether
    it was within the band. Then judge the part's reference-relative bands on each of them (the
    quick profile's: ``profile``), appended to its verdicts. The stacks read (none when the
    reference did not run)."""
    ref = stacks.get(reference)
    if ref is None:
        return []
    by_band = {r.band: r for r in ref.verdicts}
    relative = [b for b in part.bands if b.relative and b.protocol == ref.protocol and (not profile or b.in_profile())]
    read = []
    for res in stacks.values():
        if res is ref or res.protocol != ref.protocol:
            continue
        for v in res.verdicts:
            r = by_band.get(v.band)
            if r is not None:
                v.ref_stack, v.ref_value, v.ref_ok = reference, r.value, r.ok
            v.reading = reading(v, r, False)
        for b in relative:
            v = judge(b, res, scale, warmup_s, duration_s, part, ref, profile)
            v.reading = reading(v, None, False)
            res.verdicts.append(v)
        read.append(res)
    return read
