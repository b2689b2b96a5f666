"""Self-contained HTML report of a run directory (plots inline as base64 PNG, matplotlib).

It answers "did it reproduce?" first: a summary table with every paper result of the run, its
tolerance band at the run's scale and each stack's figure with ✓ / ✕ and its reading (PASS, FAIL
or 4.11 deviation, beside the reference stack's figure in the same run: udtbed.bands), each row
linking down to its part. The parts follow: calibration, the host-timing flags, one plot with
every stack and the paper's figure as a reference line, and the table of flows and metrics. When the run has
simulated figures (``udtbed.sim``'s JSON and PNG in ``<run dir>/sim``), the summary gives each
scenario's claims reproduced and a last section shows them beside the emulated ones.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from udtharness.uncertainty import Interval  # noqa: E402

from . import repeats, runs_index  # noqa: E402
from .hostwatch import HostReport  # noqa: E402
from .results import ExperimentResult, FlowResult, PartResult, StackResult, Verdict  # noqa: E402

CSS = """body{font-family:sans-serif;max-width:1250px;margin:1.5em auto;padding:0 .5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.bad{color:#b00}.ok{color:#070}.dev{color:#950}.inc{color:#555}
.note{color:#555}img{max-width:100%}td.l,th.l{text-align:left}.mark{font-weight:bold}
table.summary td.ok{background:#eef8ee}table.summary td.bad{background:#fbeaea}table.summary td.dev{background:#fdf3dc}
table.summary td.inc{background:#f0f0f0}.iv{display:block}ul.headline{font-size:110%}
table.summary{font-size:88%}table.summary td.l{min-width:6em}.small{font-size:85%}"""
# Paper figures in the plots: UDT dashed, SABUL dash-dotted, TCP dotted.
PAPER_STYLE = {"udt": "--", "sabul": "-.", "tcp": ":"}
MARK_CLASS = {True: "ok", False: "bad", None: "bad"}
READING_CLASS = {"PASS": "ok", "FAIL": "bad", "4.11 deviation": "dev", "inconclusive": "inc"}


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _fmt(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _e(s: object) -> str:
    return html.escape(str(s))


# --- figures over a part's repeats (udtbed run --repeat N) ---------------------------------------


def _ci(iv: Interval | None, nd: int = 1) -> str:
    """A figure over repeats: 'mean [low, high]' (the 95 % interval; n > 1), one run's value alone."""
    if iv is None:
        return "–"
    if iv.n < 2:
        return f"{iv.mean:.{nd}f}"
    return f"{iv.mean:.{nd}f} <span class=small>[{iv.low:.{nd}f}, {iv.high:.{nd}f}]</span>"


def _over(part: PartResult, stack: str, get: Callable[[StackResult], float | None]) -> Interval | None:
    return repeats.across(repeats.runs(part, stack), get)


def _of_flow(flow: str, attr: str) -> Callable[[StackResult], float | None]:
    """A repeat's figure ``attr`` of its flow ``flow`` (None where it has none)."""
    get = repeats.flow_of(flow)

    def figure(r: StackResult) -> float | None:
        f = get(r)
        return None if f is None else getattr(f, attr)

    return figure


def _metric(key: str) -> Callable[[StackResult], float | None]:
    return lambda r: r.metrics.get(key)


def _series(ax: Any, results: list[StackResult], flow: str, label: str) -> None:
    """A flow's 1-s goodput: one run's line, or over repeats their mean with its 95 % band."""
    band = repeats.series_across(results, flow) if len(results) > 1 else []
    if band:
        t = [x for x, _ in band]
        (ln,) = ax.plot(t, [iv.mean for _, iv in band], label=f"{label} (mean of {band[0][1].n}, 95 % band)")
        ax.fill_between(
            t, [iv.low for _, iv in band], [iv.high for _, iv in band], color=ln.get_color(), alpha=0.2, lw=0
        )
        return
    f = repeats.flow_of(flow)(results[0]) if results else None
    if f is not None and f.series_1s:
        ax.plot([p[0] for p in f.series_1s], [p[1] for p in f.series_1s], label=label)


def _errorbars(ax: Any, xs: list[float], ivs: list[Interval | None], fmt: str, label: str) -> None:
    """Points with their 95 % intervals as error bars (none for a point from one run)."""
    pts = [(x, iv) for x, iv in zip(xs, ivs, strict=True) if iv is not None]
    if not pts:
        return
    ys = [iv.mean for _, iv in pts]
    err = [[iv.mean - iv.low for _, iv in pts], [iv.high - iv.mean for _, iv in pts]]
    ax.errorbar([x for x, _ in pts], ys, yerr=err, fmt=fmt, capsize=3, label=label)


def _repeats_note(part: PartResult) -> str:
    """How the part's repeats ran: their number, order and each one's seeded start jitter."""
    reps = part.repeats()
    if len(reps) < 2:
        return ""
    each = "; ".join(
        f"{k + 1}: " + ", ".join(f"{_e(n)} +{r.start_jitter_s:.3g} s" for n, r in rep.items())
        for k, rep in enumerate(reps)
    )
    return (
        f"<p class=note>{len(reps)} repeats, the stacks in turns; tables give the mean and its 95 % interval "
        f"[low, high] (Student's t), plots the mean with its 95 % band or error bars. Start jitter per repeat "
        f"({each}), each drawn from the seed <code>run/experiment/part/stack/repeat</code>; the links' loss "
        f"streams run on from their topology seeds.</p>"
    )


def anchor(exp: ExperimentResult, part: PartResult) -> str:
    return f"{exp.experiment}--{part.label}"


# --- the summary --------------------------------------------------------------------------------


def _verdict_cell(v: Verdict | None, lone: bool = False) -> str:
    """A stack's cell of a band's row; ``lone``: the run repeated other runs, so a value judged
    on one run says that it has no interval."""
    if v is None:
        return "<td class=note>–</td>"
    # The value and its mark on one line; the interval, the reference's value and the reading
    # each on a line of their own, so that a column stays narrow with many stacks.
    value = v.value_text
    interval = f"<span class='small iv'>{_e(v.interval.strip())}</span>" if v.interval else ""
    if not interval and lone and v.value is not None:
        interval = "<span class='small iv'>one run: no interval</span>"
    ref = f"({_e(v.ref)}) " if v.ref else ""
    reading = f"<span class='small iv'>{ref}{v.reading or ''}</span>" if v.reading or ref else ""
    # A flow the run ended too early for is not a fault of the run: amber, not red.
    cls = READING_CLASS[v.reading] if v.reading else "inc" if v.shown and v.ok is None else MARK_CLASS[v.ok]
    return f"<td class={cls} title='{_e(v.line())}'>{value} <span class=mark>{v.mark}</span>{interval}{reading}</td>"


def _summary(results: list[ExperimentResult], stacks: list[str]) -> str:
    head = (
        "<tr><th>experiment</th><th class=l>part</th><th class=l>what is judged</th><th class=l>paper</th>"
        "<th>band (this scale)</th>" + "".join(f"<th>{_e(s)}</th>" for s in stacks) + "</tr>"
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
                    f"<td class=l title='{_e(v.why)}'>{_e(v.band)}</td><td class=l>{_e(v.paper)}</td>"
                    f"<td>{v.want}</td>{''.join(cells)}"
                )
            part_rows.extend(_paper_rows(exp, part, stacks))
            if part_rows:
                # The experiment and the part once, beside all of their rows.
                link = f"<a href='#{anchor(exp, part)}'>{_e(part.label)}</a>"
                n = len(part_rows)
                part_rows[0] = (
                    f"<td class=l rowspan={n}>{_e(exp.figure)}</td><td class=l rowspan={n}>{link}</td>" + part_rows[0]
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
    those on runs the host watch flagged: udtbed.repeats.judged) and 4.11 deviations, and over
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
        lines.append(f"<li class={cls}><b>{_e(s)}</b>: {', '.join(words)}</li>")
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
                    cells.append(f"<td>{_fmt(val, nd)}</td>")
                paper = f"{q[key] * exp.scale:.1f} ({q[key]:g} × {exp.scale:g})" if key == "mbps" else f"{q[key]:g}"
                rows.append(
                    f"<td class=l>{label} at {_e(what)} {q['value'] / div:g} {unit}</td>"
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
                cells.append(f"<td>{_fmt(ratio, 2)}</td>")
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
                cells.append(
                    f"<td>{_fmt(val)}</td>" if r is None or ran == proto else f"<td class=note>{_fmt(val)}</td>"
                )
            stack = _flow_stack(part, flow)
            what = "join throughput (n × slowest)" if flow == "join" else f"{flow}{stack}: mean Mb/s"
            rows.append(
                f"<td class=l>{_e(what)}</td><td class=l>{proto.upper()} {mbps:g} × {exp.scale:g} = "
                f"{mbps * exp.scale:.1f}</td><td>–</td>{''.join(cells)}"
            )
    return rows


def _flow_stack(part: PartResult, flow: str) -> str:
    """' (tcp-cubic)' when ``flow`` ran a stack of its own beside the stacks under test."""
    for name, r in part.stacks.items():
        f = next((f for f in r.flows if f.name == flow), None)
        if f is not None and f.stack and f.stack != name:
            return f" ({f.stack})"
    return ""


# --- the parts ----------------------------------------------------------------------------------


def _paper_lines(ax: Any, part: PartResult, scale: float, flows: list[str] | None) -> None:
    for proto, per in part.paper.items():
        for flow, mbps in per.items():
            if proto not in PAPER_STYLE or (flows is not None and flow not in flows):
                continue
            label = f"paper {proto.upper()} × scale" + (f" ({flow})" if flows is None and len(per) > 1 else "")
            ax.axhline(mbps * scale, color="k", lw=0.9, ls=PAPER_STYLE[proto], alpha=0.6, label=label)


def _part_bulk(part: PartResult, scale: float) -> str:
    stacks = part.stacks
    names = [f.name for f in next(iter(stacks.values())).flows]
    out = []
    if len(names) == 1:
        # One flow: every stack on one set of axes, against the paper's figure.
        fig, ax = plt.subplots(figsize=(7.5, 3.2))
        for name in stacks:
            _series(ax, repeats.runs(part, name), names[0], name)
        _paper_lines(ax, part, scale, None)
        ax.set_xlabel("s")
        ax.set_ylabel("Mb/s (receiver, 1 s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    else:
        fig, axes = plt.subplots(1, len(stacks), figsize=(4.2 * len(stacks), 3), squeeze=False, sharey=True)
        for ax, (name, s) in zip(axes[0], stacks.items(), strict=True):
            for f in s.flows:
                _series(ax, repeats.runs(part, name), f.name, f.name)
            for f in s.flows:
                proto = f.protocol or s.protocol
                mbps = part.paper.get(proto, {}).get(f.name)
                if mbps is not None:
                    ax.axhline(mbps * scale, color="k", lw=0.8, ls=PAPER_STYLE.get(proto, "--"), alpha=0.5)
            ax.set_title(name)
            ax.set_xlabel("s")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("Mb/s (receiver, 1 s); paper: UDT --, SABUL -., TCP :")
        axes[0][0].legend(fontsize=8)
    out.append(_png(fig))
    # A column of the paper's figures per protocol it gives (UDT and TCP at least, as before).
    protos = list(dict.fromkeys(["udt", *part.paper, "tcp"]))
    head = "<tr><th>flow</th>" + "".join(f"<th>paper {p.upper()} ×scale</th>" for p in protos)
    rows = [head + "".join(f"<th>{_e(n)}</th>" for n in stacks) + "</tr>"]
    for fl in names:
        papers = "".join(f"<td>{_fmt(_times(part.paper.get(p, {}).get(fl), scale))}</td>" for p in protos)
        cells = "".join(f"<td>{_ci(_over(part, n, _of_flow(fl, 'mean_mbps')))}</td>" for n in stacks)
        rows.append(f"<tr><td>{_e(fl + _flow_stack(part, fl))}</td>{papers}{cells}</tr>")
    labels = {
        "aggregate_mbps": "aggregate Mb/s",
        "jain_index": "Jain's index",
        "stability_index": "stability index",
        "join_mbps": "join throughput (n × slowest)",
    }
    for key, label in labels.items():
        ivs = [_over(part, n, _metric(key)) for n in stacks]
        if any(iv is not None for iv in ivs):
            pj = part.paper.get("udt", {}).get("join") if key == "join_mbps" else None
            cells = "".join(f"<td>{_ci(iv, 3 if 'index' in key else 1)}</td>" for iv in ivs)
            blanks = "<td></td>" * (len(protos) - 1)
            rows.append(f"<tr><td>{label}</td><td>{_fmt(_times(pj, scale))}</td>{blanks}{cells}</tr>")
    out.append("<table>" + "".join(rows) + "</table>")
    ttt = []
    for n, s in stacks.items():
        for f in s.flows:
            iv = _over(part, n, _of_flow(f.name, "time_to_90pct_s"))
            total = len(repeats.runs(part, n))
            never = total - (iv.n if iv else 0)
            ttt.append(
                f"{_e(n)}/{_e(f.name)} {_ci(iv)} s"
                + (f" (not reached in {never} of {total})" if never and total > 1 else "")
            )
    out.append('<p class="note">time to 90 % of the bottleneck (paper: 7.5 s): ' + ", ".join(ttt) + "</p>")
    return "\n".join(out)


SWEEP_UNITS = {
    "rate": ("sending rate", 1.0, "Mb/s"),
    "udp_buffer": ("UDP buffer", 1024, "KB"),
    "frtp_buffer": ("FRTP buffer", 1e6, "MB"),
}


def _at_value(value: float, attr: str) -> Callable[[StackResult], float | None]:
    """A repeat's figure ``attr`` of its sweep point at ``value`` (its first flow)."""

    def figure(r: StackResult) -> float | None:
        p = next((p for p in r.sweep if p.value == value), None)
        f: FlowResult | None = p.flows[0] if p is not None and p.flows else None
        return None if f is None else getattr(f, attr)

    return figure


def _part_sweep(part: PartResult, scale: float) -> str:
    """A sweep (the FRTP paper's Figs. 4, 6, 7, 8): goodput and loss against the option's value
    as the paper gives it (the run scaled it), the paper's points beside ours (x scale), and each
    end's CPU (Fig. 6)."""
    sw = part.sweep or {}
    what, div, unit = SWEEP_UNITS.get(sw.get("option", ""), (sw.get("option", "value"), 1.0, ""))
    paper = sw.get("paper", [])
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    rows = [
        f"<tr><th>stack</th><th>{_e(what)} ({unit}, paper scale)</th><th>at this scale</th><th>goodput Mb/s</th>"
        "<th>paper ×scale</th><th>loss %</th><th>paper loss %</th><th>receiver gaps</th><th>socket drops</th>"
        "<th>sender CPU %</th><th>receiver CPU %</th></tr>"
    ]
    for name, s in part.stacks.items():
        runs = repeats.runs(part, name)
        xs: list[float] = []
        good: list[Interval | None] = []
        loss: list[Interval | None] = []
        for p in s.sweep:
            f = p.flows[0] if p.flows else None
            if f is None:
                continue
            xs.append(p.value / div)
            good.append(repeats.across(runs, _at_value(p.value, "mean_mbps")))
            loss.append(repeats.across(runs, _at_value(p.value, "loss_pct")))
            pp: dict[str, float] = next((q for q in paper if q["value"] == p.value), {})
            here = p.value * scale / div
            rows.append(
                f"<tr><td>{_e(name)}</td><td>{p.value / div:g}</td><td>{here:.3g}</td><td>{_ci(good[-1])}</td>"
                f"<td>{_fmt(_times(pp.get('mbps'), scale))}</td><td>{_ci(loss[-1], 3)}</td>"
                f"<td>{_fmt(pp.get('loss_pct'), 2)}</td><td>{f.losses_recv if f.losses_recv is not None else '–'}</td>"
                f"<td>{f.rcvbuf_drops if f.rcvbuf_drops is not None else '–'}</td>"
                f"<td>{_fmt(f.cpu_send_pct, 0)}</td><td>{_fmt(f.cpu_recv_pct, 0)}</td></tr>"
            )
        _errorbars(ax, xs, good, "o-", f"{name} goodput")
        _errorbars(ax2, xs, loss, "o-", f"{name} loss")
    if paper:
        px = [q["value"] / div for q in paper if "mbps" in q]
        ax.plot(px, [q["mbps"] * scale for q in paper if "mbps" in q], "k^", label="paper × scale")
        lx = [q["value"] / div for q in paper if "loss_pct" in q]
        ax2.plot(lx, [q["loss_pct"] for q in paper if "loss_pct" in q], "k^", label="paper")
    for a, ylab in ((ax, "goodput Mb/s (after warm-up)"), (ax2, "loss % (retransmitted / sent)")):
        a.set_xlabel(f"{what} ({unit}, at the paper's scale; the run × {scale:g})")
        a.set_ylabel(ylab)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return _png(fig) + "<table>" + "".join(rows) + "</table>"


def _exact(runs: list[StackResult], flow: str) -> str:
    """'yes' when every repeat's transfer was exact, 'NO' (and in how many) when one was not."""
    get = repeats.flow_of(flow)
    marks = [f.exact for r in runs if (f := get(r)) is not None and f.exact is not None]
    if not marks:
        return "–"
    bad = marks.count(False)
    if not bad:
        return "yes"
    return "NO" + (f" in {bad} of {len(marks)}" if len(marks) > 1 else "")


def _flow_details(part: PartResult) -> str:
    """Loss, CPU and exactness of the flows that have them (fixed-rate and finite flows)."""
    rows = []
    for name, s in part.stacks.items():
        for f in s.flows:
            if f.loss_pct is None and f.exact is None and f.rate_mbps is None:
                continue
            rows.append(
                f"<tr><td>{_e(name)} / {_e(f.name)}</td><td>{_fmt(f.rate_mbps)}</td>"
                f"<td>{_ci(_over(part, name, _of_flow(f.name, 'mean_mbps')))}</td>"
                f"<td>{_ci(_over(part, name, _of_flow(f.name, 'loss_pct')), 3)}</td>"
                f"<td>{'–' if f.rcvbuf_drops is None else f.rcvbuf_drops}</td>"
                f"<td>{_fmt(f.cpu_send_pct, 0)}</td><td>{_fmt(f.cpu_recv_pct, 0)}</td>"
                f"<td>{_exact(repeats.runs(part, name), f.name)}</td></tr>"
            )
    if not rows:
        return ""
    head = (
        "<tr><th>stack / flow</th><th>rate's goodput Mb/s</th><th>goodput Mb/s</th><th>loss %</th><th>socket drops</th>"
        "<th>sender CPU %</th><th>receiver CPU %</th><th>bytes exact</th></tr>"
    )
    return "<table>" + head + "".join(rows) + "</table>"


def _capture(part: PartResult) -> str:
    """What each host interface carried (the paths' separation) and the data packets' spacing
    at the sender (the FRTP paper's Fig. 5: variance 0.00005 at 50 Mb/s, unit not given)."""
    caps = {n: s.capture for n, s in part.stacks.items() if s.capture}
    if not caps:
        return ""
    out = []
    for name, c in caps.items():
        cells = "".join(
            f"<tr><td>{_e(k)}</td><td>{v['udp_data']}</td><td>{v['udp_other']}</td><td>{v['tcp']}</td></tr>"
            for k, v in c["interfaces"].items()
        )
        sep = c.get("separated")
        verdict = (
            ""
            if sep is None
            else f"<p class={'ok' if sep else 'bad'}>paths separated: {'yes' if sep else 'NO'} "
            f"(UDP on the control net: {c['udp_on_control']}, TCP on the data net: {c['tcp_on_data']})</p>"
        )
        out.append(
            f"<p><b>{_e(name)}</b>: capture on every host interface</p><table><tr><th>host/interface</th>"
            f"<th>UDP DATA</th><th>UDP control</th><th>TCP</th></tr>{cells}</table>{verdict}"
        )
    ipts = {(n, fl): st for n, c in caps.items() for fl, st in c.get("ipt", {}).items() if st.get("n", 0) > 1}
    if ipts:
        fig, ax = plt.subplots(figsize=(6, 3))
        rows = [
            "<tr><th>stack / flow</th><th>gaps</th><th>mean µs</th><th>std dev µs</th><th>variance ms²</th>"
            "<th>variance s²</th><th>IQR / 1.349 µs</th><th>p1</th><th>p50</th><th>p99</th><th>max µs</th></tr>"
        ]
        for (n, fl), st in ipts.items():
            for what, x in (("", st), (" (after 1 s)", st.get("steady"))):
                if not x or x.get("n", 0) < 2:
                    continue
                q = x["quantiles_us"]
                rows.append(
                    f"<tr><td>{_e(n)} / {_e(fl)}{what}</td><td>{x['n']}</td><td>{x['mean_us']:.1f}</td>"
                    f"<td>{x['std_us']:.2f}</td><td>{x['var_ms2']:.2e}</td><td>{x['var_s2']:.2e}</td>"
                    f"<td>{x.get('sigma_iqr_us', float('nan')):.2f}</td><td>{q['p1']:.1f}</td>"
                    f"<td>{q['p50']:.1f}</td><td>{q['p99']:.1f}</td><td>{x['max_us']:.0f}</td></tr>"
                )
            x, y = zip(*st["cdf_us"], strict=True)
            ax.plot(x, y, label=f"{n}")
        ax.set_xlabel("inter-packet time at the sender's data interface, µs")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        out.append(_png(fig) + "<table>" + "".join(rows) + "</table>")
        out.append(
            "<p class=note>Paper Fig. 5: at 50 Mb/s the variance of the inter-packet times is 0.00005 "
            "(no unit; as ms² a standard deviation of 7.1 µs, as s² 7.1 ms).</p>"
        )
    return "\n".join(out)


def _times(mbps: float | None, scale: float) -> float | None:
    return None if mbps is None else mbps * scale


def _short_at(k: int, relative: bool) -> Callable[[StackResult], float | None]:
    """A repeat's short-flow aggregate at its ``k``-th bulk-flow count (relative: over its own
    no-bulk aggregate, taken within the repeat)."""

    def figure(r: StackResult) -> float | None:
        if k >= len(r.points):
            return None
        y = r.points[k].short_aggregate_mbps
        if not relative:
            return y
        base = r.points[0].short_aggregate_mbps
        return y / base if base else None

    return figure


def _part_short_tcp(part: PartResult) -> str:
    """Short-flow aggregate per bulk-flow count, absolute and relative to no bulk flows: the
    relative figure is the one comparable across scales (SC'04: 69 -> 48 Mb/s, i.e. 0.70;
    SABUL Table 2: 82 -> 32 Mb/s, 0.39)."""
    fig, ax = plt.subplots(figsize=(5, 3))
    counts = [p.bulk_flows for p in next(iter(part.stacks.values())).points]
    paper = {int(k): v for k, v in part.paper.get("short_tcp", {}).items()}
    base = paper.get(min(paper)) if paper else None
    head = "<tr><th>stack: short TCP Mb/s (share of no-bulk) at bulk flows</th>"
    rows = [head + "".join(f"<th>{n}</th>" for n in counts) + "</tr>"]
    if paper and base:
        cells = "".join(f"<td>{f'{paper[n]:g} ({paper[n] / base:.2f})' if n in paper else ''}</td>" for n in counts)
        rows.append(f"<tr><td>paper (1 Gb/s)</td>{cells}</tr>")
    for name, s in part.stacks.items():
        ns = [p.bulk_flows for p in s.points]
        runs = repeats.runs(part, name)
        ys = [repeats.across(runs, _short_at(k, relative=False)) for k in range(len(ns))]
        rel = [repeats.across(runs, _short_at(k, relative=True)) for k in range(len(ns))]
        _errorbars(ax, [float(n) for n in ns], rel, "o-", name)
        cells = "".join(f"<td>{_ci(y)} ({_ci(r, 2)})</td>" for y, r in zip(ys, rel, strict=True))
        cc = f", TCP {s.short_tcp_cc}" if s.short_tcp_cc else ""
        rows.append(f"<tr><td>{_e(name)} ({s.short_tcp_workers} at a time{_e(cc)})</td>{cells}</tr>")
    if paper and base:
        xs = sorted(paper)
        ax.plot(
            xs,
            [paper[x] / base for x in xs],
            "k--",
            label="paper " + " -> ".join(f"{paper[x]:g}" for x in xs) + " Mb/s",
        )
    ax.set_xlabel("bulk flows")
    ax.set_ylabel("short TCP aggregate / no-bulk")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig) + "<table>" + "".join(rows) + "</table>"


def _timing_flags(part: PartResult) -> str:
    """The stacks whose emulation or own timing was off (``host.flags``, udtbed.hostwatch), in
    every repeat; the summary counts the machine's flags among them inconclusive."""
    rows = []
    reps = part.repeats()
    for k, rep in enumerate(reps):
        for name, s in rep.items():
            hosts: list[tuple[int | None, HostReport | None]] = (
                [(p.bulk_flows, p.host) for p in s.points] if s.points else [(None, s.host)]
            )
            of = f" (repeat {k + 1})" if len(reps) > 1 else ""
            for n, h in hosts:
                if h and h.get("flags"):
                    rows.append(f"{name}{of}{f' ({n} bulk)' if n is not None else ''}: " + "; ".join(h["flags"]))
    if not rows:
        return ""
    return (
        "<p class='bad'>Timing off, so these results are not the protocols' alone "
        "(docs/testbed/timing.md, CPU and emulation timing; the summary counts the bands of a stack the machine "
        "was flagged on inconclusive):<br>" + "<br>".join(_e(r) for r in rows) + "</p>"
    )


def _capacity(part: PartResult) -> str:
    """Each UDT sender's link-capacity estimate against the bottleneck (``host.sender_pacing``):
    a stack that over-reads the link climbs faster and refills the queue sooner (UDT4.md §12.3)."""
    rows = [
        f"{name} {flow}: {p['capacity_times_bottleneck']:.2f}× ({p.get('capacity_median_pps')} pkt/s)"
        for name, s in part.stacks.items()
        if s.host is not None
        for flow, p in s.host.get("sender_pacing", {}).items()
        if "capacity_times_bottleneck" in p
    ]
    if not rows:
        return ""
    return (
        "<p class='small'>UDT senders' link-capacity estimates, median after slow start, against the "
        "bottleneck: " + "; ".join(_e(r) for r in rows) + "</p>"
    )


def _verdicts(part: PartResult) -> str:
    lines = [f"<li>{_e(s)}: {_e(v.line())}</li>" for s, r in part.stacks.items() for v in r.verdicts]
    return f"<ul class='small'>{''.join(lines)}</ul>" if lines else ""


def _calibration(part: PartResult) -> str:
    rows = "".join(
        f"<tr><td>{_e(c['src'])}→{_e(c['dst'])}</td>"
        f"<td>{_fmt(c['expected_rtt_ms'], 3)}</td><td>{_fmt(c['rtt_ms'], 3)}</td>"
        f"<td>{_fmt(c['expected_rate_mbps'])}</td><td>{_fmt(c['rate_mbps'])}</td>"
        f"<td class={'ok' if c['ok'] else 'bad'}>{'ok' if c['ok'] else 'OFF'}</td></tr>"
        for c in part.calibration
    )
    head = "<tr><th>path</th><th>RTT want ms</th><th>RTT ms</th><th>rate want Mb/s</th><th>rate Mb/s</th><th></th></tr>"
    return f"<table>{head}{rows}</table>"


def _cores(part: PartResult) -> str:
    """The part's core plan (udtbed.cores): what it needed, what the run had, who ran where."""
    c = part.cores
    if not c:
        return ""
    pinned = c.get("pinned")
    where = "; pinned: " + ", ".join(f"{k} on CPU {v}" for k, v in pinned.items()) if pinned else "; not pinned"
    line = f"cores: {c['need']} needed ({c['seats']}), the run had {c['have']}{where}"
    if not c.get("ok", True):
        return f"<p class='bad'>{_e(line)}: too few for this scale, flagged (CORES=flag)</p>"
    return f"<p class='small'>{_e(line)}</p>"


def _offloads(part: PartResult) -> str:
    """Whether every interface the part built had its offloads off (frames, not super-packets)."""
    o = part.offloads
    if not o:
        return ""
    n = max((sum(c.values()) for c in o.values()), default=0)
    left = {f: c for f, c in o.items() if set(c) != {"off"}}
    if not left:
        return f"<p class='small'>offloads: {_e(', '.join(o))} off on all {n} interfaces the part built</p>"
    words = "; ".join(f"{f}: " + ", ".join(f"{k} on {v}" for k, v in sorted(c.items())) for f, c in left.items())
    return f"<p class='bad'>offloads not off on every interface ({_e(words)}): frames may cross as super-packets</p>"


def _host(meta: dict[str, Any]) -> str:
    """The host's facts (run.json's ``host``, udtbed.hostinfo), folded: what a reader needs to
    trust or repeat the figures and no result line shows."""
    h = meta.get("host")
    if not isinstance(h, dict):
        return ""
    gov = ", ".join(f"{g} (CPUs {c})" for g, c in h.get("governors", {}).items())
    rows = [
        ("kernel", h.get("kernel")),
        ("CPU", f"{h.get('cpu_model')}; {h.get('cores_online')} online, the run had {h.get('run_cpus')}"),
        ("frequency governor", gov),
        ("clock source", h.get("clocksource")),
    ]
    rows += [(k, v) for k, v in h.get("sysctls", {}).items()]
    rows += [(k, v) for k, v in h.get("tools", {}).items()]
    rows += [(f"package {k}", v) for k, v in h.get("packages", {}).items()]
    rows.append(("python", h.get("python")))
    body = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
    summary = f"The host: {_e(h.get('cpu_model'))}, {_e(h.get('kernel'))}"
    return f"<details><summary>{summary}</summary><table>{body}</table></details>"


def _stack_order(results: list[ExperimentResult]) -> list[str]:
    seen: dict[str, None] = {}
    for r in results:
        for p in r.parts:
            for s in p.stacks:
                seen.setdefault(s)
    return list(seen)


# --- the simulated figures (udtbed.sim: `make simulate`, or a run's <run dir>/sim) ----------------

SIM_MARK = {True: ("ok", "✓"), False: ("bad", "✕"), None: ("note", "–")}


@dataclass(frozen=True)
class SimFile:
    """One ``<name>.json`` of a simulated-results directory: its data (``udtbed.sim.to_json``'s
    shape) or why it could not be read."""

    path: Path
    data: dict[str, Any] | None
    error: str = ""

    @property
    def anchor(self) -> str:
        return f"sim--{self.path.stem}"


def load_sims(sim_dir: Path) -> list[SimFile]:
    """Every ``*.json`` of ``sim_dir``, by name; one that is missing a part or is not JSON carries
    its error instead of its data (the report says so and goes on)."""
    out = []
    for path in sorted(Path(sim_dir).glob("*.json")):
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            for key, kind in (("figure", str), ("title", str), ("metric", str), ("points", list), ("checks", list)):
                if not isinstance(d.get(key), kind):
                    raise ValueError(f"'{key}' missing or not a {kind.__name__}")
            if not all(isinstance(p, dict) and isinstance(p.get("values"), dict) for p in d["points"]):
                raise ValueError("a point without its 'values'")
            if not all(isinstance(c, dict) and c.get("ok") in (True, False, None) for c in d["checks"]):
                raise ValueError("a check whose 'ok' is not true, false or null")
            out.append(SimFile(path, d))
        except (OSError, ValueError) as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            out.append(SimFile(path, None, f"{type(e).__name__}: {e}"))
    return out


def _claims(d: dict[str, Any]) -> tuple[int, int, int]:
    """(reproduced, judged, not judged) of a scenario's claims; over seeds an inconclusive
    claim (the seeds disagree) is among the not judged, :func:`_inconclusive` counts it."""
    oks = [c.get("ok") for c in d["checks"]]
    return sum(ok is True for ok in oks), sum(ok is not None for ok in oks), sum(ok is None for ok in oks)


def _inconclusive(d: dict[str, Any]) -> int:
    return sum(c.get("judgement") == "inconclusive" for c in d["checks"])


def _num(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:.3g}"
    return _e(v)


def _png_file(path: Path, alt: str) -> str:
    """A PNG already on disk, inline like ``_png``'s plots (a note where there is none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return f"<p class=note>no plot ({_e(path.name)} missing)</p>"
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def sim_summary(sims: list[SimFile]) -> str:
    """The summary's rows for the simulated figures: each scenario's claims reproduced, n / m."""
    if not sims:
        return ""
    rows = []
    for s in sims:
        if s.data is None:
            rows.append(f"<tr><td class=l>{_e(s.path.name)}</td><td class=bad colspan=2>unreadable: left out</td></tr>")
            continue
        ok, judged, unjudged = _claims(s.data)
        cls = "note" if not judged else ("ok" if ok == judged else "bad")
        claims = f"{ok} / {judged}" if judged else "–"
        inconclusive = _inconclusive(s.data)
        if inconclusive:
            claims += f" ({inconclusive} inconclusive over {len(s.data.get('seeds', []))} seeds)"
        if unjudged - inconclusive:
            claims += f" ({unjudged - inconclusive} not judged)"
        if not s.data["checks"]:
            claims += " (none judged on this run)" if s.data.get("quick") else " (none)"
        link = f"<a href='#{_e(s.anchor)}'>{_e(s.data['title'])}</a>"
        rows.append(
            f"<tr><td class=l>{_e(s.data['figure'])}</td><td class=l>{link}</td><td class={cls}>{claims}</td></tr>"
        )
    return (
        "<h3>Simulated figures</h3><p class=note>The papers' NS-2 figures in the simulator (udtbed.sim): "
        "each scenario's claims reproduced, of those judged.</p><table class=summary>"
        "<tr><th>figure</th><th class=l>scenario</th><th>claims reproduced</th></tr>" + "".join(rows) + "</table>"
    )


def _sim_scenario(s: SimFile, d: dict[str, Any]) -> str:
    metric = d["metric"]
    quick = " (quick version: only the claims marked quick are judged)" if d.get("quick") else ""
    out = [
        f"<h3 id='{_e(s.anchor)}'>{_e(d['figure'])}: {_e(d['title'])}</h3>",
        f"<p><b>Setup</b>: {_e(d.get('setup', ''))}</p>",
        f"<p><b>The paper's claim</b>: {_e(d.get('claim', ''))}</p>",
    ]
    if d.get("note"):
        out.append(f"<p class=note>{_e(d['note'])}</p>")
    if d["checks"]:
        head = "<th class=l>claim</th><th class=l>series</th><th class=l>key</th><th></th><th class=l>detail</th>"
        rows = [f"<tr>{head}</tr>"]
        for c in d["checks"]:
            cls, mark = ("inc", "~") if c.get("judgement") == "inconclusive" else SIM_MARK[c.get("ok")]
            rows.append(
                f"<tr><td class=l>{_e(c.get('claim', ''))}</td><td class=l>{_e(c.get('series', ''))}</td>"
                f"<td class=l>{_e(c.get('key', ''))}</td><td class='{cls} mark'>{mark}</td>"
                f"<td class='l small'>{_e(c.get('detail', ''))}</td></tr>"
            )
        ok, judged, _ = _claims(d)
        seeds = d.get("seeds", [])
        over = (
            f" over seeds {', '.join(map(str, seeds))} (a claim holds when it holds in every seed)"
            if len(seeds) > 1
            else ""
        )
        out.append(
            f"<p>Claims reproduced: <b>{ok} / {judged}</b>{_e(over)}{_e(quick)}</p><table>{''.join(rows)}</table>"
        )
    else:
        out.append(f"<p class=note>No claim judged on this run{_e(quick)}.</p>")
    paper = d.get("paper")
    if isinstance(paper, dict) and isinstance(paper.get("where"), dict):
        items = "".join(f"<li>{_e(label)}: {_e(where)}</li>" for label, where in paper["where"].items())
        out.append(
            f"<p><b>Where the paper's figure falls in the sweep</b> ({_e(paper.get('key', ''))}; "
            f"the setup leaves this parameter open):</p><ul>{items}</ul>"
        )
    x = d.get("x") or "x"
    rows = [f"<tr><th class=l>series</th><th>{_e(x)}</th><th>{_e(metric)}</th><th>wall s</th></tr>"]
    for p in d["points"]:
        rows.append(
            f"<tr><td class=l>{_e(p.get('series', ''))}</td><td>{_num(p.get('x'))}</td>"
            f"<td>{_num(p['values'].get(metric))}</td><td>{_num(p.get('wall_s'))}</td></tr>"
        )
    seed = f", seed {_e(d['seed'])}" if "seed" in d else ""
    out.append(f"<table>{''.join(rows)}</table><p class=note>{len(d['points'])} points{seed}.</p>")
    out.append(_png_file(s.path.with_suffix(".png"), f"{d['figure']} (simulated)"))
    return "\n".join(out)


NS2_MARK = {"agree": ("ok", "✓"), "disagree": ("bad", "✕"), "inconclusive": ("inc", "~")}


def ns2_checks(sim_dir: Path) -> str:
    """The simulator's TCP against NS-2's (``udtbed ns2-check``'s ``ns2-check.json`` in each
    ``ns2-check*`` folder of ``sim_dir``): per profile, every dumbbell's per-flow goodput in both,
    their ratio, the drops and the verdict; empty where there is none. An unreadable file is a
    note."""
    out = []
    for path in sorted(Path(sim_dir).glob("ns2-check*/ns2-check.json")):
        try:
            d = json.loads(path.read_text())
            rows = ["<tr><th class=l>dumbbell</th><th>ours Mb/s</th><th>NS-2 Mb/s</th><th>ratio</th>"
                    "<th>drops ours / NS-2</th><th></th></tr>"]  # fmt: skip
            verdicts: dict[str, int] = {}
            for c in d["scenarios"]:
                verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
                cls, mark = NS2_MARK.get(c["verdict"], ("note", "–"))
                ours, ns2 = c["ours"], c["ns2"]
                rows.append(
                    f"<tr><td class=l>{_e(c['scenario']['name'])}</td>"
                    f"<td>{ours['per_flow_mean_mbps']:.2f} ± {ours['per_flow_sd_mbps']:.2f}</td>"
                    f"<td>{ns2['per_flow_mean_mbps']:.2f} ± {ns2['per_flow_sd_mbps']:.2f}</td>"
                    f"<td>{c['ratio']:.3f} ± {c['stderr_ratio']:.3f}</td>"
                    f"<td>{ours['drops']:.0f} / {ns2['drops']:.0f}</td><td class='{cls} mark'>{mark}</td></tr>"
                )
            counts = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
            out.append(
                f"<h3>The simulator's TCP against NS-2 ({_e(path.parent.name)})</h3>"
                f"<p class=note><code>{_e(d.get('command', ''))}</code>: the same dumbbells in NS-2 2.35 and "
                f"in the simulator, {_e(d.get('seeds'))} seeds each; a dumbbell agrees (✓) when the per-flow "
                f"means are within {float(d['tolerance']):.0%}, ~ beyond it but within the seeds' scatter "
                f"(docs/simulator.md, 'Checked against NS-2'). {_e(counts)}.</p><table>{''.join(rows)}</table>"
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            out.append(f"<p class=bad>{_e(path)} left out: not an NS-2 check ({_e(type(e).__name__)}: {_e(e)}).</p>")
    return "\n".join(out)


def sim_section(sim_dir: Path, sims: list[SimFile] | None = None) -> str:
    """The simulated figures of ``sim_dir`` (``udtbed.sim.write``'s ``<name>.json`` and ``.png``):
    per scenario its setup, the paper's claim, the claims judged (✓ / ✕ / – not judged), the
    metric per series and x, and the plot. A file that cannot be read is a note, not an error."""
    if sims is None:
        sims = load_sims(sim_dir)
    out = [
        "<h2 id='sim'>Simulated figures (NS-2 scenarios, <code>make simulate</code>)</h2>",
        f"<p class=note>From {_e(sim_dir)}: the papers' NS-2 figures run in the deterministic simulator "
        "(docs/simulator.md) with the real protocol code. ✓ reproduced, ✕ not, – not judged.</p>",
    ]
    if not sims:
        out.append("<p class=note>No simulated results there.</p>")
    for s in sims:
        if s.data is not None:
            try:
                out.append(_sim_scenario(s, s.data))
                continue
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                s = SimFile(s.path, None, f"{type(e).__name__}: {e}")
        out.append(f"<p class=bad>{_e(s.path.name)} left out: not a simulated result ({_e(s.error)}).</p>")
    out.append(ns2_checks(sim_dir))
    return "\n".join(out)


def render(meta: dict[str, Any], results: list[ExperimentResult], sim_dir: Path | None = None) -> str:
    """The report's HTML; with ``sim_dir``, the simulated figures there too (summary and section)."""
    image = meta.get("host_image")
    head = [
        f"<h1>UDT testbed run {_e(meta['run_id'])}</h1>",
        f"<p>commit {_e(meta.get('commit'))}, backend <b>{_e(meta.get('backend'))}</b> "
        f"({_e(meta.get('backend_reason', ''))}), "
        f"scale <b>{_e(meta.get('scale'))}</b> ({_e(meta.get('scale_reason'))}), "
        f"duration {_e(meta.get('duration_s'))} s per stack, host runtime {_e(meta.get('host_runtime'))}"
        + (f" (image {_e(image['name'])} {_e(image['id'][:19])})" if image else "")
        + (", UDT windows and buffers <b>4.11's defaults</b>" if meta.get("udt_buffers") == "default" else "")
        + f", status {_e(meta.get('status'))}</p>",
        _host(meta),
        _summary(results, _stack_order(results)),
    ]
    sims = load_sims(sim_dir) if sim_dir is not None else None
    if sims is not None:
        head.append(sim_summary(sims))
    body = []
    for res in results:
        body.append(
            f"<h2>{_e(res.title)} ({_e(res.figure)})</h2><p class='note'>{_e(res.note)} "
            f"Summaries leave out the first {res.warmup_s:.1f} s.</p>"
        )
        for part in res.parts:
            body.append(f"<h3 id='{anchor(res, part)}'>{_e(part.label)}: {_e(part.topology_paper)}</h3>")
            body.append(_calibration(part))
            body.append(_cores(part))
            body.append(_offloads(part))
            body.append(_timing_flags(part))
            body.append(_capacity(part))
            body.append(_repeats_note(part))
            first = next(iter(part.stacks.values()), None)
            if first is None:
                continue
            if first.points:
                body.append(_part_short_tcp(part))
            elif part.sweep:
                body.append(_part_sweep(part, res.scale))
            else:
                body.append(_part_bulk(part, res.scale))
                body.append(_flow_details(part))
            body.append(_capture(part))
            body.append(_verdicts(part))
    if sim_dir is not None:
        body.append(sim_section(sim_dir, sims))
    title = f"udtbed {_e(meta['run_id'])}"
    return f"<!doctype html><meta charset=utf-8><title>{title}</title><style>{CSS}</style>" + "\n".join(head + body)


def write_report(outdir: Path) -> Path:
    outdir = Path(outdir)
    meta = json.loads((outdir / "run.json").read_text())
    results = [ExperimentResult.read(outdir / fname) for fname in meta.get("results", {}).values()]
    # The simulated figures of the run (the simulator writes them to <run dir>/sim), if any.
    sim_dir = outdir / "sim"
    path = outdir / "report.html"
    path.write_text(render(meta, results, sim_dir if sim_dir.is_dir() else None))
    # The run's line in the index of all runs, where the run sits in a results tree that
    # `udtbed run` keeps (it has `latest`), not in a directory a run was copied to.
    runs_index.summarise(outdir, meta, results)
    if (outdir.parent / "latest").is_symlink():
        runs_index.write_index(outdir.parent)
    return path
