"""The impairment sweep's conditions and one run of a stack through one of them, shared by the
interop test (``test_impairments.py``, one seed, small sizes) and the benchmark
(``impl/bench/impairments.py``, seeds 1..5, goodput side by side).

The path is ``udt-linkem`` between namespaces a (sender) and b (receiver): 10 ms each way
(20 ms RTT) at 100 Mb/s with the default queue (one condition has no rate), and each condition's impairment on top, the
same in both directions with a seed of its own per direction. The outage is no link-spec key:
both namespaces drop every UDP datagram they receive (iptables) for 2 s while the transfer runs.
Every run writes a real output file and compares its sha256 with the random input's.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from udtharness.netns import Net, linkem_namespaces
from udtharness.stacks import Stack
from udtharness.testdata import random_file, sha256_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from compare import transfer  # noqa: E402

PATH_SPEC = "delay=10ms,rate=100mbit"
ADDRS = ("10.238.0.1", "10.238.0.2")
MIB = 1 << 20
# Seed of the b -> a direction: the a -> b seed plus this, so the two never draw alike.
REVERSE_SEED_OFFSET = 1000
OUTAGE_START_S = 0.75  # after the sender starts
OUTAGE_S = 2.0


@dataclass(frozen=True)
class Condition:
    """One point of the sweep: the impairment added to :data:`PATH_SPEC` (both ways), the
    transfer size of the benchmark (MiB, at ``--size-scale 1``) and the goodput each stack
    roughly reaches there (Mb/s, measured; it only sizes the timeout)."""

    name: str
    impairment: str
    size_mib: float
    expect_mbps: float
    outage_s: float = 0.0
    # The outage's transfer must outlast it: its size does not shrink with the scale below this.
    min_size_mib: float = 0.0
    path: str = PATH_SPEC

    def spec(self, seed: int) -> str:
        return ",".join(p for p in (self.path, self.impairment, f"seed={seed}") if p)

    def size(self, scale: float) -> int:
        return max(int(self.size_mib * scale * MIB), int(self.min_size_mib * MIB), 1)

    def timeout(self, scale: float) -> float:
        """Seconds before a run counts as a hang: three times the expected time, plus 10 s."""
        expected = self.size(scale) * 8 / (self.expect_mbps * 1e6) + self.outage_s
        return 10.0 + 3 * expected


CONDITIONS = (
    Condition("clean", "", 32, 80),
    Condition("loss_1pct", "loss=1%", 8, 10),
    # No rate: the path the relay-based measurements of issue 14 had, where the receivers'
    # arrival stamps set the pace (docs/testbed/timing.md, "Why udt-rs recovers ... more slowly").
    Condition("loss_1pct_unrated", "loss=1%", 32, 60, path="delay=10ms"),
    Condition("loss_5pct", "loss=5%", 2, 2.5),
    Condition("loss_10pct", "loss=10%", 1, 1.1),
    Condition("reorder_2pct", "reorder=2%,reorder_delay=2ms", 8, 8),
    Condition("duplicate_5pct", "duplicate=5%", 32, 60),
    Condition("mixed", "loss=1%,duplicate=1%,reorder=1%,reorder_delay=2ms", 8, 7),
    Condition("outage_2s", "", 32, 80, outage_s=OUTAGE_S, min_size_mib=32),
)
BY_NAME = {c.name: c for c in CONDITIONS}

OK, WRONG_BYTES, FAILED, HANG = "ok", "wrong bytes", "failed exit", "hang"


@dataclass
class Outcome:
    condition: str
    stack: str
    seed: int
    status: str
    mbps: float = 0.0
    seconds: float = 0.0
    detail: str = ""
    outage_missed: bool = False  # the transfer ended before the outage was over

    def __post_init__(self) -> None:
        self.detail = "; ".join(line.strip() for line in self.detail.splitlines() if line.strip())

    @property
    def ok(self) -> bool:
        return self.status == OK


def _iptables(ns: str, op: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", ns, "iptables", op, "INPUT", "-p", "udp", "-j", "DROP"],
        check=op == "-I",
        capture_output=True,
    )


@contextmanager
def outage(net: Net, start_s: float, length_s: float) -> Iterator[list[float]]:
    """From ``start_s`` s after entering, for ``length_s`` s, namespaces a and b drop every UDP
    datagram they receive; the rules go on exit whatever happens. Yields a list that gets the
    monotonic times of the cut and of the repair."""
    assert net.ns_a and net.ns_b
    namespaces = (net.ns_a, net.ns_b)
    stop = threading.Event()
    times: list[float] = []
    cut: list[str] = []

    def run() -> None:
        try:
            if stop.wait(start_s):
                return
            for ns in namespaces:
                cut.append(ns)
                _iptables(ns, "-I")
            times.append(time.monotonic())
            stop.wait(length_s)
        finally:
            for ns in cut:
                _iptables(ns, "-D")
            if cut:
                times.append(time.monotonic())

    thread = threading.Thread(target=run, name="outage", daemon=True)
    thread.start()
    try:
        yield times
    finally:
        stop.set()
        thread.join()


def input_file(work: Path, size: int) -> Path:
    """A random input of ``size`` bytes under ``work``, made once per size."""
    path = work / f"input-{size}"
    return path if path.exists() else random_file(path, size)


def run(
    stack: Stack, cond: Condition, seed: int, work: Path, ns_prefix: str, scale: float = 1.0, port: int = 9000
) -> Outcome:
    """One transfer ``stack`` -> ``stack`` through ``cond`` with ``seed``, in fresh namespaces
    (so both stacks meet the same drops by arrival index), classified as ok, wrong bytes,
    failed exit or hang (the peers killed at the timeout)."""
    size = cond.size(scale)
    src = input_file(work, size)
    rundir = work / f"{cond.name}-{stack.name}-{seed}"
    rundir.mkdir(parents=True, exist_ok=True)
    out = rundir / "output"
    a_to_b, b_to_a = cond.spec(seed), cond.spec(seed + REVERSE_SEED_OFFSET)
    missed = False
    with linkem_namespaces(ns_prefix, *ADDRS, a_to_b, b_to_a) as net:
        if cond.outage_s:
            # transfer() starts the receiver, waits 0.2 s, then starts the sender.
            with outage(net, 0.2 + OUTAGE_START_S, cond.outage_s) as times:
                r = transfer(stack, net, src, rundir, port, cond.timeout(scale), output=out)
            missed = len(times) < 2 or times[1] - times[0] < cond.outage_s - 0.05
        else:
            r = transfer(stack, net, src, rundir, port, cond.timeout(scale), output=out)
    try:
        if r.hung:
            return Outcome(
                cond.name, stack.name, seed, HANG, detail=f"no exit within {cond.timeout(scale):.0f} s: {r.error}"
            )
        if not r.exited_ok:
            return Outcome(cond.name, stack.name, seed, FAILED, detail=r.error)
        got = out.stat().st_size if out.exists() else -1
        if got != size or sha256_file(out) != sha256_file(src):
            return Outcome(
                cond.name,
                stack.name,
                seed,
                WRONG_BYTES,
                r.mbps,
                r.seconds,
                f"{got} bytes received of {size}, sha256 differs",
            )
        if not r.ok:  # exit 0 and the right bytes, but no stats summary
            return Outcome(cond.name, stack.name, seed, FAILED, detail=r.error)
        return Outcome(cond.name, stack.name, seed, OK, r.mbps, r.seconds, outage_missed=missed)
    finally:
        out.unlink(missing_ok=True)
