"""Self-contained HTML report of a run directory: plots inline as base64 PNG (matplotlib)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.bad{color:#b00}.ok{color:#070}
.note{color:#555}img{max-width:100%}"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _fmt(x, nd=1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _part_bulk(part: dict, scale: float) -> str:
    stacks = part["stacks"]
    flows = [f["name"] for f in next(iter(stacks.values()))["flows"]] if stacks else []
    out = []
    fig, axes = plt.subplots(1, len(stacks), figsize=(4.2 * len(stacks), 3), squeeze=False, sharey=True)
    for ax, (name, s) in zip(axes[0], stacks.items()):
        for f in s["flows"]:
            if f["series_1s"]:
                t, x = zip(*f["series_1s"])
                ax.plot(t, x, label=f["name"])
        ax.set_title(name)
        ax.set_xlabel("s")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Mb/s (receiver, 1 s)")
    axes[0][0].legend(fontsize=8)
    out.append(_png(fig))
    paper = part.get("paper", {})
    rows = [
        "<tr><th>flow</th>"
        + "".join(f"<th>paper UDT ×{scale}</th><th>paper TCP ×{scale}</th>" if i == 0 else "" for i in range(1))
        + "".join(f"<th>{html.escape(n)}</th>" for n in stacks)
        + "</tr>"
    ]
    for fl in flows:
        pu, pt = paper.get("udt", {}).get(fl), paper.get("tcp", {}).get(fl)
        rows.append(
            f"<tr><td>{fl}</td><td>{_fmt(pu and pu * scale)}</td><td>{_fmt(pt and pt * scale)}</td>"
            + "".join(
                f"<td>{_fmt(next(f['mean_mbps'] for f in s['flows'] if f['name'] == fl))}</td>" for s in stacks.values()
            )
            + "</tr>"
        )
    for key, label in (
        ("aggregate_mbps", "aggregate Mb/s"),
        ("jain_index", "Jain's index"),
        ("stability_index", "stability index"),
        ("join_mbps", "join throughput (2×min)"),
    ):
        vals = [s["metrics"].get(key) for s in stacks.values()]
        if any(v is not None for v in vals):
            pj = paper.get("udt", {}).get("join") if key == "join_mbps" else None
            rows.append(
                f"<tr><td>{label}</td><td>{_fmt(pj and pj * scale)}</td><td></td>"
                + "".join(f"<td>{_fmt(v, 3 if 'index' in key else 1)}</td>" for v in vals)
                + "</tr>"
            )
    out.append("<table>" + "".join(rows) + "</table>")
    ttt = [(n, f["name"], f.get("time_to_90pct_s")) for n, s in stacks.items() for f in s["flows"]]
    out.append(
        '<p class="note">time to 90 % of the bottleneck (paper: 7.5 s): '
        + ", ".join(f"{n}/{fl} {_fmt(t)} s" for n, fl, t in ttt)
        + "</p>"
    )
    return "\n".join(out)


def _part_friendly(part: dict) -> str:
    """Short-flow aggregate per bulk-flow count, absolute and relative to no bulk flows: the
    relative figure is the one comparable across scales (paper: 69 -> 48 Mb/s, i.e. 0.70)."""
    fig, ax = plt.subplots(figsize=(5, 3))
    counts = [p["bulk_flows"] for p in next(iter(part["stacks"].values()))["points"]]
    rows = [
        "<tr><th>stack: short TCP Mb/s (share of no-bulk) at bulk flows</th>"
        + "".join(f"<th>{n}</th>" for n in counts)
        + "</tr>"
    ]
    rows.append(
        "<tr><td>paper (1 Gb/s, 5 at a time)</td>"
        + "".join(f"<td>{ {0: '69 (1.00)', 10: '48 (0.70)'}.get(n, '') }</td>" for n in counts)
        + "</tr>"
    )
    for name, s in part["stacks"].items():
        ns = [p["bulk_flows"] for p in s["points"]]
        ys = [p["short_aggregate_mbps"] for p in s["points"]]
        rel = [y / ys[0] if ys and ys[0] else None for y in ys]
        ax.plot(ns, rel, "o-", label=name)
        rows.append(
            f"<tr><td>{name} ({s.get('short_tcp_workers', 5)} at a time)</td>"
            + "".join(f"<td>{y:.1f} ({_fmt(r, 2)})</td>" for y, r in zip(ys, rel))
            + "</tr>"
        )
    ax.plot([0, 10], [1.0, 48 / 69], "k--", label="paper 69 -> 48 Mb/s")
    ax.set_xlabel("bulk flows")
    ax.set_ylabel("short TCP aggregate / no-bulk")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig) + "<table>" + "".join(rows) + "</table>"


def _timing_flags(part: dict) -> str:
    """The parts whose emulation or stacks' timing was off (``host.flags``, udtbed.hostwatch)."""
    rows = []
    for name, s in part["stacks"].items():
        hosts = [(p["bulk_flows"], p.get("host")) for p in s["points"]] if "points" in s else [(None, s.get("host"))]
        for n, h in hosts:
            if h and h.get("flags"):
                rows.append(f"{name}{f' ({n} bulk)' if n is not None else ''}: " + "; ".join(h["flags"]))
    if not rows:
        return ""
    return (
        "<p class='bad'>Timing off, so these results are not the protocols' alone "
        "(docs/testbed.md, CPU and emulation timing):<br>" + "<br>".join(html.escape(r) for r in rows) + "</p>"
    )


def write_report(outdir: Path) -> Path:
    outdir = Path(outdir)
    meta = json.loads((outdir / "run.json").read_text())
    parts = [
        f"<h1>UDT testbed run {html.escape(meta['run_id'])}</h1>",
        f"<p>commit {meta.get('commit')}, backend <b>{meta.get('backend')}</b> ({html.escape(meta.get('backend_reason', ''))}), "
        f"scale <b>{meta.get('scale')}</b> ({html.escape(str(meta.get('scale_reason')))}), "
        f"duration {meta.get('duration_s')} s per stack, host runtime {meta.get('host_runtime')}"
        + (
            f" (image {html.escape(meta['host_image']['name'])} {html.escape(meta['host_image']['id'][:19])})"
            if meta.get("host_image")
            else ""
        )
        + f", status {meta.get('status')}</p>",
    ]
    for name, fname in meta.get("results", {}).items():
        res = json.loads((outdir / fname).read_text())
        scale = res["scale"]
        parts.append(
            f"<h2>{html.escape(res['title'])} ({html.escape(res['figure'])})</h2><p class='note'>{html.escape(res['note'])} "
            f"Summaries leave out the first {res['warmup_s']:.1f} s.</p>"
        )
        for part in res["parts"]:
            cal = "".join(
                f"<tr><td>{c['src']}→{c['dst']}</td><td>{_fmt(c['expected_rtt_ms'], 3)}</td><td>{_fmt(c['rtt_ms'], 3)}</td>"
                f"<td>{_fmt(c['expected_rate_mbps'])}</td><td>{_fmt(c['rate_mbps'])}</td>"
                f"<td class={'ok' if c['ok'] else 'bad'}>{'ok' if c['ok'] else 'OFF'}</td></tr>"
                for c in part["calibration"]
            )
            parts.append(
                f"<h3>{html.escape(part['label'])}: {html.escape(part['topology_paper'])}</h3>"
                "<table><tr><th>path</th><th>RTT want ms</th><th>RTT ms</th><th>rate want Mb/s</th><th>rate Mb/s</th><th></th></tr>"
                + cal
                + "</table>"
            )
            first = next(iter(part["stacks"].values()), None)
            if first is None:
                continue
            parts.append(_part_friendly(part) if "points" in first else _part_bulk(part, scale))
            parts.append(_timing_flags(part))
    path = outdir / "report.html"
    path.write_text(
        f"<!doctype html><meta charset=utf-8><title>udtbed {meta['run_id']}</title><style>{CSS}</style>"
        + "\n".join(parts)
    )
    return path
