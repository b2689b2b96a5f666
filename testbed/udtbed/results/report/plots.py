"""The report's plots (matplotlib, inline as base64 PNG): a bulk part's goodput over time against
the paper's figure, a sweep's goodput and loss against the option, the short flows' share
against the bulk flows, the data packets' spacing at the sender. A figure over a part's
repeats draws the mean with its 95 % band or error bars; one run's, its own line."""

from __future__ import annotations

import base64
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from udtharness.uncertainty import Interval  # noqa: E402

from .. import repeats  # noqa: E402
from ..results import PartResult, StackResult  # noqa: E402

# Paper figures in the plots: UDT dashed, SABUL dash-dotted, TCP dotted.
PAPER_STYLE = {"udt": "--", "sabul": "-.", "tcp": ":"}


def png(fig: Figure) -> str:
    """``fig`` as an inline ``<img>``; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def series(ax: Any, results: list[StackResult], flow: str, label: str) -> None:
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


def _paper_lines(ax: Any, part: PartResult, scale: float, flows: list[str] | None) -> None:
    for proto, per in part.paper.items():
        for flow, mbps in per.items():
            if proto not in PAPER_STYLE or (flows is not None and flow not in flows):
                continue
            label = f"paper {proto.upper()} × scale" + (f" ({flow})" if flows is None and len(per) > 1 else "")
            ax.axhline(mbps * scale, color="k", lw=0.9, ls=PAPER_STYLE[proto], alpha=0.6, label=label)


def bulk(part: PartResult, scale: float, names: list[str]) -> str:
    """A bulk part's flows (``names``) over time: one flow, every stack on one set of axes against
    the paper's figure; several, a set of axes per stack with each flow's paper figure."""
    stacks = part.stacks
    if len(names) == 1:
        # One flow: every stack on one set of axes, against the paper's figure.
        fig, ax = plt.subplots(figsize=(7.5, 3.2))
        for name in stacks:
            series(ax, repeats.runs(part, name), names[0], name)
        _paper_lines(ax, part, scale, None)
        ax.set_xlabel("s")
        ax.set_ylabel("Mb/s (receiver, 1 s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    else:
        fig, axes = plt.subplots(1, len(stacks), figsize=(4.2 * len(stacks), 3), squeeze=False, sharey=True)
        for ax, (name, s) in zip(axes[0], stacks.items(), strict=True):
            for f in s.flows:
                series(ax, repeats.runs(part, name), f.name, f.name)
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
    return png(fig)


# A stack's sweep: its name, the option's values (the paper's unit), goodput and loss at each.
SweepCurve = tuple[str, list[float], list[Interval | None], list[Interval | None]]


def sweep(
    curves: list[SweepCurve], paper: list[dict[str, float]], what: str, div: float, unit: str, scale: float
) -> str:
    """Goodput and loss against the swept option ``what`` (its values over ``div`` in ``unit``),
    each stack's with its intervals, and the paper's points (``paper``: value, mbps, loss_pct)."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    for name, xs, good, loss in curves:
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
    return png(fig)


def short_tcp(curves: list[tuple[str, list[float], list[Interval | None]]], paper: dict[int, float]) -> str:
    """The short flows' aggregate relative to no bulk flows against the bulk flows: each stack's
    (name, bulk-flow counts, share at each) and the paper's (``paper``: bulk flows -> Mb/s)."""
    fig, ax = plt.subplots(figsize=(5, 3))
    for name, ns, rel in curves:
        _errorbars(ax, ns, rel, "o-", name)
    base = paper.get(min(paper)) if paper else None
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
    return png(fig)


def packet_spacing(ipts: dict[tuple[str, str], dict[str, Any]]) -> str:
    """The CDF of the DATA packets' inter-packet times at each sender's data interface, per
    (stack, flow) (udtbed.emulation.capture.ipt_stats)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    for (n, _), st in ipts.items():
        x, y = zip(*st["cdf_us"], strict=True)
        ax.plot(x, y, label=f"{n}")
    ax.set_xlabel("inter-packet time at the sender's data interface, µs")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return png(fig)
