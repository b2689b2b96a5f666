"""The sections of each part of a run, below the summary: calibration, the core plan, offloads,
the host-timing flags, the senders' capacity estimates, how the repeats ran; then by the part's
kind its plot (udtbed.results.report.plots) and the table of flows and metrics beside the paper's
figures (bulk, sweep or short flows), the capture and the verdicts. A figure over repeats reads
'mean [low, high]', its 95 % interval."""

from __future__ import annotations

from collections.abc import Callable

from udtharness.uncertainty import Interval

from ...emulation.hostwatch import HostReport
from .. import repeats
from ..results import ExperimentResult, FlowResult, PartResult, StackResult
from . import plots
from .markup import SWEEP_UNITS, anchor, esc, flow_stack, fmt


def _ci(iv: Interval | None, nd: int = 1) -> str:
    """A figure over repeats: 'mean [low, high]' (the 95 % interval; n > 1), one run's value alone."""
    if iv is None:
        return "–"
    if iv.n < 2:
        return f"{iv.mean:.{nd}f}"
    return f"{iv.mean:.{nd}f} <span class=small>[{iv.low:.{nd}f}, {iv.high:.{nd}f}]</span>"


def _over(part: PartResult, stack: str, get: Callable[[StackResult], float | None]) -> Interval | None:
    """``stack``'s figure ``get`` over the part's repeats."""
    return repeats.across(repeats.runs(part, stack), get)


def _of_flow(flow: str, attr: str) -> Callable[[StackResult], float | None]:
    """A repeat's figure ``attr`` of its flow ``flow`` (None where it has none)."""
    get = repeats.flow_of(flow)

    def figure(r: StackResult) -> float | None:
        f = get(r)
        return None if f is None else getattr(f, attr)

    return figure


def _metric(key: str) -> Callable[[StackResult], float | None]:
    """A repeat's metric ``key`` (None where it has none)."""
    return lambda r: r.metrics.get(key)


def _times(mbps: float | None, scale: float) -> float | None:
    """A paper's figure at the run's scale."""
    return None if mbps is None else mbps * scale


def _repeats_note(part: PartResult) -> str:
    """How the part's repeats ran: their number, order and each one's seeded start jitter."""
    reps = part.repeats()
    if len(reps) < 2:
        return ""
    each = "; ".join(
        f"{k + 1}: " + ", ".join(f"{esc(n)} +{r.start_jitter_s:.3g} s" for n, r in rep.items())
        for k, rep in enumerate(reps)
    )
    return (
        f"<p class=note>{len(reps)} repeats, the stacks in turns; tables give the mean and its 95 % interval "
        f"[low, high] (Student's t), plots the mean with its 95 % band or error bars. Start jitter per repeat "
        f"({each}), each drawn from the seed <code>run/experiment/part/stack/repeat</code>; the links' loss "
        f"streams run on from their topology seeds.</p>"
    )


def _part_bulk(part: PartResult, scale: float) -> str:
    """A bulk part: its plot, each flow's goodput and the part's metrics beside the paper's figures
    (x scale), and each flow's time to 90 % of the bottleneck."""
    stacks = part.stacks
    names = [f.name for f in next(iter(stacks.values())).flows]
    out = [plots.bulk(part, scale, names)]
    # A column of the paper's figures per protocol it gives (UDT and TCP at least, as before).
    protos = list(dict.fromkeys(["udt", *part.paper, "tcp"]))
    head = "<tr><th>flow</th>" + "".join(f"<th>paper {p.upper()} ×scale</th>" for p in protos)
    rows = [head + "".join(f"<th>{esc(n)}</th>" for n in stacks) + "</tr>"]
    for fl in names:
        papers = "".join(f"<td>{fmt(_times(part.paper.get(p, {}).get(fl), scale))}</td>" for p in protos)
        cells = "".join(f"<td>{_ci(_over(part, n, _of_flow(fl, 'mean_mbps')))}</td>" for n in stacks)
        rows.append(f"<tr><td>{esc(fl + flow_stack(part, fl))}</td>{papers}{cells}</tr>")
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
            rows.append(f"<tr><td>{label}</td><td>{fmt(_times(pj, scale))}</td>{blanks}{cells}</tr>")
    out.append("<table>" + "".join(rows) + "</table>")
    ttt = []
    for n, s in stacks.items():
        for f in s.flows:
            iv = _over(part, n, _of_flow(f.name, "time_to_90pct_s"))
            total = len(repeats.runs(part, n))
            never = total - (iv.n if iv else 0)
            ttt.append(
                f"{esc(n)}/{esc(f.name)} {_ci(iv)} s"
                + (f" (not reached in {never} of {total})" if never and total > 1 else "")
            )
    out.append('<p class="note">time to 90 % of the bottleneck (paper: 7.5 s): ' + ", ".join(ttt) + "</p>")
    return "\n".join(out)


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
    curves: list[plots.SweepCurve] = []
    rows = [
        f"<tr><th>stack</th><th>{esc(what)} ({unit}, paper scale)</th><th>at this scale</th><th>goodput Mb/s</th>"
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
                f"<tr><td>{esc(name)}</td><td>{p.value / div:g}</td><td>{here:.3g}</td><td>{_ci(good[-1])}</td>"
                f"<td>{fmt(_times(pp.get('mbps'), scale))}</td><td>{_ci(loss[-1], 3)}</td>"
                f"<td>{fmt(pp.get('loss_pct'), 2)}</td><td>{f.losses_recv if f.losses_recv is not None else '–'}</td>"
                f"<td>{f.rcvbuf_drops if f.rcvbuf_drops is not None else '–'}</td>"
                f"<td>{fmt(f.cpu_send_pct, 0)}</td><td>{fmt(f.cpu_recv_pct, 0)}</td></tr>"
            )
        curves.append((name, xs, good, loss))
    return plots.sweep(curves, paper, what, div, unit, scale) + "<table>" + "".join(rows) + "</table>"


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
                f"<tr><td>{esc(name)} / {esc(f.name)}</td><td>{fmt(f.rate_mbps)}</td>"
                f"<td>{_ci(_over(part, name, _of_flow(f.name, 'mean_mbps')))}</td>"
                f"<td>{_ci(_over(part, name, _of_flow(f.name, 'loss_pct')), 3)}</td>"
                f"<td>{'–' if f.rcvbuf_drops is None else f.rcvbuf_drops}</td>"
                f"<td>{fmt(f.cpu_send_pct, 0)}</td><td>{fmt(f.cpu_recv_pct, 0)}</td>"
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
            f"<tr><td>{esc(k)}</td><td>{v['udp_data']}</td><td>{v['udp_other']}</td><td>{v['tcp']}</td></tr>"
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
            f"<p><b>{esc(name)}</b>: capture on every host interface</p><table><tr><th>host/interface</th>"
            f"<th>UDP DATA</th><th>UDP control</th><th>TCP</th></tr>{cells}</table>{verdict}"
        )
    ipts = {(n, fl): st for n, c in caps.items() for fl, st in c.get("ipt", {}).items() if st.get("n", 0) > 1}
    if ipts:
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
                    f"<tr><td>{esc(n)} / {esc(fl)}{what}</td><td>{x['n']}</td><td>{x['mean_us']:.1f}</td>"
                    f"<td>{x['std_us']:.2f}</td><td>{x['var_ms2']:.2e}</td><td>{x['var_s2']:.2e}</td>"
                    f"<td>{x.get('sigma_iqr_us', float('nan')):.2f}</td><td>{q['p1']:.1f}</td>"
                    f"<td>{q['p50']:.1f}</td><td>{q['p99']:.1f}</td><td>{x['max_us']:.0f}</td></tr>"
                )
        out.append(plots.packet_spacing(ipts) + "<table>" + "".join(rows) + "</table>")
        out.append(
            "<p class=note>Paper Fig. 5: at 50 Mb/s the variance of the inter-packet times is 0.00005 "
            "(no unit; as ms² a standard deviation of 7.1 µs, as s² 7.1 ms).</p>"
        )
    return "\n".join(out)


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
    counts = [p.bulk_flows for p in next(iter(part.stacks.values())).points]
    paper = {int(k): v for k, v in part.paper.get("short_tcp", {}).items()}
    base = paper.get(min(paper)) if paper else None
    head = "<tr><th>stack: short TCP Mb/s (share of no-bulk) at bulk flows</th>"
    rows = [head + "".join(f"<th>{n}</th>" for n in counts) + "</tr>"]
    if paper and base:
        cells = "".join(f"<td>{f'{paper[n]:g} ({paper[n] / base:.2f})' if n in paper else ''}</td>" for n in counts)
        rows.append(f"<tr><td>paper (1 Gb/s)</td>{cells}</tr>")
    curves: list[tuple[str, list[float], list[Interval | None]]] = []
    for name, s in part.stacks.items():
        ns = [p.bulk_flows for p in s.points]
        runs = repeats.runs(part, name)
        ys = [repeats.across(runs, _short_at(k, relative=False)) for k in range(len(ns))]
        rel = [repeats.across(runs, _short_at(k, relative=True)) for k in range(len(ns))]
        curves.append((name, [float(n) for n in ns], rel))
        cells = "".join(f"<td>{_ci(y)} ({_ci(r, 2)})</td>" for y, r in zip(ys, rel, strict=True))
        cc = f", TCP {s.short_tcp_cc}" if s.short_tcp_cc else ""
        rows.append(f"<tr><td>{esc(name)} ({s.short_tcp_workers} at a time{esc(cc)})</td>{cells}</tr>")
    return plots.short_tcp(curves, paper) + "<table>" + "".join(rows) + "</table>"


def _timing_flags(part: PartResult) -> str:
    """The stacks whose emulation or own timing was off (``host.flags``, udtbed.emulation.hostwatch), in
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
        "was flagged on inconclusive):<br>" + "<br>".join(esc(r) for r in rows) + "</p>"
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
        "bottleneck: " + "; ".join(esc(r) for r in rows) + "</p>"
    )


def _verdicts(part: PartResult) -> str:
    """Every band's verdict on each stack, a line each."""
    lines = [f"<li>{esc(s)}: {esc(v.line())}</li>" for s, r in part.stacks.items() for v in r.verdicts]
    return f"<ul class='small'>{''.join(lines)}</ul>" if lines else ""


def _calibration(part: PartResult) -> str:
    """Each path's calibration: RTT and rate wanted and measured, ok or OFF."""
    rows = "".join(
        f"<tr><td>{esc(c['src'])}→{esc(c['dst'])}</td>"
        f"<td>{fmt(c['expected_rtt_ms'], 3)}</td><td>{fmt(c['rtt_ms'], 3)}</td>"
        f"<td>{fmt(c['expected_rate_mbps'])}</td><td>{fmt(c['rate_mbps'])}</td>"
        f"<td class={'ok' if c['ok'] else 'bad'}>{'ok' if c['ok'] else 'OFF'}</td></tr>"
        for c in part.calibration
    )
    head = "<tr><th>path</th><th>RTT want ms</th><th>RTT ms</th><th>rate want Mb/s</th><th>rate Mb/s</th><th></th></tr>"
    return f"<table>{head}{rows}</table>"


def _cores(part: PartResult) -> str:
    """The part's core plan (udtbed.emulation.cores): what it needed, what the run had, who ran where."""
    c = part.cores
    if not c:
        return ""
    pinned = c.get("pinned")
    where = "; pinned: " + ", ".join(f"{k} on CPU {v}" for k, v in pinned.items()) if pinned else "; not pinned"
    line = f"cores: {c['need']} needed ({c['seats']}), the run had {c['have']}{where}"
    if not c.get("ok", True):
        return f"<p class='bad'>{esc(line)}: too few for this scale, flagged (CORES=flag)</p>"
    return f"<p class='small'>{esc(line)}</p>"


def _offloads(part: PartResult) -> str:
    """Whether every interface the part built had its offloads off (frames, not super-packets)."""
    o = part.offloads
    if not o:
        return ""
    n = max((sum(c.values()) for c in o.values()), default=0)
    left = {f: c for f, c in o.items() if set(c) != {"off"}}
    if not left:
        return f"<p class='small'>offloads: {esc(', '.join(o))} off on all {n} interfaces the part built</p>"
    words = "; ".join(f"{f}: " + ", ".join(f"{k} on {v}" for k, v in sorted(c.items())) for f, c in left.items())
    return f"<p class='bad'>offloads not off on every interface ({esc(words)}): frames may cross as super-packets</p>"


def experiment(exp: ExperimentResult) -> list[str]:
    """``exp``'s heading, then each part's sections in the page's order: calibration, cores,
    offloads, timing flags, capacity estimates, repeats; the part kind's plot and tables, the
    capture and the verdicts (the page joins the pieces with newlines)."""
    body = [
        f"<h2>{esc(exp.title)} ({esc(exp.figure)})</h2><p class='note'>{esc(exp.note)} "
        f"Summaries leave out the first {exp.warmup_s:.1f} s.</p>"
    ]
    for part in exp.parts:
        body.append(f"<h3 id='{anchor(exp, part)}'>{esc(part.label)}: {esc(part.topology_paper)}</h3>")
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
            body.append(_part_sweep(part, exp.scale))
        else:
            body.append(_part_bulk(part, exp.scale))
            body.append(_flow_details(part))
        body.append(_capture(part))
        body.append(_verdicts(part))
    return body
