#!/usr/bin/env python3
"""Long fat path, window-bound: how much of what its flow window allows each stack moves
(issue 13, "keep the window full").

Two namespaces joined by ``udt-linkem`` with ``--rtt-ms`` of round trip (half each way) and
``--rate-mbit`` on both directions, the queue one bandwidth-delay product. Both sides of every
transfer get ``--flow-window W --rcvbuf W --sndbuf 2W`` (docs/cli.md), with W chosen so that
the window, not the link, bounds the flow: a window of W packets allows
``W * payload * 8 / RTT`` b/s (UDT4.md §6.3: no more than the flow window unacknowledged),
payload = MSS - 28 (IP, UDP) - 16 (UDT header) = 1456 bytes. The default is the papers'
1 Gb/s x 110 ms path at one tenth of its rate: 100 Mb/s, 110 ms, W = 819 (8192 / 10), which
allows 86.7 Mb/s — the largest rate this 2-core machine forwards faithfully at that RTT.

Each stack sends to itself (udt-rs -> udt-rs, libudt -> libudt), ``--runs`` times, alternating.
Printed per run and as means: the receiver's goodput over the whole transfer, its steady goodput
(over the second half of the receiver's per-second lines, after slow start), each as a
fraction of what the window allows, and the ratio ours/reference. Stated, not asserted: at a
window-bound point ours should reach at least libudt's fraction.

    .venv/bin/python impl/bench/long_fat_path.py [--rate-mbit 100] [--rtt-ms 110] [--window 819]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "conformance"), str(REPO / "impl/interop")]
from cli import read_stats  # noqa: E402
from compare import transfer  # noqa: E402
from netns import linkem_namespaces, sweep_stale_namespaces  # noqa: E402
from udtconf.stacks import reference_stack, registry  # noqa: E402
from udtconf.testdata import random_file  # noqa: E402

OURS = "udt-rs"
NS_PREFIX = "udtlfp-"
ADDRS = ("10.239.0.1", "10.239.0.2")
PAYLOAD = 1500 - 28 - 16
MIB = 1 << 20


def window_allows_mbps(window: int, rtt_ms: float) -> float:
    """What a flow window of ``window`` packets moves per round trip, Mb/s."""
    return window * PAYLOAD * 8 / (rtt_ms / 1000) / 1e6


def steady_mbps(lines: list[dict[str, object]]) -> float | None:
    """Goodput over the second half of the receiver's periodic stats lines (bytes are
    cumulative, ``t`` in seconds since the connection), or None with fewer than 4 lines."""
    periodic = [x for x in lines if not x.get("summary")]
    if len(periodic) < 4:
        return None
    first, last = periodic[len(periodic) // 2], periodic[-1]
    t0, t1, b0, b1 = first["t"], last["t"], first["bytes"], last["bytes"]
    assert isinstance(t0, float | int) and isinstance(t1, float | int)
    assert isinstance(b0, int) and isinstance(b1, int)
    return (b1 - b0) * 8 / (t1 - t0) / 1e6 if t1 > t0 else None


@dataclass
class Point:
    stack: str
    mbps: float
    steady: float | None
    error: str = ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate-mbit", type=float, default=100.0, help="link rate, both ways (default 100)")
    ap.add_argument("--rtt-ms", type=float, default=110.0, help="round-trip time (default 110)")
    ap.add_argument("--window", type=int, default=819, help="flow window and rcvbuf, packets (default 819)")
    ap.add_argument("--size-mib", type=int, default=160, help="bytes per transfer, MiB (default 160)")
    ap.add_argument("--runs", type=int, default=3, help="transfers per stack (default 3)")
    stacks = registry()
    reference = reference_stack("udt", stacks)
    ap.add_argument("--stacks", default=f"{OURS},{reference}", help=f"comma-separated (default {OURS},{reference})")
    args = ap.parse_args()
    names = args.stacks.split(",")
    unknown = [n for n in names if n not in stacks or not stacks[n].bulk or stacks[n].bulk.contract != "udt-cli"]
    if unknown:
        print(f"long_fat_path: not a stack of the registry with a udt-cli bulk contract: {unknown}", file=sys.stderr)
        return 2
    allows = window_allows_mbps(args.window, args.rtt_ms)
    if allows >= args.rate_mbit:
        print(
            f"long_fat_path: a window of {args.window} packets allows {allows:.1f} Mb/s at {args.rtt_ms:g} ms, "
            f"not below the link's {args.rate_mbit:g} Mb/s: the flow would not be window-bound",
            file=sys.stderr,
        )
        return 2
    bdp_pkts = max(int(args.rate_mbit * 1e6 * args.rtt_ms / 1000 / 8 / 1500), 10)
    spec = f"delay={args.rtt_ms / 2:g}ms,rate={args.rate_mbit:g}mbit,queue={bdp_pkts}p"
    options = ("--flow-window", str(args.window), "--rcvbuf", str(args.window), "--sndbuf", str(2 * args.window))
    print(f"path: {spec} both ways; window {args.window} packets allows {allows:.1f} Mb/s")
    sweep_stale_namespaces(NS_PREFIX)
    size = args.size_mib * MIB
    timeout = 30 + 3 * size * 8 / (allows * 1e6)
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="udt-lfp-") as tmp:
        work = Path(tmp)
        src = random_file(work / "input", size)
        for i in range(args.runs):
            for name in names:
                rundir = work / f"{name}-{i}"
                rundir.mkdir()
                with linkem_namespaces(NS_PREFIX, *ADDRS, spec, spec) as net:
                    r = transfer(stacks[name], net, src, rundir, 9000, timeout, options=options)
                lines = read_stats(rundir / f"{net.name}-{name}-recv.jsonl")
                p = Point(name, r.mbps, steady_mbps(lines) if r.ok else None, "" if r.ok else r.error)
                points.append(p)
                steady = f"{p.steady:.1f}" if p.steady is not None else "-"
                print(
                    f"run {i + 1} {name:<8} {p.mbps:7.1f} Mb/s ({p.mbps / allows:5.1%} of the window), "
                    f"steady {steady} Mb/s" + (f"  FAILED: {p.error[:300]}" if p.error else "")
                )
    print(f"\n{'stack':<10}{'mean Mb/s':>11}{'of window':>11}{'steady Mb/s':>13}{'of window':>11}")
    means: dict[str, tuple[float, float]] = {}
    for name in names:
        mine = [p for p in points if p.stack == name]
        m = mean(p.mbps if not p.error else 0.0 for p in mine)
        steadies = [p.steady for p in mine if p.steady is not None]
        s = mean(steadies) if steadies else 0.0
        means[name] = (m, s)
        print(f"{name:<10}{m:>11.1f}{m / allows:>11.1%}{s:>13.1f}{s / allows:>11.1%}")
    if OURS in means and len(names) > 1:
        ref = next(n for n in names if n != OURS)
        (om, os_), (rm, rs) = means[OURS], means[ref]
        ratio = om / rm if rm else float("inf")
        steady_ratio = os_ / rs if rs else float("inf")
        print(f"ratio {OURS}/{ref}: {ratio:.2f}x whole transfer, {steady_ratio:.2f}x steady")
        print(f"verdict: ours >= {ref} at a window-bound point: {'yes' if ratio >= 1.0 else 'no'}")
    return 1 if any(p.error and p.stack == OURS for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
