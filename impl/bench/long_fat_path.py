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
Printed per run and as means with their 95 % intervals over the runs (Student's t,
udtharness.uncertainty): the receiver's goodput over the whole transfer, its steady goodput (over
the second half of the receiver's per-second lines, after slow start), each as a fraction of
what the window allows, and the ratio ours/reference taken per run pair (the two ran one after
the other) with its interval. Stated, not asserted: at a window-bound point ours should reach at
least libudt's fraction; the verdict is yes or no when the ratio's interval lies wholly on one
side of 1, inconclusive (with about how many runs would decide it) when it straddles 1.

    .venv/bin/python impl/bench/long_fat_path.py [--rate-mbit 100] [--rtt-ms 110] [--window 819]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "harness")]
from compare import transfer  # noqa: E402
from udtharness import netns  # noqa: E402
from udtharness.cli import read_stats  # noqa: E402
from udtharness.netns import linkem_namespaces  # noqa: E402
from udtharness.stacks import reference_stack, registry  # noqa: E402
from udtharness.testdata import random_file  # noqa: E402
from udtharness.uncertainty import Interval, Judgement, judge, mean_interval, ratio_interval, repeats_to_decide  # noqa: E402

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


def text(iv: Interval | None) -> str:
    """'86.1 [85, 87.2] n = 3' over several runs (Interval.text), '86.1 (n = 1)' from one, '-' from none."""
    return "-" if iv is None else iv.text()


def verdict(iv: Interval | None) -> str:
    """Ours at least the reference: judged on the ratio's interval against 1."""
    if iv is None:
        return "no figure (a run failed)"
    j = judge(iv, 1.0, None)
    if j is Judgement.INCONCLUSIVE:
        more = repeats_to_decide(iv, 1.0, None)
        return "inconclusive (the interval straddles 1" + (f"; about {more} runs would decide it)" if more else ")")
    return "yes" if j is Judgement.MET else "no"


@dataclass
class Point:
    stack: str
    mbps: float
    steady: float | None
    error: str = ""
    run: int = 0


def per_run(points: list[Point], ours: str, ref: str, of: Callable[[Point], float | None]) -> Interval | None:
    """``of(ours) / of(ref)`` taken per run in which both measured it, with its interval."""
    refs = {p.run: of(p) for p in points if p.stack == ref}
    pairs = [(a, b) for p in points if p.stack == ours and (a := of(p)) is not None and (b := refs.get(p.run))]
    return ratio_interval(pairs) if pairs else None


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
    unknown = [n for n in names if n not in stacks or (b := stacks[n].bulk) is None or b.contract != "udt-cli"]
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
    netns.cleanup(NS_PREFIX, live=False)
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
                p = Point(name, r.mbps, steady_mbps(lines) if r.ok else None, "" if r.ok else r.error, i)
                points.append(p)
                steady = f"{p.steady:.1f}" if p.steady is not None else "-"
                print(
                    f"run {i + 1} {name:<8} {p.mbps:7.1f} Mb/s ({p.mbps / allows:5.1%} of the window), "
                    f"steady {steady} Mb/s" + (f"  FAILED: {p.error[:300]}" if p.error else "")
                )
    print(f"\n{'stack':<10}{'n':>3}  {'mean Mb/s':<22}{'of window':>10}  {'steady Mb/s':<22}{'of window':>10}")
    for name in names:
        mine = [p for p in points if p.stack == name]
        whole = mean_interval([p.mbps if not p.error else 0.0 for p in mine])
        steadies = [p.steady for p in mine if p.steady is not None]
        s = mean_interval(steadies) if steadies else None
        print(
            f"{name:<10}{whole.n:>3}  {text(whole):<22}{whole.mean / allows:>10.1%}  {text(s):<22}"
            f"{(s.mean / allows if s else 0.0):>10.1%}"
        )
    if OURS in names and len(names) > 1:
        ref = next(n for n in names if n != OURS)
        ratio = per_run(points, OURS, ref, lambda p: p.mbps if not p.error else 0.0)
        steady_ratio = per_run(points, OURS, ref, lambda p: p.steady)
        print(f"ratio {OURS}/{ref} per run pair: {text(ratio)} whole transfer, {text(steady_ratio)} steady")
        print(f"verdict: ours >= {ref} at a window-bound point: {verdict(ratio)}")
    return 1 if any(p.error and p.stack == OURS for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
