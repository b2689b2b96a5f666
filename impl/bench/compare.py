#!/usr/bin/env python3
"""Goodput and CPU cost of our `udt` against libudt 4.11, measured back to back in one run.

For each network (loopback; two namespaces joined by a veth pair) and each stack,
one bulk transfer of --size-mib MiB, the stack talking to itself (udt -> udt,
libudt -> libudt). Goodput comes from the receiver's stats summary (docs/cli.md),
CPU time (user + sys) from wait4() on each process. Prints the ratios ours/libudt,
then runs `cargo bench -p udt-proto --bench loss_list` and prints its output.

Targets (stated, not asserted): goodput >= 2.5x libudt's and CPU per Gb <= 0.5x
libudt's, on the loopback.

    make bench                    # or: .venv/bin/python impl/bench/compare.py --help
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "impl/interop"))
from netns import Net, create_veth_namespaces, delete_namespaces  # noqa: E402

STACKS = {
    "udt": Path(os.environ.get("UDT_BIN") or REPO / "impl/target/release/udt"),
    "libudt": Path(os.environ.get("LIBUDT_PEER") or REPO / "build/libudt-peer"),
}
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

    def cpu_per_gbit(self, cpu: float, size_bytes: int) -> float:
        return cpu / (size_bytes * 8 / 1e9)


class VethNamespaces:
    """Two namespaces joined by a veth pair, deleted on exit even after a failure."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.net = Net("veth", "10.233.0.1", "10.233.0.2", f"udtcmp-{pid}-a", f"udtcmp-{pid}-b")

    def __enter__(self) -> Net:
        n = self.net
        create_veth_namespaces(n.ns_a, n.ns_b, n.addr_a, n.addr_b)
        return n

    def __exit__(self, *exc: object) -> None:
        delete_namespaces([self.net.ns_a, self.net.ns_b])


def wait_with_rusage(pid: int, deadline: float) -> tuple[int | None, float]:
    """(exit code or None on timeout, user+sys CPU seconds) of a child."""
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            return None, 0.0
        time.sleep(0.01)


def transfer(stack: str, net: Net, input_path: Path, work: Path, port: int, timeout: float) -> Run:
    binary = STACKS[stack]
    if not os.access(binary, os.X_OK):
        return Run(net.name, stack, False, error=f"{binary} is not built (make build)")
    rstats, sstats = work / f"{net.name}-{stack}-recv.jsonl", work / f"{net.name}-{stack}-send.jsonl"
    recv = net.wrap(
        net.ns_b,
        [
            str(binary),
            "recv",
            "--listen",
            f"{net.addr_b}:{port}",
            "--output",
            "/dev/null",
            "--stats",
            str(rstats),
            "--stats-interval",
            "1000",
        ],
    )
    send = net.wrap(
        net.ns_a,
        [
            str(binary),
            "send",
            "--connect",
            f"{net.addr_b}:{port}",
            "--input",
            str(input_path),
            "--stats",
            str(sstats),
            "--stats-interval",
            "1000",
        ],
    )
    errs = [work / f"{net.name}-{stack}-{r}.stderr" for r in ("recv", "send")]
    procs: list[subprocess.Popen] = []
    try:
        with open(errs[0], "wb") as e:
            procs.append(subprocess.Popen(recv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e))
        time.sleep(0.2)
        with open(errs[1], "wb") as e:
            procs.append(subprocess.Popen(send, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e))
        deadline = time.monotonic() + timeout
        # `ip netns exec` execs the stack in place, so these pids are the stacks' own.
        rc_send, cpu_send = wait_with_rusage(procs[1].pid, deadline)
        if rc_send is not None:
            procs[1].returncode = rc_send  # reaped by wait4: keep Popen from waiting again
        rc_recv, cpu_recv = wait_with_rusage(procs[0].pid, deadline)
        if rc_recv is not None:
            procs[0].returncode = rc_recv
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                p.wait()
    if rc_send != 0 or rc_recv != 0:
        tails = " | ".join(f"{e.name}: {e.read_text(errors='replace').strip()[-300:]}" for e in errs)
        return Run(net.name, stack, False, error=f"exit send={rc_send} recv={rc_recv}: {tails}")
    try:
        summary = [json.loads(l) for l in rstats.read_text().splitlines() if l.strip()][-1]
        assert summary.get("summary")
    except (OSError, ValueError, IndexError, AssertionError):
        return Run(net.name, stack, False, error=f"no stats summary in {rstats}")
    return Run(net.name, stack, True, summary["mbps"], summary["seconds"], cpu_send, cpu_recv)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def report(runs: list[Run], size: int) -> bool:
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
    print(f"ratios ours/libudt (targets on lo: goodput >= {GOODPUT_TARGET}x, CPU per Gb <= {CPU_TARGET}x)")
    print(f"{'net':<6}{'goodput':>10}{'cpu/Gb send':>13}{'cpu/Gb recv':>13}   verdict")
    by = {(r.net, r.stack): r for r in runs}
    for net in dict.fromkeys(r.net for r in runs):
        ours, ref = by.get((net, "udt")), by.get((net, "libudt"))
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
    return all(r.ok for r in runs)


def cargo_bench() -> bool:
    cmd = ["cargo", "bench", "-p", "udt-proto", "--bench", "loss_list"]
    print(f"\n==> {' '.join(cmd)} (in impl/)", flush=True)
    return subprocess.run(cmd, cwd=REPO / "impl").returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=2048, help="bytes per transfer, MiB (default 2048)")
    ap.add_argument("--nets", default="lo,veth", help="comma-separated subset of lo,veth (default both)")
    ap.add_argument("--stacks", default="udt,libudt", help="comma-separated subset of udt,libudt")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per transfer (default 600)")
    ap.add_argument("--no-cargo-bench", action="store_true", help="skip the loss_list criterion bench")
    args = ap.parse_args()
    nets = args.nets.split(",")
    stacks = args.stacks.split(",")
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
        print(f"compare: {args.size_mib} MiB per transfer, stacks {', '.join(stacks)}, nets {', '.join(nets)}")
        port = 24000 + os.getpid() % 1000
        for net_name in nets:
            if net_name == "lo":
                ctx = None
                net = Net("lo", "127.0.0.1", "127.0.0.1")
            else:
                ctx = VethNamespaces()
                net = ctx.__enter__()
            try:
                for stack in stacks:
                    port += 1
                    print(f"  {net.name}: {stack} -> {stack} ...", end="", flush=True)
                    r = transfer(stack, net, data, work, port, args.timeout)
                    print(f" {r.mbps:.0f} Mb/s" if r.ok else f" FAILED ({r.error[:200]})", flush=True)
                    runs.append(r)
            finally:
                if ctx:
                    ctx.__exit__()
    ok = report(runs, size)
    if not args.no_cargo_bench:
        ok = cargo_bench() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
