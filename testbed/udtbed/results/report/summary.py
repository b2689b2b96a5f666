"""The summary, first on the page: "did it reproduce?" as a headline per stack (bands met, missed,
inconclusive, missed by 4.11 too) and a table with every band and paper figure of the run, each
stack's value with ✓ / ✕ and its reading (PASS, FAIL or 4.11 deviation, beside the reference
stack's: udtbed.experiments.bands), each row linking down to its part."""

from __future__ import annotations

from .. import repeats
from ..results import ExperimentResult, PartResult, Verdict
from .markup import SWEEP_UNITS, anchor, esc, flow_stack, fmt

# The class of a cell by its mark, or by its reading where it has one.
MARK_CLASS = {True: "ok", False: "bad", None: "bad"}
READING_CLASS = {"PASS": "ok", "FAIL": "bad", "4.11 deviation": "dev", "inconclusive": "inc"}


def stack_order(results: list[ExperimentResult]) -> list[str]:
    """Every stack of the run, in the order the results first name them: the summary's columns."""
    seen: dict[str, None] = {}
    for r in results:
        for p in r.parts:
            for s in p.stacks:
                seen.setdefault(s)
    return list(seen)


def _verdict_cell(v: Verdict | None, lone: bool = False) -> str:
    """A stack's cell of a band's row; ``lone``: the run repeated other runs, so a value judged
    on one run says that it has no interval."""
    if v is None:
        return "<td class=note>–</td>"
    # The value and its mark on one line; the interval, the reference's value and the reading
    # each on a line of their own, so that a column stays narrow with many stacks.
    value = v.value_text
    interval = f"<span class='small iv'>{esc(v.interval.strip())}</span>" if v.interval else ""
    if not interval and lone and v.value is not None:
        interval = "<span class='small iv'>one run: no interval</span>"
    ref = f"({esc(v.ref)}) " if v.ref else ""
    reading = f"<span class='small iv'>{ref}{v.reading or ''}</span>" if v.reading or ref else ""
    # A flow the run ended too early for is not a fault of the run: amber, not red.
    cls = READING_CLASS[v.reading] if v.reading else "inc" if v.shown and v.ok is None else MARK_CLASS[v.ok]
    return f"<td class={cls} title='{esc(v.line())}'>{value} <span class=mark>{v.mark}</span>{interval}{reading}</td>"


def section(results: list[ExperimentResult], stacks: list[str]) -> str:
    """ "Did it reproduce?": a headline per stack, then a row per band and paper figure of each part,
    a column per stack of ``stacks``, and the bands each met."""
    head = (
        "<tr><th>experiment</th><th class=l>part</th><th class=l>what is judged</th><th class=l>paper</th>"
        "<th>band (this scale)</th>" + "".join(f"<th>{esc(s)}</th>" for s in stacks) + "</tr>"
    )
    rows: list[str] = []
    met = {s: [0, 0, 0] for s in stacks}  # bands met, bands judged, 4.11 deviations
    counts = {
        s: dict.fromkeys(("met", "missed", "inconclusive", "deviation", "unmeasured", "flagged", "lone"), 0)
        for s in stacks
    }
    # The most repeats any stack ran a part, and per stack the most it ran one (--repeat-only
    # repeats some runs and not others).
    ran = {s: max((len(repeats.runs(p, s)) for e in results for p in e.parts), default=1) for s in stacks}
    most = max(ran.values(), default=1)
    for exp in results:
        for part in exp.parts:
            part_rows: list[str] = []
            # Each stack's verdicts, over the part's repeats when it ran more than once.
            judged = {s: vs for s, vs in repeats.judged(part).items() if vs}
            # One row per band, in the order the stacks list them; a stack may lack some (a
            # reference-relative band judges only the stacks beside the reference).
            bands: dict[str, Verdict] = {}
            for vs in judged.values():
                for v in vs:
                    bands.setdefault(v.band, v)
            for key, v in bands.items():
                cells = []
                for s in stacks:
                    vv = next((x for x in judged.get(s, []) if x.band == key), None)
                    if vv is not None:
                        met[s][1] += 1
                        met[s][0] += bool(vv.ok)
                        met[s][2] += vv.reading == "4.11 deviation"
                        counts[s][_tally(vv)] += 1
                        counts[s]["flagged"] += bool(vv.machine_flags)
                        counts[s]["lone"] += vv.n <= 1 and vv.value is not None
                    cells.append(_verdict_cell(vv, lone=most > 1))
                part_rows.append(
                    f"<td class=l title='{esc(v.why)}'>{esc(v.band)}</td><td class=l>{esc(v.paper)}</td>"
                    f"<td>{v.want}</td>{''.join(cells)}"
                )
            part_rows.extend(_paper_rows(exp, part, stacks))
            if part_rows:
                # The experiment and the part once, beside all of their rows.
                link = f"<a href='#{anchor(exp, part)}'>{esc(part.label)}</a>"
                n = len(part_rows)
                part_rows[0] = (
                    f"<td class=l rowspan={n}>{esc(exp.figure)}</td><td class=l rowspan={n}>{link}</td>" + part_rows[0]
                )
                rows.extend(f"<tr>{r}</tr>" for r in part_rows)
    total = "".join(
        f"<td><b>{m[0]} / {m[1]}</b>{f' <span class=small>({m[2]} 4.11 deviation)</span>' if m[2] else ''}</td>"
        if m[1]
        else "<td class=note>–</td>"
        for m in met.values()
    )
    rows.append(f"<tr><td class=l colspan=5><b>bands met</b></td>{total}</tr>")
    return (
        "<h2>Did it reproduce?</h2>"
        + _headlines(counts, ran)
        + "<p class=note>Every band stands for a paper figure (hover a row for why it "
        "is where it is; docs/testbed/experiments.md). ✓ met, ✕ missed, ? not measured; – the band does not judge "
        "that stack (TCP is the papers' comparison, not held to UDT's bands). Mb/s are at the run's scale. "
        "Each figure reads PASS (met), FAIL (missed while the reference stack in the same run, in brackets, met "
        "it, or none ran) or 4.11 deviation (missed on the same side by the reference stack too: UDT 4.11 "
        "itself does not reach the paper there; the band stays the paper's).</p>"
        f"<table class=summary>{head}{''.join(rows)}</table>"
    )


def _tally(v: Verdict) -> str:
    if v.reading == "4.11 deviation":
        return "deviation"
    if v.judgement == "inconclusive":
        return "inconclusive"
    return "unmeasured" if v.ok is None else "met" if v.ok else "missed"


def _headlines(counts: dict[str, dict[str, int]], ran: dict[str, int]) -> str:
    """One line per judged stack above the table: its bands met, missed, inconclusive (of them
    those on runs the host watch flagged: udtbed.results.repeats.judged) and 4.11 deviations, and over
    how many repeats."""
    lines = []
    most = max(ran.values(), default=1)
    for s, c in counts.items():
        if not any(c.values()):
            continue
        words = [f"{c['met']} met", f"{c['missed']} missed"]
        flagged = f" ({c['flagged']} on timing the host watch flagged)" if c["flagged"] else ""
        words += [f"{c['inconclusive']} inconclusive{flagged}"] if most > 1 or c["inconclusive"] else []
        words += [f"{c['deviation']} where 4.11 misses too"] if c["deviation"] else []
        words += [f"{c['unmeasured']} not measured"] if c["unmeasured"] else []
        cls = "bad" if c["missed"] else "inc" if c["inconclusive"] or c["unmeasured"] else "ok"
        lines.append(f"<li class={cls}><b>{esc(s)}</b>: {', '.join(words)}</li>")
    if not lines:
        return ""
    judged = [s for s, c in counts.items() if any(c.values())]
    repeated = [s for s in judged if ran.get(s, 1) > 1]
    if most == 1:
        over = "one run each: no intervals"
    elif not any(counts[s]["lone"] for s in judged) and all(ran[s] == most for s in judged):
        over = f"over {most} repeats each (95 % intervals, Student's t)"
    else:
        over = (
            f"over up to {most} repeats where the run repeated a stack ({', '.join(repeated)}; 95 % intervals, "
            "Student's t), else on one run: no interval (the cell says so)"
        )
    return f"<ul class=headline>{''.join(lines)}</ul><p class=small>Bands judged {over}.</p>"


def _paper_rows(exp: ExperimentResult, part: PartResult, stacks: list[str]) -> list[str]:
    """The paper's numbers that no band judges: each beside every stack's figure, unjudged (the
    cells of a summary row after the experiment and part)."""
    rows = []
    if part.sweep:
        # A sweep's paper points: goodput (and loss) at each value the paper gives, beside each
        # stack's at the same value.
        what, div, unit = SWEEP_UNITS.get(part.sweep["option"], (part.sweep["option"], 1.0, ""))
        for q in part.sweep.get("paper", []):
            for key, label, nd in (("mbps", "goodput Mb/s", 1), ("loss_pct", "loss %", 2)):
                if key not in q:
                    continue
                cells = []
                for st in stacks:
                    r = part.stacks.get(st)
                    pt = next((p for p in r.sweep if p.value == q["value"]), None) if r else None
                    f = pt.flows[0] if pt and pt.flows else None
                    val = (f.mean_mbps if key == "mbps" else f.loss_pct) if f else None
                    cells.append(f"<td>{fmt(val, nd)}</td>")
                paper = f"{q[key] * exp.scale:.1f} ({q[key]:g} × {exp.scale:g})" if key == "mbps" else f"{q[key]:g}"
                rows.append(
                    f"<td class=l>{label} at {esc(what)} {q['value'] / div:g} {unit}</td>"
                    f"<td class=l>{paper}</td><td>–</td>{''.join(cells)}"
                )
        return rows
    if "short_tcp" in part.paper:
        base = part.paper["short_tcp"]
        counts = sorted(int(k) for k in base)
        if len(counts) >= 2 and base[str(counts[0])]:
            lo, hi = counts[0], counts[-1]
            want = base[str(hi)] / base[str(lo)]
            cells = []
            for s in stacks:
                r = part.stacks.get(s)
                pts = {p.bulk_flows: p.short_aggregate_mbps for p in r.points} if r else {}
                ratio = pts[hi] / pts[lo] if pts.get(lo) and hi in pts else None
                cells.append(f"<td>{fmt(ratio, 2)}</td>")
            rows.append(
                f"<td class=l>short TCP aggregate with {hi} bulk flows / with {lo}</td>"
                f"<td class=l>{want:.2f} ({base[str(hi)]:g} / {base[str(lo)]:g} Mb/s)</td><td>–</td>"
                f"{''.join(cells)}"
            )
        return rows
    for proto, flows in part.paper.items():
        for flow, mbps in flows.items():
            cells = []
            for s in stacks:
                r = part.stacks.get(s)
                val, ran = None, r.protocol if r is not None else None
                if r is not None and flow == "join":
                    val = r.metrics.get("join_mbps")
                elif r is not None:
                    f = next((f for f in r.flows if f.name == flow), None)
                    if f is not None:
                        # A flow that names its stack ran that protocol beside the stack under test.
                        val, ran = f.mean_mbps, f.protocol or r.protocol
                cells.append(f"<td>{fmt(val)}</td>" if r is None or ran == proto else f"<td class=note>{fmt(val)}</td>")
            stack = flow_stack(part, flow)
            what = "join throughput (n × slowest)" if flow == "join" else f"{flow}{stack}: mean Mb/s"
            rows.append(
                f"<td class=l>{esc(what)}</td><td class=l>{proto.upper()} {mbps:g} × {exp.scale:g} = "
                f"{mbps * exp.scale:.1f}</td><td>–</td>{''.join(cells)}"
            )
    return rows
