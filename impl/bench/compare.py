#!/usr/bin/env python3
"""Goodput and CPU cost of our `udt` against libudt 4.11, and of our `sabul` beside our `udt`,
measured back to back in one run.

For each network (loopback; two namespaces joined by a veth pair; ``paced``: two namespaces
joined by ``udt-linkem`` at 100 Mb/s, chicago-local at scale 0.1, where the link sets the
rate; ``paced20``: the same at 20 Mb/s, a three-site flow's share at scale 0.1, where a
packet leaves every 600 µs) and each stack, one bulk transfer of --size-mib MiB
(--paced-size-mib on ``paced``, a fifth of it on ``paced20``),
the stack talking to itself (udt-rs -> udt-rs, libudt -> libudt, sabul -> sabul). Stacks are
names from the stack registry (stacks/, any with a `udt-cli` or `sabul-cli` [bulk] table). Goodput comes from
the receiver's stats summary (docs/cli.md), CPU time (user + sys) from wait4() on each process.
Each network runs the stacks --repeat times in turns (udt-rs, libudt, sabul, udt-rs, ...), so
that drift on a shared host hits all alike. Prints the ratios ours/libudt (udt-rs against the
registry's reference stack) and sabul/udt-rs, each taken per repeat (the two ran one after the
other) with its 95 % interval over the repeats (Student's t, udtharness.uncertainty), then runs
`cargo bench -p transfer --bench loss_list` and prints its output.

Beside the ratios, each stack's own CPU per delivered Gb (sender and receiver), its share of a
core, and on ``paced`` its sender's pacing fidelity: data packets sent per stats interval over
the ``1e6 / period_us`` its pacer asked for (the middle half of the transfer), each a mean with
its 95 % interval over the repeats (issue 40, part 4; docs/results/2026-11-28-cpu-per-gb.md).

Targets (stated, not asserted): goodput >= 2.5x libudt's and CPU per Gb <= 0.5x
libudt's, on the loopback; CPU per Gb <= 1x libudt's on ``paced`` and ``paced20``, both sides; judged on the
intervals: met when every interval lies on the target's side, not met when one lies wholly on
the other, inconclusive otherwise; SABUL (whose 2003 code
busy-waited between packets) needs less than a full core for either side below 1 Gb/s.

    make bench                    # or: .venv/bin/python impl/bench/compare.py --help
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# This tree's registry and interop helpers, whichever udtconf the interpreter has installed.
sys.path[:0] = [str(REPO / "harness")]
from udtharness.cli import read_stats, recv_argv, sabul_recv_argv, sabul_send_argv, send_argv  # noqa: E402
from udtharness.netns import LOOPBACK, Net, linkem_namespaces, veth_namespaces  # noqa: E402
from udtharness.stacks import Stack, StackError, reference_stack, registry  # noqa: E402
from udtharness.uncertainty import Interval, Judgement, judge, mean_interval, ratio_interval  # noqa: E402

OURS = "udt-rs"
SABUL = "sabul"
CONTRACTS = ("udt-cli", "sabul-cli")
VETH_ADDRS = ("10.233.0.1", "10.233.0.2")
PACED_ADDRS = ("10.233.1.1", "10.233.1.2")
# chicago-local (topologies/chicago-local.toml) at scale 0.1: the rate a tenth, delay and queue
# as they are; and the same link at a fifth of that, a three-site flow's share at scale 0.1
# (issue 40: below ~50 Mb/s udt-rs's sender took twice 4.11's CPU). Each: the link, and the
# share of --paced-size-mib a transfer carries (about 10 s either way).
PACED_NETS = {
    "paced": ("delay=20us,rate=100mbit,queue=1000p", 1.0),
    "paced20": ("delay=20us,rate=20mbit,queue=1000p", 0.2),
}
PACED_LINK = PACED_NETS["paced"][0]
NETS = ("lo", "veth", *PACED_NETS)
# The wake-ups column: context switches per this many payloads of UDT's default size (MSS 1500).
WAKE_PER = 1000
PAYLOAD = 1456
# --profile's sampling rate: not a multiple of the pacers' periods.
PROFILE_HZ = 1999
GOODPUT_TARGET = 2.5
CPU_TARGET = 0.5
PACED_CPU_TARGET = 1.0


@dataclass
class Run:
    net: str
    stack: str
    ok: bool
    mbps: float = 0.0
    seconds: float = 0.0
    cpu_send: float = 0.0
    cpu_recv: float = 0.0
    switches_send: int = 0  # context switches, voluntary and not, of every thread
    switches_recv: int = 0
    error: str = ""
    hung: bool = False  # a side was still running at the timeout (and was killed)
    exited_ok: bool = False  # both sides exited 0 (ok also needs the receiver's stats summary)
    repeat: int = 0
    size: int = 0  # bytes transferred
    fidelity: float | None = None  # sent per interval / (1e6 / period_us), middle half

    def cpu_per_gbit(self, cpu: float, size_bytes: int) -> float:
        return cpu / (size_bytes * 8 / 1e9)


def wait_with_rusage(pid: int, deadline: float) -> tuple[int | None, float, int]:
    """(exit code or None on timeout, user+sys CPU seconds, context switches) of a child."""
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, ru.ru_nvcsw + ru.ru_nivcsw
        if time.monotonic() > deadline:
            return None, 0.0, 0
        time.sleep(0.01)


def transfer(
    stack: Stack,
    net: Net,
    input_path: Path,
    work: Path,
    port: int,
    timeout: float,
    output: Path | None = None,
    options: tuple[str, ...] = (),
    profile: Path | None = None,
) -> Run:
    """One bulk transfer ``stack`` -> ``stack``, the receiver writing ``output`` (default
    /dev/null); ok when both sides exit 0 within ``timeout`` s and the receiver wrote its stats
    summary. ``options`` go to both sides (e.g. ``--flow-window N``). The caller compares
    ``output`` with the input. With ``profile``, each side runs under ``perf record`` (call
    graphs, every thread), writing ``<profile>-send.data`` and ``<profile>-recv.data``; its CPU
    time then includes perf's own."""
    sink = str(output) if output is not None else "/dev/null"
    try:
        binary = stack.bulk_binary()
    except StackError as e:
        return Run(net.name, stack.name, False, error=str(e))
    name = stack.name
    rstats, sstats = work / f"{net.name}-{name}-recv.jsonl", work / f"{net.name}-{name}-send.jsonl"
    common = ("--stats-interval", "1000", *options)
    sabul = stack.bulk is not None and stack.bulk.contract == "sabul-cli"
    if sabul:
        # SABUL's sender listens (docs/cli.md, `sabul`): it starts first, in namespace a.
        at = f"{net.addr_a}:{port}"
        recv = net.wrap(net.ns_b, sabul_recv_argv([str(binary)], at, sink, *common, stats=rstats))
        send = net.wrap(net.ns_a, sabul_send_argv([str(binary)], at, input_path, *common, stats=sstats))
    else:
        at = f"{net.addr_b}:{port}"
        recv = net.wrap(net.ns_b, recv_argv(binary, at, sink, *common, stats=rstats))
        send = net.wrap(net.ns_a, send_argv(binary, at, input_path, *common, stats=sstats))
    if profile is not None:
        recv, send = (
            ["perf", "record", "-q", "-g", "-F", str(PROFILE_HZ), "-o", f"{profile}-{role}.data", "--", *argv]
            for role, argv in (("recv", recv), ("send", send))
        )
    errs = {r: work / f"{net.name}-{name}-{r}.stderr" for r in ("recv", "send")}
    # The listener starts first: UDT's receiver, SABUL's sender.
    order = ("send", "recv") if sabul else ("recv", "send")
    procs: dict[str, subprocess.Popen[bytes]] = {}
    rc_send = rc_recv = None
    try:
        for role in order:
            with open(errs[role], "wb") as log:
                argv = recv if role == "recv" else send
                procs[role] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
            if role == order[0]:
                time.sleep(0.2)
        deadline = time.monotonic() + timeout
        # `ip netns exec` execs the stack in place, so these pids are the stacks' own.
        rc_send, cpu_send, sw_send = wait_with_rusage(procs["send"].pid, deadline)
        if rc_send is not None:
            procs["send"].returncode = rc_send  # reaped by wait4: keep Popen from waiting again
        rc_recv, cpu_recv, sw_recv = wait_with_rusage(procs["recv"].pid, deadline)
        if rc_recv is not None:
            procs["recv"].returncode = rc_recv
    finally:
        for p in procs.values():
            if p.returncode is None:
                p.kill()
                p.wait()
    if rc_send != 0 or rc_recv != 0:
        tails = " | ".join(f"{e.name}: {e.read_text(errors='replace').strip()[-300:]}" for e in errs.values())
        hung = rc_send is None or rc_recv is None
        return Run(net.name, name, False, error=f"exit send={rc_send} recv={rc_recv}: {tails}", hung=hung)
    try:
        summary = read_stats(rstats)[-1]
    except (OSError, ValueError, IndexError):
        summary = {}
    if not summary.get("summary"):
        return Run(net.name, name, False, error=f"no stats summary in {rstats}", exited_ok=True)
    return Run(
        net.name, name, True, summary["mbps"], summary["seconds"], cpu_send, cpu_recv, sw_send, sw_recv, exited_ok=True
    )


def pacing_fidelity(send_stats: Path) -> float | None:
    """The sender's data packets per stats interval over what its pacing period allows
    (``1e6 / period_us`` per second), averaged over the middle half of its periodic lines;
    None with fewer than 4 lines."""
    try:
        lines = [x for x in read_stats(send_stats) if not x.get("summary")]
    except (OSError, ValueError):
        return None
    ratios = []
    for a, b in itertools.pairwise(lines):
        dt, period = float(b["t"]) - float(a["t"]), float(b["period_us"])
        if dt > 0 and period > 0:
            ratios.append((int(b["pkts_sent"]) - int(a["pkts_sent"])) / dt / (1e6 / period))
    middle = ratios[len(ratios) // 4 : len(ratios) - len(ratios) // 4]
    return sum(middle) / len(middle) if len(lines) >= 4 and middle else None


def interval_text(iv: Interval | None, unit: str = "x") -> str:
    """'2.31x [2.10, 2.52]' over repeats, '2.31x' from one, '-' from none."""
    if iv is None:
        return "-"
    return f"{iv.mean:.2f}{unit}" + (f" [{iv.low:.2f}, {iv.high:.2f}]" if iv.n > 1 else "")


def paired(a: list[Run], b: list[Run], of: Callable[[Run], float]) -> Interval | None:
    """``of(a) / of(b)`` taken per repeat in which both ran, with its interval over the repeats."""
    bs = {r.repeat: r for r in b if r.ok}
    pairs = [(of(r), max(of(bs[r.repeat]), 1e-9)) for r in a if r.ok and r.repeat in bs]
    return ratio_interval(pairs) if pairs else None


def targets(g: Interval, cs: Interval, cr: Interval) -> str:
    """The loopback targets judged on the intervals (udtharness.uncertainty.judge)."""
    marks = [judge(g, GOODPUT_TARGET, None), judge(cs, None, CPU_TARGET), judge(cr, None, CPU_TARGET)]
    if all(m is Judgement.MET for m in marks):
        return "targets met"
    if Judgement.MISSED in marks:
        return "targets not met"
    return "inconclusive (an interval straddles a target: more --repeat)"


def report(runs: list[Run], size: int, reference: str) -> bool:
    """Prints the table; True when every run succeeded."""
    print()
    print(
        f"{'net':<8}{'stack':<8}{'rep':>4}{'goodput Mb/s':>14}{'seconds':>9}{'cpu send s':>12}{'cpu recv s':>12}"
        f"{'send s/Gb':>11}{'recv s/Gb':>11}"
    )
    for r in runs:
        if not r.ok:
            print(f"{r.net:<8}{r.stack:<8}{r.repeat + 1:>4}  FAILED: {r.error}")
            continue
        print(
            f"{r.net:<8}{r.stack:<8}{r.repeat + 1:>4}{r.mbps:>14.1f}{r.seconds:>9.2f}{r.cpu_send:>12.2f}"
            f"{r.cpu_recv:>12.2f}{r.cpu_per_gbit(r.cpu_send, r.size or size):>11.3f}"
            f"{r.cpu_per_gbit(r.cpu_recv, r.size or size):>11.3f}"
        )
    nets = list(dict.fromkeys(r.net for r in runs))

    def of(net: str, stack: str) -> list[Run]:
        return [r for r in runs if r.net == net and r.stack == stack]

    def send(r: Run) -> float:
        return r.cpu_per_gbit(r.cpu_send, r.size or size)

    def recv(r: Run) -> float:
        return r.cpu_per_gbit(r.cpu_recv, r.size or size)

    def mbps(r: Run) -> float:
        return r.mbps

    w = 24
    print()
    print(
        f"ratios {OURS}/{reference}, per repeat pair with the 95 % interval over the repeats "
        f"(targets on lo: goodput >= {GOODPUT_TARGET}x, CPU per Gb <= {CPU_TARGET}x)"
    )
    print(f"{'net':<8}{'n':>3}  {'goodput':<{w}}{'cpu/Gb send':<{w}}{'cpu/Gb recv':<{w}}verdict")
    for net in nets:
        ours, ref = of(net, OURS), of(net, reference)
        g, cs, cr = paired(ours, ref, mbps), paired(ours, ref, send), paired(ours, ref, recv)
        if g is None or cs is None or cr is None:
            print(f"{net:<8}{'-':>3}  {'-':<{w}}{'-':<{w}}{'-':<{w}}incomplete")
            continue
        if net == "lo":
            verdict = targets(g, cs, cr)
        elif net in PACED_NETS:
            verdict = paced_target(cs, cr, reference)
        else:
            verdict = "-"
        print(f"{net:<8}{g.n:>3}  {interval_text(g):<{w}}{interval_text(cs):<{w}}{interval_text(cr):<{w}}{verdict}")
    print()
    print(
        "CPU per delivered Gb (s) and share of a core, each stack on its own, mean [95 % interval] over the "
        "repeats; fidelity: the sender's packets per interval over 1e6/period_us (paced nets only); "
        f"wake-ups: each side's context switches (every thread) per {WAKE_PER} payloads of {PAYLOAD} bytes"
    )
    print(
        f"{'net':<8}{'stack':<8}{'n':>3}  {'send s/Gb':<{w}}{'recv s/Gb':<{w}}{'send % core':<{w}}"
        f"{'recv % core':<{w}}{'fidelity':<{w}}{'wake-ups send':<{w}}wake-ups recv"
    )
    for net in nets:
        for stack in dict.fromkeys(r.stack for r in runs if r.net == net):
            ok = [r for r in of(net, stack) if r.ok]
            if not ok:
                print(f"{net:<8}{stack:<8}{0:>3}  no successful run")
                continue
            ivs = [
                mean_interval([f(r) for r in ok])
                for f in (
                    send,
                    recv,
                    lambda r: 100 * r.cpu_send / max(r.seconds, 1e-9),
                    lambda r: 100 * r.cpu_recv / max(r.seconds, 1e-9),
                    lambda r: r.switches_send / max(r.size or size, 1) * PAYLOAD * WAKE_PER,
                    lambda r: r.switches_recv / max(r.size or size, 1) * PAYLOAD * WAKE_PER,
                )
            ]
            fid = [r.fidelity for r in ok if r.fidelity is not None]
            texts = [interval_text(iv, "") for iv in ivs]
            fidelity = interval_text(mean_interval(fid), "") if fid else "-"
            print(
                f"{net:<8}{stack:<8}{len(ok):>3}  {texts[0]:<{w}}{texts[1]:<{w}}{texts[2]:<{w}}{texts[3]:<{w}}"
                f"{fidelity:<{w}}{texts[4]:<{w}}{texts[5]}"
            )
    if any(r.stack == SABUL for r in runs):
        print()
        print(f"ratios {SABUL}/{OURS} per repeat pair, and the cores SABUL keeps busy (target: under one per side)")
        print(
            f"{'net':<8}{'n':>3}  {'goodput':<{w}}{'cpu/Gb send':<{w}}{'cpu/Gb recv':<{w}}{'cores send':<{w}}cores recv"
        )
        for net in nets:
            sab, ours = of(net, SABUL), of(net, OURS)
            g, cs, cr = paired(sab, ours, mbps), paired(sab, ours, send), paired(sab, ours, recv)
            ok = [r for r in sab if r.ok]
            if g is None or cs is None or cr is None or not ok:
                print(f"{net:<8}{'-':>3}  incomplete")
                continue
            # Cores busy during the transfer: CPU seconds over the transfer's seconds.
            ks = mean_interval([r.cpu_send / max(r.seconds, 1e-9) for r in ok])
            kr = mean_interval([r.cpu_recv / max(r.seconds, 1e-9) for r in ok])
            print(
                f"{net:<8}{g.n:>3}  {interval_text(g):<{w}}{interval_text(cs):<{w}}{interval_text(cr):<{w}}"
                f"{interval_text(ks, ''):<{w}}{interval_text(kr, '')}"
            )
    return all(r.ok for r in runs)


def profile_summary(data: Path, limit: float = 2.0) -> str:
    """The top of ``perf report`` for one side's profile: share of its samples per thread and
    symbol, self time only, those at ``limit`` % or more."""
    cmd = ["perf", "report", "-i", str(data), "--stdio", "--no-children", "-g", "none", "--sort", "comm,dso,sym"]
    out = subprocess.run([*cmd, "--percent-limit", str(limit)], capture_output=True, text=True)
    if out.returncode != 0:
        return f"    perf report failed: {out.stderr.strip()[-300:]}"
    lines = [x for x in out.stdout.splitlines() if x.strip() and not x.startswith("#")]
    return "\n".join("    " + x.strip() for x in lines)


def paced_target(cs: Interval, cr: Interval, reference: str) -> str:
    """CPU per Gb no more than the reference's on a paced link, both sides (issue 40)."""
    marks = [judge(cs, None, PACED_CPU_TARGET), judge(cr, None, PACED_CPU_TARGET)]
    if all(m is Judgement.MET for m in marks):
        return f"cpu/Gb <= {reference}'s: met"
    if Judgement.MISSED in marks:
        return f"cpu/Gb <= {reference}'s: not met"
    return f"cpu/Gb <= {reference}'s: inconclusive (more --repeat)"


def cargo_bench() -> bool:
    cmd = ["cargo", "bench", "-p", "transfer", "--bench", "loss_list"]
    print(f"\n==> {' '.join(cmd)} (in impl/)", flush=True)
    return subprocess.run(cmd, cwd=REPO / "impl").returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=2048, help="bytes per transfer, MiB (default 2048)")
    ap.add_argument(
        "--nets",
        default=",".join(NETS),
        help=f"comma-separated subset of {','.join(NETS)} (default all; paced, paced20: udt-linkem at 100 and 20 Mb/s)",
    )
    ap.add_argument(
        "--paced-size-mib", type=int, default=120, help="bytes per transfer on paced, MiB (default 120, ~10 s)"
    )
    stacks = registry()
    runnable = [n for n, s in stacks.items() if s.bulk and s.bulk.contract in CONTRACTS]
    reference = reference_stack("udt", stacks)
    ap.add_argument(
        "--stacks",
        default=f"{OURS},{reference},{SABUL}",
        help=f"comma-separated stacks from the registry with a udt or sabul command line: {', '.join(runnable)}",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per transfer (default 600)")
    ap.add_argument("--repeat", type=int, default=3, help="transfers per stack and network, in turns (default 3)")
    ap.add_argument("--no-cargo-bench", action="store_true", help="skip the loss_list criterion bench")
    ap.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="run each side under `perf record -g` (every thread), keep the profiles in DIR as "
        "<net>-<stack>-<repeat>-<side>.data and print the top of each; CPU figures then include perf's",
    )
    args = ap.parse_args()
    nets = args.nets.split(",")
    names = args.stacks.split(",")
    bad = [n for n in names if n not in runnable]
    if bad:
        print(
            f"compare: not a registry stack with a udt or sabul command line: {bad}; known: {runnable}", file=sys.stderr
        )
        return 2
    if args.repeat < 1:
        print(f"compare: --repeat must be at least 1, not {args.repeat}", file=sys.stderr)
        return 2
    unknown = [n for n in nets if n not in NETS]
    if unknown:
        print(f"compare: unknown nets {unknown}: want some of {', '.join(NETS)}", file=sys.stderr)
        return 2
    if args.profile is not None:
        try:
            subprocess.run(["perf", "--version"], capture_output=True, check=True)
            args.profile.mkdir(parents=True, exist_ok=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"compare: --profile needs perf (apt install linux-perf) and a writable DIR: {e}", file=sys.stderr)
            return 2
    if any(n != "lo" for n in nets) and os.geteuid() != 0:
        print("compare: veth and the paced nets need root (network namespaces); use --nets lo", file=sys.stderr)
        return 2

    size = args.size_mib << 20
    # tmpfs, so that neither stack waits on a disk; a sparse file reads as zeros at memory speed.
    tmp_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="udt-bench-", dir=tmp_root) as d:
        work = Path(d)
        data = work / "input"
        with open(data, "wb") as f:
            f.truncate(size)
        print(
            f"compare: {args.size_mib} MiB per transfer ({args.paced_size_mib} MiB on paced: {PACED_LINK}; "
            f"a fifth of it on paced20), "
            f"stacks {', '.join(names)} in turns, {args.repeat} times each, nets {', '.join(nets)}"
        )
        paced_inputs: dict[str, tuple[Path, int]] = {}
        for name, (_, share) in PACED_NETS.items():
            paced_inputs[name] = (work / f"input-{name}", int((args.paced_size_mib << 20) * share))
            with open(paced_inputs[name][0], "wb") as f:
                f.truncate(paced_inputs[name][1])
        port = 24000 + os.getpid() % 1000
        for net_name in nets:
            with ExitStack() as scope:
                if net_name == "lo":
                    net = LOOPBACK
                elif net_name == "veth":
                    net = scope.enter_context(veth_namespaces("udtcmp-", *VETH_ADDRS))
                else:
                    link = PACED_NETS[net_name][0]
                    net = scope.enter_context(linkem_namespaces("udtcmpp-", *PACED_ADDRS, link, link))
                paced = net_name in PACED_NETS
                input_path, input_size = paced_inputs[net_name] if paced else (data, size)
                for k in range(args.repeat):
                    for name in names:
                        if paced and (b := stacks[name].bulk) is not None and b.contract != "udt-cli":
                            continue  # the paced comparison is UDT's (issue 40)
                        port += 1
                        print(f"  {net_name}: {name} -> {name} ({k + 1} of {args.repeat}) ...", end="", flush=True)
                        prof = args.profile / f"{net_name}-{name}-{k + 1}" if args.profile else None
                        r = transfer(stacks[name], net, input_path, work, port, args.timeout, profile=prof)
                        r.net, r.repeat, r.size = net_name, k, input_size
                        if paced and r.ok:
                            r.fidelity = pacing_fidelity(work / f"{net.name}-{name}-send.jsonl")
                        print(f" {r.mbps:.0f} Mb/s" if r.ok else f" FAILED ({r.error[:200]})", flush=True)
                        runs.append(r)
    ok = report(runs, size, reference)
    if args.profile is not None:
        for r in runs:
            for side in ("send", "recv"):
                data = args.profile / f"{r.net}-{r.stack}-{r.repeat + 1}-{side}.data"
                if data.exists():
                    print(f"\nprofile {data} (self time, share of the side's samples):")
                    print(profile_summary(data))
    if not args.no_cargo_bench:
        ok = cargo_bench() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
