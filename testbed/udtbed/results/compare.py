"""Two runs side by side, or two stacks of one run: every judged figure with its change, its
interval and whether the change is more than noise (``udtbed compare``, ``make compare``).

A row is one band's figure (goodput, time to 90 %, Jain's index ...) of one part for a stack in
A and a stack in B, over each side's repeats (``udtbed run --repeat N``). The change is B's
mean over A's. Whether it is more than the runs' scatter is Welch's t test (``scipy.stats.
ttest_ind``, unequal variances: two builds or two stacks need not scatter alike; the repeats'
values are means of many seconds, so nearly normal), and since many rows are tested at once the
p-values are corrected by Holm's step-down method, which holds the chance of any false alarm
among all rows at ``alpha``. A row **regressed** when its corrected p is below ``alpha`` and it
moved the wrong way by more than ``threshold`` (the band says which way is wrong: a band with a
floor wants more, one with a ceiling less); **improved** likewise the other way; **same**
otherwise. A side with one repeat has no spread: its rows are shown, not tested. A figure that
one side measured in every repeat and the other in none (a time to 90 % never reached) is
regressed or improved without a test.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from scipy import stats  # type: ignore[import-untyped]
from udtharness.uncertainty import Interval, mean_interval

from . import repeats
from .results import ExperimentResult, Verdict

Outcome = Literal["regressed", "improved", "same", "not tested"]
ALPHA = 0.05
THRESHOLD = 0.05


@dataclass(frozen=True)
class Row:
    experiment: str
    part: str
    band: str
    stack_a: str
    stack_b: str
    a: Interval | None
    b: Interval | None
    better: Literal["higher", "lower"]
    p: float | None = None
    p_holm: float | None = None
    outcome: Outcome = "not tested"

    @property
    def change(self) -> float | None:
        if self.a is None or self.b is None or self.a.mean == 0:
            return None
        return self.b.mean / self.a.mean - 1


class CompareError(ValueError):
    """The runs cannot be compared as asked; the message says why and what to do."""


def _results(run: Path) -> list[ExperimentResult]:
    meta_path = run / "run.json"
    if not meta_path.is_file():
        raise CompareError(f"{run} is not a run directory (no run.json): name one under results/testbed/")
    meta = json.loads(meta_path.read_text())
    return [ExperimentResult.read(run / f) for f in meta.get("results", {}).values()]


def _samples(res: list[ExperimentResult]) -> dict[tuple[str, str, str, str], list[Verdict]]:
    """(experiment, part, stack, band) -> that band's verdict in each repeat of each run."""
    out: dict[tuple[str, str, str, str], list[Verdict]] = {}
    for exp in res:
        for part in exp.parts:
            for stack, bands in repeats.by_band(part).items():
                for band, vs in bands.items():
                    # Several runs of one side (the gate's turns) add up.
                    out.setdefault((exp.experiment, part.label, stack, band), []).extend(vs)
    return out


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adjusted = [0.0] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def rows(
    a: list[ExperimentResult],
    b: list[ExperimentResult],
    pairs: Iterable[tuple[str, str]],
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
) -> list[Row]:
    """The rows of A's stack against B's for each of ``pairs`` ((stack in A, stack in B))."""
    sa, sb = _samples(a), _samples(b)
    out: list[Row] = []
    for stack_a, stack_b in pairs:
        for (exp, part, stack, band), va in sa.items():
            if stack != stack_a:
                continue
            vb = sb.get((exp, part, stack_b, band))
            if vb is None:
                continue
            xa = [v.value for v in va if v.value is not None]
            xb = [v.value for v in vb if v.value is not None]
            first = va[0]
            better: Literal["higher", "lower"] = "lower" if first.low is None and first.high is not None else "higher"
            row = Row(
                exp,
                part,
                band,
                stack_a,
                stack_b,
                mean_interval(xa) if xa else None,
                mean_interval(xb) if xb else None,
                better,
            )
            if len(xa) >= 2 and len(xb) >= 2:
                if max(xa) == min(xa) and max(xb) == min(xb):
                    p = 1.0 if xa[0] == xb[0] else 0.0  # neither side scatters: any difference is real
                else:
                    p = float(stats.ttest_ind(xa, xb, equal_var=False).pvalue)
                row = replace(row, p=1.0 if math.isnan(p) else p)
            elif len(xa) >= 2 and len(va) == len(xa) and not xb:
                # A measured it every time and B never (a time to 90 % B never reached): worse,
                # with no test needed; the other way round, better.
                row = replace(row, outcome="regressed")
            elif len(xb) >= 2 and len(vb) == len(xb) and not xa:
                row = replace(row, outcome="improved")
            out.append(row)
    tested = [(i, r.p) for i, r in enumerate(out) if r.p is not None]
    adjusted = holm([p for _, p in tested])
    for (i, _), q in zip(tested, adjusted, strict=True):
        r = out[i]
        change = r.change or 0.0
        worse = change < -threshold if r.better == "higher" else change > threshold
        improved = change > threshold if r.better == "higher" else change < -threshold
        outcome: Outcome = "regressed" if q < alpha and worse else "improved" if q < alpha and improved else "same"
        out[i] = replace(r, p_holm=q, outcome=outcome)
    return out


def compare_runs(
    runs_a: list[Path],
    runs_b: list[Path],
    pairs: list[tuple[str, str]],
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
) -> list[Row]:
    """Several runs a side (the gate's turns): each side's repeats are those of all its runs."""
    a = [e for r in runs_a for e in _results(r)]
    b = [e for r in runs_b for e in _results(r)]
    return rows(a, b, pairs, alpha, threshold)


def compare(
    run_a: Path,
    run_b: Path | None = None,
    stacks: tuple[str, str] | None = None,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
) -> list[Row]:
    """Run A against run B stack by stack (``stacks``: only that pair, A's first against B's
    second), or, without B, two stacks of A (``stacks`` then required)."""
    a = _results(run_a)
    if run_b is None:
        if stacks is None:
            raise CompareError("one run compares two of its stacks: name them, e.g. --stacks libudt,udt-rs")
        return rows(a, a, [stacks], alpha, threshold)
    b = _results(run_b)
    if stacks is not None:
        return rows(a, b, [stacks], alpha, threshold)
    names = sorted(
        {s for e in a for p in e.parts for s in p.stacks} & {s for e in b for p in e.parts for s in p.stacks}
    )
    if not names:
        raise CompareError(f"{run_a} and {run_b} share no stack: name the pair with --stacks A,B")
    return rows(a, b, [(s, s) for s in names], alpha, threshold)


def counts(out: list[Row], threshold: float, alpha: float) -> str:
    """'1 regressed, 0 improved, 2 within noise, 0 not tested (change beyond 5%, Holm-corrected
    p < 0.05)': the line under a table of rows."""
    n = {k: sum(r.outcome == k for r in out) for k in ("regressed", "improved", "same", "not tested")}
    return (
        f"{n['regressed']} regressed, {n['improved']} improved, {n['same']} within noise, {n['not tested']} not "
        f"tested (a side not measured, or with one repeat); change beyond {threshold:.0%}, Holm-corrected "
        f"p < {alpha:g}"
    )


def _iv(iv: Interval | None) -> str:
    return "–" if iv is None else iv.text()


def table(out: list[Row]) -> str:
    """The rows as a terminal table."""
    head = ("part", "band", "A", "B", "change", "p (Holm)", "")
    lines = [head]
    for r in out:
        change = "–" if r.change is None else f"{r.change * 100:+.1f} %"
        p = "–" if r.p_holm is None else f"{r.p_holm:.3g}"
        who = f"{r.stack_a}" if r.stack_a == r.stack_b else f"{r.stack_a} → {r.stack_b}"
        lines.append((f"{r.experiment}/{r.part} {who}", r.band, _iv(r.a), _iv(r.b), change, p, r.outcome))
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() for x in lines)


def page(out: list[Row], title: str) -> str:
    """The rows as a static HTML page."""
    cls = {"regressed": "bad", "improved": "ok", "same": "", "not tested": "note"}
    body = "".join(
        f"<tr class='{cls[r.outcome]}'><td>{html.escape(r.experiment)} / {html.escape(r.part)}</td>"
        f"<td>{html.escape(r.stack_a)}{'' if r.stack_a == r.stack_b else ' → ' + html.escape(r.stack_b)}</td>"
        f"<td class=l>{html.escape(r.band)}</td><td>{_iv(r.a)}</td><td>{_iv(r.b)}</td>"
        f"<td>{'–' if r.change is None else f'{r.change * 100:+.1f} %'}</td>"
        f"<td>{'–' if r.p_holm is None else f'{r.p_holm:.3g}'}</td><td>{r.outcome}</td></tr>"
        for r in out
    )
    style = (
        "body{font-family:sans-serif;max-width:1250px;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.l{text-align:left}"
        ".bad{background:#fbeaea}.ok{background:#eef8ee}.note{color:#666}"
    )
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><style>{style}</style>"
        f"<h1>{html.escape(title)}</h1><p>Mean [95 % interval] n per side; change is B over A; p is Welch's t "
        "test, Holm-corrected over the rows tested. A side with one repeat is not tested.</p>"
        "<table><tr><th>part</th><th>stack</th><th>band</th><th>A</th><th>B</th><th>change</th>"
        f"<th>p (Holm)</th><th></th></tr>{body}</table>"
    )


__all__ = [
    "ALPHA",
    "THRESHOLD",
    "CompareError",
    "Row",
    "compare",
    "compare_runs",
    "counts",
    "holm",
    "page",
    "rows",
    "table",
]
