#!/usr/bin/env python3
"""Goodput and CPU cost of our `udt` against libudt 4.11, and of our `sabul` beside our `udt`,
measured back to back in one run.

For each network (loopback; two namespaces joined by a veth pair) and each stack,
one bulk transfer of --size-mib MiB, the stack talking to itself (udt-rs -> udt-rs,
libudt -> libudt, sabul -> sabul). Stacks are names from the stack registry
(conformance/stacks/, any with a `udt-cli` or `sabul-cli` [bulk] table). Goodput comes from
the receiver's stats summary (docs/cli.md), CPU time (user + sys) from wait4() on each process.
Prints the ratios ours/libudt (udt-rs against the registry's reference stack) and sabul/udt-rs,
then runs `cargo bench -p transfer --bench loss_list` and prints its output.

Targets (stated, not asserted): goodput >= 2.5x libudt's and CPU per Gb <= 0.5x
libudt's, on the loopback; SABUL (whose 2003 code busy-waited between packets) needs less than
a full core for either side below 1 Gb/s.

    make bench                    # or: .venv/bin/python impl/bench/compare.py --help
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# This tree's registry and interop helpers, whichever udtconf the interpreter has installed.
sys.path[:0] = [str(REPO / "conformance"), str(REPO / "impl/interop")]
from cli import read_stats, recv_argv, sabul_recv_argv, sabul_send_argv, send_argv  # noqa: E402
from netns import LOOPBACK, Net, veth_namespaces  # noqa: E402
from udtconf.stacks import Stack, StackError, reference_stack, registry  # noqa: E402

OURS = "udt-rs"
SABUL = "sabul"
CONTRACTS = ("udt-cli", "sabul-cli")
VETH_ADDRS = ("10.233.0.1", "10.233.0.2")
GOODPUT_TARGET = 2.5
CPU_TARGET = 0.5


@dataclass
class Run:
    net: str
    stack: str
    ok: bool
    mbps: float = 0.0
    seconds: float = 0.0
    cpu_send: float = 0.0
    cpu_recv: float = 0.0
    error: str = ""
    hung: bool = False  # a side was still running at the timeout (and was killed)
    exited_ok: bool = False  # both sides exited 0 (ok also needs the receiver's stats summary)

    def cpu_per_gbit(self, cpu: float, size_bytes: int) -> float:
        return cpu / (size_bytes * 8 / 1e9)


def wait_with_rusage(pid: int, deadline: float) -> tuple[int | None, float]:
    """(exit code or None on timeout, user+sys CPU seconds) of a child."""
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            return None, 0.0
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
) -> Run:
    """One bulk transfer ``stack`` -> ``stack``, the receiver writing ``output`` (default
    /dev/null); ok when both sides exit 0 within ``timeout`` s and the receiver wrote its stats
    summary. ``options`` go to both sides (e.g. ``--flow-window N``). The caller compares
    ``output`` with the input."""
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
        rc_send, cpu_send = wait_with_rusage(procs["send"].pid, deadline)
        if rc_send is not None:
            procs["send"].returncode = rc_send  # reaped by wait4: keep Popen from waiting again
        rc_recv, cpu_recv = wait_with_rusage(procs["recv"].pid, deadline)
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
    return Run(net.name, name, True, summary["mbps"], summary["seconds"], cpu_send, cpu_recv, exited_ok=True)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def report(runs: list[Run], size: int, reference: str) -> bool:
    """Prints the table; True when every run succeeded."""
    print()
    print(
        f"{'net':<6}{'stack':<8}{'goodput Mb/s':>14}{'seconds':>9}{'cpu send s':>12}{'cpu recv s':>12}"
        f"{'send s/Gb':>11}{'recv s/Gb':>11}"
    )
    for r in runs:
        if not r.ok:
            print(f"{r.net:<6}{r.stack:<8}  FAILED: {r.error}")
            continue
        print(
            f"{r.net:<6}{r.stack:<8}{r.mbps:>14.1f}{r.seconds:>9.2f}{r.cpu_send:>12.2f}{r.cpu_recv:>12.2f}"
            f"{r.cpu_per_gbit(r.cpu_send, size):>11.3f}{r.cpu_per_gbit(r.cpu_recv, size):>11.3f}"
        )
    print()
    print(f"ratios {OURS}/{reference} (targets on lo: goodput >= {GOODPUT_TARGET}x, CPU per Gb <= {CPU_TARGET}x)")
    print(f"{'net':<6}{'goodput':>10}{'cpu/Gb send':>13}{'cpu/Gb recv':>13}   verdict")
    by = {(r.net, r.stack): r for r in runs}
    for net in dict.fromkeys(r.net for r in runs):
        ours, ref = by.get((net, OURS)), by.get((net, reference))
        if not (ours and ref and ours.ok and ref.ok):
            print(f"{net:<6}{'-':>10}{'-':>13}{'-':>13}   incomplete")
            continue
        g = ours.mbps / ref.mbps
        cs = ours.cpu_per_gbit(ours.cpu_send, size) / max(ref.cpu_per_gbit(ref.cpu_send, size), 1e-9)
        cr = ours.cpu_per_gbit(ours.cpu_recv, size) / max(ref.cpu_per_gbit(ref.cpu_recv, size), 1e-9)
        verdict = "-"
        if net == "lo":
            met = g >= GOODPUT_TARGET and cs <= CPU_TARGET and cr <= CPU_TARGET
            verdict = "targets met" if met else "targets not met"
        print(f"{net:<6}{g:>9.2f}x{cs:>12.2f}x{cr:>12.2f}x   {verdict}")
    sabul_rows = [(net, by.get((net, SABUL)), by.get((net, OURS))) for net in dict.fromkeys(r.net for r in runs)]
    if any(s is not None for _, s, _ in sabul_rows):
        print()
        print(f"ratios {SABUL}/{OURS}, and the CPU SABUL needs (target: under one core per side below 1 Gb/s)")
        print(f"{'net':<6}{'goodput':>10}{'cpu/Gb send':>13}{'cpu/Gb recv':>13}{'cores send':>12}{'cores recv':>12}")
        for net, sab, ours in sabul_rows:
            if not (sab and ours and sab.ok and ours.ok):
                print(f"{net:<6}{'-':>10}{'-':>13}{'-':>13}{'-':>12}{'-':>12}   incomplete")
                continue
            g = sab.mbps / ours.mbps
            cs = sab.cpu_per_gbit(sab.cpu_send, size) / max(ours.cpu_per_gbit(ours.cpu_send, size), 1e-9)
            cr = sab.cpu_per_gbit(sab.cpu_recv, size) / max(ours.cpu_per_gbit(ours.cpu_recv, size), 1e-9)
            # Cores busy during the transfer: CPU seconds over the transfer's seconds.
            ks, kr = (c / max(sab.seconds, 1e-9) for c in (sab.cpu_send, sab.cpu_recv))
            print(f"{net:<6}{g:>9.2f}x{cs:>12.2f}x{cr:>12.2f}x{ks:>12.2f}{kr:>12.2f}")
    return all(r.ok for r in runs)


def cargo_bench() -> bool:
    cmd = ["cargo", "bench", "-p", "transfer", "--bench", "loss_list"]
    print(f"\n==> {' '.join(cmd)} (in impl/)", flush=True)
    return subprocess.run(cmd, cwd=REPO / "impl").returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=2048, help="bytes per transfer, MiB (default 2048)")
    ap.add_argument("--nets", default="lo,veth", help="comma-separated subset of lo,veth (default both)")
    stacks = registry()
    runnable = [n for n, s in stacks.items() if s.bulk and s.bulk.contract in CONTRACTS]
    reference = reference_stack("udt", stacks)
    ap.add_argument(
        "--stacks",
        default=f"{OURS},{reference},{SABUL}",
        help=f"comma-separated stacks from the registry with a udt or sabul command line: {', '.join(runnable)}",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per transfer (default 600)")
    ap.add_argument("--no-cargo-bench", action="store_true", help="skip the loss_list criterion bench")
    args = ap.parse_args()
    nets = args.nets.split(",")
    names = args.stacks.split(",")
    bad = [n for n in names if n not in runnable]
    if bad:
        print(
            f"compare: not a registry stack with a udt or sabul command line: {bad}; known: {runnable}", file=sys.stderr
        )
        return 2
    if "veth" in nets and os.geteuid() != 0:
        print("compare: veth needs root (network namespaces); use --nets lo", file=sys.stderr)
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
        print(f"compare: {args.size_mib} MiB per transfer, stacks {', '.join(names)}, nets {', '.join(nets)}")
        port = 24000 + os.getpid() % 1000
        for net_name in nets:
            with ExitStack() as scope:
                net = LOOPBACK if net_name == "lo" else scope.enter_context(veth_namespaces("udtcmp-", *VETH_ADDRS))
                for name in names:
                    port += 1
                    print(f"  {net.name}: {name} -> {name} ...", end="", flush=True)
                    r = transfer(stacks[name], net, data, work, port, args.timeout)
                    print(f" {r.mbps:.0f} Mb/s" if r.ok else f" FAILED ({r.error[:200]})", flush=True)
                    runs.append(r)
    ok = report(runs, size, reference)
    if not args.no_cargo_bench:
        ok = cargo_bench() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
