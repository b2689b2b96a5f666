"""``python -m udtconf run``: the conformance suite for stacks under test, in one command.

::

    python -m udtconf run --stack PATH [--stack PATH ...] [--against NAMES|none]
                          [--cases a,b] [--probes none|A,B] [--mem-limit SIZE] [--cpu-limit S]
                          [--fail-on must|required|all] [--shard i/N] [--repeat N [--flaky pass|fail]]
                          [--out DIR] [--influx URL] [--list]

``--stack`` is a stack directory (meta.toml + entrypoint, docs/conformance/adapter-contract.md)
anywhere on disk. The command runs the ``build`` commands of the stacks this run needs (logs in
``<out>/build-<stack>.log``), then the suite for the cells that involve a stack under test
(with itself and with each ``--against`` stack of its protocol, both directions; by default
libudt and udt-rs for a UDT stack, sabul and sabul-py for a SABUL one), its active probes and its
adapter checks (:mod:`udtconf.selection`); writes junit.xml, results.json, matrix.html and runs/
to ``--out``; prints the matrix (with a hint when a failed handshake kept a pair's other cases
from running); and exits 0 when nothing gating failed, 1 when something did
(:mod:`udtconf.gate`), 2 when it could not run: a bad option, meta.toml or expectations file,
an unknown stack, a failed build. ``--probes none`` leaves the active probes out while an adapter
is being debugged; ``--mem-limit`` and ``--cpu-limit`` set the caps of every stack process
(:mod:`udtharness.processes`). SIGINT or SIGTERM stops pytest and every process the run started,
then exits 128 + the signal.

``python -m udtconf build`` runs only the builds, for the selection of the environment (the
plain matrix's ``STACKS``, default every conformance stack); ``make conformance`` uses it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from udtharness import processes
from udtharness.stacks import PARTNERS, REPO_ROOT, StackError, build

from . import CONFORMANCE_DIR, expectations, flakiness, gate
from .report import SKIPPED_AFTER_HANDSHAKE, SYMBOL, Status
from .selection import Selection, SelectionError, from_env, protocol_probes

EXIT_OK, EXIT_GATE, EXIT_USAGE = 0, 1, 2
DEFAULT_OUT = REPO_ROOT / "results" / "conformance"


class UsageError(Exception):
    """The run cannot start; the message says what to do."""


def _partners_text() -> str:
    return "; ".join(f"{protocol}: {','.join(names)}" for protocol, names in PARTNERS.items())


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m udtconf",
        description="Conformance suite for UDT4 and SABUL stacks (docs/conformance/README.md).",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="{run,build,flaky}")
    run = sub.add_parser(
        "run",
        help="run the suite for stacks under test",
        description="Build and run the conformance suite for the stacks under test; exit 0 when nothing gating "
        "failed, 1 when something did, 2 when the run could not start.",
    )
    run.add_argument(
        "--stack",
        action="append",
        required=True,
        type=Path,
        metavar="PATH",
        help="a stack directory (meta.toml + entrypoint), anywhere on disk; repeat for several",
    )
    run.add_argument(
        "--against",
        metavar="NAMES",
        help="comma-separated registry stacks to pair with, both directions (default: the partners of each "
        f"protocol under test — {_partners_text()}, those the registry holds; 'none': the stacks under test only "
        "with themselves and each other). A stack is paired only with stacks of its own protocol",
    )
    run.add_argument("--cases", metavar="A,B", help="comma-separated test cases (default: all)")
    run.add_argument(
        "--fail-on",
        choices=gate.GATES,
        default="must",
        help="what fails the run: MUST rules, interop, probes and adapter checks (must, default); "
        "the expectations' required globs (required); every failure (all)",
    )
    run.add_argument("--shard", metavar="i/N", help="run only shard i of N (split by cell and by stack)")
    run.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help=f"results directory (default {DEFAULT_OUT})"
    )
    run.add_argument("--influx", metavar="URL", help="write each case's outcome to InfluxDB 1.x at URL")
    run.add_argument(
        "--probes",
        metavar="none|A,B",
        help="the active probes to run: 'none' while debugging an adapter (the interop cells and adapter checks "
        "only), or comma-separated probe ids or globs such as 'server/*' (default: all)",
    )
    run.add_argument(
        "--mem-limit",
        metavar="SIZE",
        help=f"memory cap of each stack process (RLIMIT_DATA), e.g. 4G; 0: none (default "
        f"{processes.size_text(processes.DEFAULT_MEM_LIMIT)})",
    )
    run.add_argument(
        "--cpu-limit",
        metavar="S",
        help=f"CPU-time cap of each stack process in seconds; 0: none (default {processes.DEFAULT_CPU_LIMIT})",
    )
    run.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the selection N times and report each cell's pass rate; a cell that passes sometimes is "
        "flaky (udtconf.flakiness; default 1)",
    )
    run.add_argument(
        "--flaky",
        choices=flakiness.POLICIES,
        default="pass",
        help="with --repeat: whether a flaky gating cell fails the run (fail) or is reported only (pass, default); "
        "a cell that gated in every repeat always fails it",
    )
    run.add_argument("--list", action="store_true", help="list what this run (and shard) would run, then exit")
    b = sub.add_parser(
        "build",
        help="run the build commands of the selected stacks",
        description="Run the meta.toml 'build' command of each stack the environment selects (STACKS, "
        "UDTC_STACK/UDTC_AGAINST, UDTC_SHARD; default every conformance stack).",
    )
    b.add_argument(
        "--out", type=Path, metavar="DIR", help="where build-<stack>.log go (default $UDTC_RESULTS or results)"
    )
    f = sub.add_parser(
        "flaky",
        help="pass rates over results directories of repeated runs",
        description="Each cell's pass rate over the results.json of several runs of one selection (make "
        "conformance REPEAT=N writes them); exit 1 when a gating cell failed in every run (or, with --flaky "
        "fail, in any).",
    )
    f.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="results directories, one per run")
    f.add_argument("--flaky", choices=flakiness.POLICIES, default="pass")
    return ap


def flaky_command(args: argparse.Namespace) -> int:
    docs = []
    for d in args.dirs:
        results = d / "results.json"
        if not results.is_file():
            raise UsageError(f"{d} has no results.json: name the results directories of the runs")
        docs.append(json.loads(results.read_text()))
    rcs = [0 if (doc.get("gate") or {}).get("passed", True) else 1 for doc in docs]
    return _over_repeats(docs, rcs, args.flaky, args.dirs[0].parent)


def run_env(args: argparse.Namespace, base: Mapping[str, str]) -> dict[str, str]:
    """The environment the suite reads (udtconf.selection, conftest.py) for these options."""
    drop = ("STACKS", "CASES", "UDTC_SHARD", "INFLUX", "UDTC_NO_JUNIT", "UDTC_AGAINST", "UDTC_PROBES")
    env = {k: v for k, v in base.items() if k not in drop}
    env["UDTC_STACK"] = os.pathsep.join(str(p.expanduser().absolute()) for p in args.stack)
    if args.against:
        env["UDTC_AGAINST"] = args.against
    env["UDTC_GATE"] = args.fail_on
    env["UDTC_RESULTS"] = str(args.out.absolute())
    if args.cases:
        env["CASES"] = args.cases
    if args.shard:
        env["UDTC_SHARD"] = args.shard
    if args.probes:
        env["UDTC_PROBES"] = args.probes
    try:
        if args.mem_limit is not None:
            processes.parse_size(args.mem_limit)
            env[processes.MEM_LIMIT_VAR] = args.mem_limit
        if args.cpu_limit is not None:
            processes.parse_seconds(args.cpu_limit)
            env[processes.CPU_LIMIT_VAR] = args.cpu_limit
    except processes.LimitError as e:
        raise UsageError(f"--{'mem' if 'memory' in str(e) else 'cpu'}-limit: {e}") from e
    env[processes.RUN_ID_VAR] = uuid.uuid4().hex[:12]
    if args.influx:
        if not args.influx.startswith(("http://", "https://")):
            raise UsageError(
                f"--influx {args.influx!r}: give an http(s):// URL of InfluxDB 1.x, e.g. http://localhost:8086"
            )
        env["INFLUX"] = args.influx
    return env


def selection(env: Mapping[str, str]) -> Selection:
    try:
        sel = from_env(env)
        expectations.for_stacks(sel.stacks)  # a bad per-stack file stops the run here, not in pytest
    except (SelectionError, StackError, expectations.ExpectationsError) as e:
        raise UsageError(str(e)) from e
    return sel


def describe(sel: Selection) -> list[str]:
    shard = f" (shard {sel.shard})" if sel.shard else ""
    cells = [(s, c, k) for s, c, k in sel.cells() if s.supports(k) and c.supports(k)]
    unclaimed = len(sel.cells()) - len(cells)
    lines = [f"{len(cells)} interop cells{shard}:"]
    lines += [f"  server {s.name} × client {c.name}: {case}" for s, c, case in cells]
    if unclaimed:
        lines.append(
            f"  not run: {unclaimed} cells of a case one of their stacks does not claim in its meta.toml (shown ?)"
        )
    probes = sel.probe_stacks()
    which = "" if sel.probes is None else f" (probes: {', '.join(sel.probes) or 'none'})"
    lines.append(f"active probes and adapter checks{shard}{which}: {', '.join(s.name for s in probes) or 'none'}")
    for stack in probes:
        mine = [p for p in protocol_probes(stack.protocol) if sel.probe_selected(p.id)]
        runs = [p for p in mine if stack.supports(p.testcase)]
        lines.append(f"  {stack.name}: adapter checks (meta.toml, an unknown TESTCASE exits 127), {len(runs)} probes")
        lines += [f"    {p.id} (TESTCASE={p.testcase})" for p in runs]
        lines += [
            f"    {p.id}: skipped, {stack.name} does not claim {p.testcase}, the TESTCASE it starts the stack with"
            for p in mine
            if p not in runs
        ]
    return lines


def build_all(sel: Selection, out: Path) -> None:
    for stack in sel.needed_stacks():
        log = out / f"build-{stack.name}.log"
        t0 = time.monotonic()
        try:
            build(stack, log)
        except StackError as e:
            raise UsageError(str(e)) from e
        what = f"`{stack.build}`" if stack.build else "nothing to build"
        print(f"build {stack.name}: ok, {what} ({time.monotonic() - t0:.1f} s, log {log})", flush=True)


def pytest_argv(out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(CONFORMANCE_DIR / "tests"),
        "--rootdir",
        str(CONFORMANCE_DIR),
        "-p",
        "no:cacheprovider",
        f"--junitxml={out / 'junit.xml'}",
    ]


def matrix_lines(doc: Mapping[str, object], under_test: Sequence[str]) -> list[str]:
    """The short text matrix printed at the end of a run, from results.json."""
    raw = doc.get("entries")
    entries = [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []
    interop = [e for e in entries if str(e["key"]).startswith("interop/")]
    cells: dict[tuple[str, str], list[str]] = {}
    for e in interop:
        _, server, client, case = str(e["key"]).split("/", 3)
        mark = SYMBOL.get(str(e["status"]), "?")
        if e["status"] == Status.SKIPPED and SKIPPED_AFTER_HANDSHAKE in str(e.get("message", "")):
            mark = "–"  # not run: the pair's handshake failed (fail-fast)
        cells.setdefault((server, client), []).append(f"{mark} {case}")
    lines = []
    for (server, client), marks in cells.items():
        lines.append(f"  server {server:<12} × client {client:<12} {'  '.join(marks)}")
    if cells:
        lines.append(
            "  (✓ passed  ✕ failed  ? unclaimed in meta.toml (unsupported) or not built  "
            "– not run: the pair's handshake failed)"
        )
    for name in under_test:
        mine = [e for e in entries if str(e["key"]).startswith((f"active/{name}/", f"adapter/{name}/"))]
        counts: dict[str, int] = {}
        for e in mine:
            counts[str(e["status"])] = counts.get(str(e["status"]), 0) + 1
        if mine:
            lines.append(
                f"  {name}: probes and adapter checks: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            )
    gate_doc = doc.get("gate")
    if isinstance(gate_doc, dict):
        for verdict in ("gating", "reported", "waived"):
            items = gate_doc.get(verdict) or []
            if items:
                lines.append(f"{verdict} failures ({len(items)}):")
                lines += [f"  {o['key']}: {str(o['message'])[:200]}" for o in items[:20]]
                if len(items) > 20:
                    lines.append(f"  … and {len(items) - 20} more (results.json)")
    return lines


def handshake_hint(doc: Mapping[str, object], cases: Sequence[str]) -> str | None:
    """What to run next when a pair's failed handshake kept its other cases from running."""
    raw = doc.get("entries")
    entries = [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []
    if not any(SKIPPED_AFTER_HANDSHAKE in str(e.get("message", "")) for e in entries):
        return None
    others = ",".join(c for c in cases if c != "handshake") or "transfer"
    return (
        "hint: a pair's handshake failed, so its other cases were not run (fail-fast); to see them, run "
        f"without handshake: --cases {others}"
    )


def run(args: argparse.Namespace) -> int:
    env = run_env(args, os.environ)
    sel = selection(env)
    if args.list:
        print("\n".join(describe(sel)))
        return EXIT_OK
    out: Path = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("results.json", "matrix.html", "junit.xml"):
        (out / stale).unlink(missing_ok=True)
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: give 1 or more")
    build_all(sel, out)
    t0 = time.monotonic()
    # Each repeat writes its own results (the first to --out, the others to repeat-<k>/ in it).
    docs: list[dict[str, object]] = []
    rcs: list[int] = []
    for k in range(args.repeat):
        out_k = out if k == 0 else out / f"repeat-{k + 1}"
        out_k.mkdir(parents=True, exist_ok=True)
        if args.repeat > 1:
            print(f"udtconf run: repeat {k + 1} of {args.repeat} -> {out_k}", flush=True)
        rc, sig = processes.run_supervised(pytest_argv(out_k), env | {"UDTC_RESULTS": str(out_k)}, CONFORMANCE_DIR)
        if sig:
            took = time.monotonic() - t0
            name = signal.Signals(sig).name
            print(
                f"\nudtconf run: stopped by {name} after {took:.0f} s; every process of the run ended", file=sys.stderr
            )
            return 128 + sig
        rcs.append(rc)
        results_k = out_k / "results.json"
        docs.append(json.loads(results_k.read_text()) if results_k.is_file() else {})
    took = time.monotonic() - t0
    results = out / "results.json"
    doc = docs[0]
    partners = [s.name for s in sel.stacks if not sel.tested(s.name)]
    against = ",".join(partners) or "none"
    print(f"\nconformance: {', '.join(sel.under_test)} against {against}; gate {args.fail_on}; {took:.0f} s")
    print("\n".join(matrix_lines(doc, sel.under_test)))
    if (hint := handshake_hint(doc, sel.cases)) is not None:
        print(hint)
    print(f"results: {out / 'matrix.html'}, {out / 'junit.xml'}, {results}")
    if args.repeat > 1:
        return _over_repeats(docs, rcs, args.flaky, out)
    rc = rcs[0]
    if rc == 0:
        print("exit 0: nothing gating failed")
        return EXIT_OK
    if rc == 1:
        print(f"exit 1: gating failures under --fail-on {args.fail_on}")
        return EXIT_GATE
    if rc == 5:
        print("exit 0: no test selected (an empty shard?)")
        return EXIT_OK
    print(f"exit 2: pytest ended with status {rc} (interrupted, or a usage error above)", file=sys.stderr)
    return EXIT_USAGE


def _over_repeats(docs: list[dict[str, object]], rcs: list[int], policy: str, out: Path) -> int:
    """The exit of a repeated run: a cell that gated in every repeat fails it; a flaky one as
    ``policy`` says (udtconf.flakiness)."""
    verdict = flakiness.summarise(docs, policy, out)
    print("\n".join(flakiness.lines(verdict)))
    print(f"pass rates: {out / 'flakiness.json'}")
    if any(rc not in (0, 1, 5) for rc in rcs):
        print(f"exit 2: pytest ended with status {rcs} (interrupted, or a usage error above)", file=sys.stderr)
        return EXIT_USAGE
    gating = verdict["gating"]
    assert isinstance(gating, list)
    if gating:
        print(
            f"exit 1: {len(gating)} gating cell(s) failed" + (" or were flaky" if policy == "fail" else " every time")
        )
        return EXIT_GATE
    print("exit 0: no gating cell failed every time" + ("" if policy == "fail" else " (flaky ones reported above)"))
    return EXIT_OK


def build_command(args: argparse.Namespace) -> int:
    try:
        sel = from_env(os.environ)
    except (SelectionError, StackError) as e:
        raise UsageError(str(e)) from e
    default = Path(os.environ["UDTC_RESULTS"]) if os.environ.get("UDTC_RESULTS") else DEFAULT_OUT
    build_all(sel, (args.out or default).absolute())
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "flaky":
            return flaky_command(args)
        return run(args) if args.command == "run" else build_command(args)
    except UsageError as e:
        print(f"udtconf {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
