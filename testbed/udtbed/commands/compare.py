"""``udtbed compare`` and ``udtbed gate``: two runs (or two stacks of one) side by side, and this
checkout's udt-rs against a base commit's in turns, compared the same way (udtbed.results.compare,
udtbed.results.gate). Both exit 1 on a regression beyond the threshold that the repeats' scatter
does not explain."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .shared import Command


def cmd_compare(a: argparse.Namespace) -> int:
    """Two runs side by side, or two stacks of one run (udtbed.results.compare): exit 1 when a row
    regressed beyond the threshold, more than the repeats' scatter explains."""
    from ..results import compare

    pair = tuple(x.strip() for x in a.stacks.split(",")) if a.stacks else None
    if pair is not None and len(pair) != 2:
        print(f"udtbed compare: --stacks wants two names, A,B (got {a.stacks!r})", file=sys.stderr)
        return 2
    run_a = Path(a.run_a).resolve()
    run_b = Path(a.run_b).resolve() if a.run_b else None
    try:
        rows = compare.compare(run_a, run_b, pair, a.alpha, a.threshold)
    except compare.CompareError as e:
        print(f"udtbed compare: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("udtbed compare: no band was judged on both sides: nothing to compare", file=sys.stderr)
        return 2
    print(compare.table(rows))
    title = f"{run_a.name} against {run_b.name}" if run_b else f"{pair[0]} against {pair[1]} in {run_a.name}"  # type: ignore[index]
    out = Path(a.html) if a.html else (run_b or run_a) / f"compare-{run_a.name}.html"
    out.write_text(compare.page(rows, title))
    print(f"\n{compare.counts(rows, a.threshold, a.alpha)}\npage: {out}")
    return 1 if any(r.outcome == "regressed" for r in rows) else 0


def cmd_gate(a: argparse.Namespace) -> int:
    """This checkout's udt-rs against a base commit's, in turns on this machine (udtbed.results.gate):
    exit 1 on a regression beyond the threshold that the runs' scatter does not explain."""
    from ..results import compare, gate

    run_args = ["--experiments", a.experiments, "--duration", str(a.duration), "--scale", a.scale]
    run_args += ["--parts", a.parts] if a.parts else []
    try:
        head = Path(a.head_bin).resolve() if a.head_bin else None
        rows = gate.gate(a.base, a.repeat, run_args, a.alpha, a.threshold, head_bin=head)
    except (gate.GateError, compare.CompareError) as e:
        print(f"udtbed gate: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nudtbed gate: interrupted (each run cleaned up its namespaces and processes)", file=sys.stderr)
        return 130
    print(compare.table(rows))
    page = gate.GATE_DIR / "gate.html"
    page.write_text(compare.page(rows, f"gate: this checkout against {a.base}"))
    print(
        f"\ngate against {a.base}, {a.repeat} runs a build: {compare.counts(rows, a.threshold, a.alpha)}\npage: {page}"
    )
    return 1 if any(r.outcome == "regressed" for r in rows) else 0


def compare_arguments(cp: argparse.ArgumentParser) -> None:
    cp.add_argument("run_a", help="run A (results/testbed/<run>)")
    cp.add_argument("run_b", nargs="?", help="run B (omit to compare two stacks of A: --stacks)")
    cp.add_argument("--stacks", help="A's stack and B's, e.g. libudt,udt-rs (default: each stack both runs have)")
    cp.add_argument("--alpha", type=float, default=0.05, help="significance over all rows, Holm (default 0.05)")
    cp.add_argument("--threshold", type=float, default=0.05, help="smallest change that counts (default 0.05: 5 %%)")
    cp.add_argument("--html", help="write the page here (default: compare-<A>.html in B, or in A)")


def gate_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument("--base", required=True, help="the git ref to compare against (built in build/gate/<sha>)")
    g.add_argument("--repeat", type=int, default=3, help="runs a build, in turns (default 3)")
    g.add_argument("--experiments", default="efficiency", help="the experiments run (default efficiency)")
    g.add_argument("--parts", help="only these parts (default: every part of the experiments)")
    g.add_argument("--duration", type=float, default=20.0, help="seconds per run of a part (default 20)")
    g.add_argument("--scale", default="0.1", help="the runs' scale (default 0.1)")
    g.add_argument("--head-bin", help="the head's udt binary (default impl/target/release/udt)")
    g.add_argument("--alpha", type=float, default=0.05)
    g.add_argument("--threshold", type=float, default=0.05)


COMPARE = Command(
    "compare",
    "two runs side by side (or two stacks of one): change, interval, significance",
    compare_arguments,
    cmd_compare,
)
GATE = Command(
    "gate", "this checkout's udt-rs against a base commit's, in turns, compared (root)", gate_arguments, cmd_gate
)
