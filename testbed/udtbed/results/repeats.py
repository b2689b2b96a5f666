"""A part's bands judged over its repeats (``udtbed run --repeat N``).

Each repeat judged every band on its own run (udtbed.experiments.bands), as a single run always was. Here
the repeats' values of one band on one stack become one :class:`~udtbed.results.results.Verdict` with
the mean, its 95 % interval and n (udtharness.uncertainty), and a three-way judgement: met (the
interval inside the band), missed (outside), inconclusive (straddling an edge, with about how
many repeats would decide it). A band relative to the reference stack (``of = "reference"``) is
judged on the ratio taken per repeat pair, so that its interval is the ratio's own.

The reading against the reference stack follows udtbed.experiments.bands: a missed band is ``4.11
deviation`` when the reference missed it on the same side over the same repeats, else FAIL; an
inconclusive one reads ``inconclusive``. One repeat gives back the run's own verdicts.

A stack whose runs of a part the host watch flagged (another process on the run's CPUs, steal,
late releases: udtbed.emulation.hostwatch.machine_flags) measured the machine as well as the protocol:
its bands there are inconclusive, whatever the figures, and so the headline counts them; a
band relative to the reference is so too where the reference's runs were flagged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from udtharness.stacks import reference_stacks
from udtharness.uncertainty import Interval, Judgement, judge, mean_interval, ratio_interval, repeats_to_decide

from .results import FlowResult, PartResult, Reading, StackResult, Verdict


def _side(v: Verdict) -> str | None:
    if v.judgement != Judgement.MISSED:
        return None
    if v.value is None:  # a time to 90 % later than the run: above its bound
        return "above"
    return "below" if v.low is not None and v.value < v.low else "above"


def combine(runs: list[Verdict]) -> Verdict:
    """One band's verdicts on one stack, a repeat each, as one verdict over the repeats."""
    first = runs[0]
    values = [v.value for v in runs]
    measured = [x for x in values if x is not None]
    out = replace(first, samples=values, n=len(measured), reading=None, note=first.note)
    if not measured:
        if all(v.ok is False for v in runs):
            # Missed in every repeat without a value: a flow that never reached 90 % in the time
            # the band allows (udtbed.experiments.bands).
            return replace(out, value=None, ok=False, judgement=Judgement.MISSED.value)
        return replace(out, value=None, ok=None, judgement=None)
    out = replace(out, shown="")
    if first.relative and first.ref_value is not None:
        pairs = [(v.value, v.ref_value) for v in runs if v.value is not None and v.ref_value]
        iv = ratio_interval(pairs)
        # The band's bounds as multiples of the reference (the same in every repeat).
        lo = first.low / first.ref_value if first.low is not None else None
        hi = first.high / first.ref_value if first.high is not None else None
        out = replace(out, ratio=iv.mean, n=iv.n)
    else:
        iv = mean_interval(measured)
        lo, hi = first.low, first.high
    j = _judge(iv, lo, hi, first.metric)
    mean = mean_interval(measured).mean
    left = len(values) - len(measured)
    note = "; ".join(
        n
        for n in (
            first.note,
            f"{left} of {len(values)} repeats not measured" if left else "",
            "one repeat: no interval" if iv.n == 1 else "",
        )
        if n
    )
    return replace(
        out,
        value=mean,
        ci_low=iv.low if iv.n > 1 else None,
        ci_high=iv.high if iv.n > 1 else None,
        ok=None if j is Judgement.INCONCLUSIVE else j is Judgement.MET,
        judgement=j.value,
        repeats_to_decide=repeats_to_decide(iv, lo, hi) if j is Judgement.INCONCLUSIVE else None,
        ref_value=(mean_interval(r).mean if (r := [v.ref_value for v in runs if v.ref_value is not None]) else None),
        note=note,
    )


def _judge(iv: Interval, lo: float | None, hi: float | None, metric: str) -> Judgement:
    if metric == "bytes_exact":
        # Every repeat's transfer must be exact: one corrupted repeat is a miss, not noise.
        return Judgement.MET if lo is None or iv.low >= lo else Judgement.MISSED
    return judge(iv, lo, hi)


def _reading(v: Verdict, ref: Verdict | None, reference: bool) -> Reading | None:
    if v.judgement is None:
        return None
    if v.judgement == Judgement.INCONCLUSIVE:
        return "inconclusive"
    if v.judgement == Judgement.MET:
        return "PASS"
    if reference or (ref is not None and _side(ref) == _side(v)):
        return "4.11 deviation"
    return "FAIL"


def by_band(part: PartResult) -> dict[str, dict[str, list[Verdict]]]:
    """Per stack, per band, that band's verdict in each repeat that judged it, the first first
    (the one grouping the report's judgement and ``udtbed compare`` both read)."""
    out: dict[str, dict[str, list[Verdict]]] = {}
    for rep in part.repeats():
        for stack, res in rep.items():
            bands = out.setdefault(stack, {})
            for v in res.verdicts:
                bands.setdefault(v.band, []).append(v)
    return out


def judged(part: PartResult) -> dict[str, list[Verdict]]:
    """Per stack, its verdicts over the part's repeats (the run's own when it ran once); those
    of a stack whose runs the host watch flagged (:func:`machine_flags`) inconclusive."""
    out = _over_repeats(part)
    flags = {stack: machine_flags(part, stack) for stack in out}
    return {
        stack: [_unsettled(v, flags[stack] + (flags.get(v.ref_stack, []) if v.relative else [])) for v in vs]
        for stack, vs in out.items()
    }


def machine_flags(part: PartResult, stack: str) -> list[str]:
    """What the host watch flagged on ``stack``'s runs of ``part`` in any repeat: another process
    on the run's CPUs, the hypervisor's steal, emulators' late releases over the limit
    (udtbed.emulation.hostwatch.machine_flags); not a sender's own pacing."""
    return list(dict.fromkeys(f for r in runs(part, stack) for f in r.machine_flags))


def _unsettled(v: Verdict, flags: list[str]) -> Verdict:
    """``v`` inconclusive where the machine was flagged: its figure measured the machine as well
    as the stacks, so it neither meets nor misses a band (the figure itself is kept and shown)."""
    if not flags or (v.ok is None and v.judgement is None):
        return v
    why = "inconclusive: the host watch flagged the run's timing (the part's flags say how)"
    return replace(
        v,
        ok=None,
        judgement=Judgement.INCONCLUSIVE.value,
        reading="inconclusive",
        repeats_to_decide=None,
        machine_flags=flags,
        note="; ".join(n for n in (v.note, why) if n),
    )


def _over_repeats(part: PartResult) -> dict[str, list[Verdict]]:
    repeats = part.repeats()
    if len(repeats) == 1:
        return {s: r.verdicts for s, r in part.stacks.items()}
    refs = reference_stacks()
    grouped = by_band(part)
    out: dict[str, list[Verdict]] = {
        stack: [combine(vs) for vs in grouped.get(stack, {}).values()] for stack in part.stacks
    }
    for stack, verdicts in out.items():
        protocol = part.stacks[stack].protocol
        reference = refs.get(protocol)
        ref = {v.band: v for v in out.get(reference or "", [])} if reference and reference != stack else {}
        for v in verdicts:
            v.reading = _reading(v, ref.get(v.band), reference == stack)
            if v.ref_stack and v.band in ref:
                v.ref_ok = ref[v.band].ok
    return out


def runs(part: PartResult, stack: str) -> list[StackResult]:
    """``stack``'s result in every repeat of ``part`` that ran it, the first first."""
    return [r[stack] for r in part.repeats() if stack in r]


def across(results: list[StackResult], get: Callable[[StackResult], float | None]) -> Interval | None:
    """One figure over the repeats that measured it (None: none did); n says how many did."""
    xs = [x for r in results if (x := get(r)) is not None]
    return mean_interval(xs) if xs else None


def flow_of(name: str) -> Callable[[StackResult], FlowResult | None]:
    """The flow ``name`` of a repeat's result (None where that repeat has none)."""
    return lambda r: next((f for f in r.flows if f.name == name), None)


def series_across(results: list[StackResult], flow: str) -> list[tuple[float, Interval]]:
    """A flow's receiver goodput per second over the repeats: each second that every repeat
    measured, with the mean and 95 % interval of its repeats' values (the 1-s grid is the same
    in every repeat: each series is resampled from its flow's start)."""
    by_t: dict[float, list[float]] = {}
    get = flow_of(flow)
    with_flow = [f for r in results if (f := get(r)) is not None]
    for f in with_flow:
        for t, x in f.series_1s:
            by_t.setdefault(t, []).append(x)
    return [(t, mean_interval(xs)) for t, xs in sorted(by_t.items()) if len(xs) == len(with_flow)]


__all__ = ["across", "by_band", "combine", "flow_of", "judged", "machine_flags", "runs", "series_across"]
