"""A testbed run: the state every part shares, and who runs a part once.

:class:`Run` holds where the results go, the scale and duration, the InfluxDB writer, the
progress, the run's CPUs and the current part's pins (:mod:`udtbed.emulation.cores`) and the repeats
(:class:`Repeats`: how many times each run of a part runs); it says how much of a run the
summaries leave out (:meth:`Run.warmup_of`), and :func:`stack_seconds` a run's planned wall
time. A :class:`Lineup` is who runs a part once: the stack under test, or a baseline's stacks,
and the stack of each bulk flow (:func:`udtbed.experiments.runner.lineups` makes them).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..emulation import cores
from ..emulation.cluster import Cluster, core_check
from ..emulation.network import Network
from ..emulation.runtime import HostRuntime, NamespaceRuntime
from ..emulation.topology import Topology
from ..results.influx import InfluxWriter
from . import seats
from .experiment import Experiment, Part
from .stacks import BulkStack

# Planned seconds around a stack's run of a part (start, stop, parse), for the progress's ETA.
STACK_OVERHEAD_S = 2.0
# How a run sizes its UDT flows' window and buffers (``udtbed run --udt-buffers``, udt_window).
UDT_BUFFERS = ("path", "default")
CALIBRATION_S = 8.0
# The most a repeat after the first waits before its flows start (Run.start_jitter).
START_JITTER_S = 0.5
LONG_RUN_S = 60.0  # a run longer than this is summarised over its second half (Run.warmup_of)
# ``--repeat-only reference``: the runs that a band against the reference stack compares.
AGAINST_REFERENCE = "reference"


@dataclass(frozen=True)
class Repeats:
    """How many times each run of a part runs (``udtbed run --repeat N --repeat-only WHAT``): ``n``
    times for the runs ``only`` names, once for the others (every run ``n`` times when ``only``
    is empty). ``only`` holds stack names (a baseline's run repeats when it names every stack of
    it) and may hold :data:`AGAINST_REFERENCE`: in a part with a band relative to the reference
    stack (``of = "reference"``), the runs of that band's protocol, the reference's among them
    (udt-rs and libudt on the SC'04 paths): the runs whose rows need an interval most."""

    n: int = 1
    only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"repeat must be at least 1, not {self.n}")

    @classmethod
    def parse(cls, n: int, only: str | None, known: Iterable[str]) -> Repeats:
        """``--repeat-only``'s comma-separated names; a ValueError names one that is neither a
        stack of ``known`` nor :data:`AGAINST_REFERENCE`."""
        names = frozenset(x.strip() for x in (only or "").split(",") if x.strip())
        if unknown := sorted(names - set(known) - {AGAINST_REFERENCE}):
            raise ValueError(
                f"--repeat-only: unknown {', '.join(map(repr, unknown))} (stack names, or "
                f"{AGAINST_REFERENCE!r}: the runs a band against the reference stack compares)"
            )
        return cls(n, names)

    def of(self, part: Part, lineup: Lineup) -> int:
        """How many times ``lineup`` runs ``part``."""
        if not self.only:
            return self.n
        if all(name in self.only for name in lineup.name.split("+")):
            return self.n
        compared = {b.protocol for b in part.bands if b.relative}
        if AGAINST_REFERENCE in self.only and lineup.protocol in compared:
            return self.n
        return 1

    def describe(self) -> str:
        """The run's repeats in words, for its metadata and log."""
        if self.n == 1:
            return "every run once"
        if not self.only:
            return f"every run {self.n} times"
        what = ", ".join(
            "the runs a band against the reference compares" if x == AGAINST_REFERENCE else x for x in sorted(self.only)
        )
        return f"{what}: {self.n} times; every other run once"


class Reporter(Protocol):
    """Where a run reports its progress (udtharness.progress.Progress fits)."""

    def step(self, label: str, weight: float) -> None: ...
    def advance(self, amount: float) -> None: ...
    def log(self, line: str) -> None: ...


class PlainReporter:
    """Log lines printed as they come; steps printed as a line each."""

    def __init__(self, log: Callable[[str], None] = print) -> None:
        self._log = log

    def step(self, label: str, weight: float) -> None:
        self._log(f"-- {label}")

    def advance(self, amount: float) -> None:
        pass

    def log(self, line: str) -> None:
        self._log(line)


class Run:
    """Shared state of one testbed run: where results go, scale, influx, progress."""

    def __init__(
        self,
        outdir: Path,
        scale: float,
        duration: float,
        backend: str,
        influx: InfluxWriter,
        run_id: str,
        on_calibration_fail: str = "refuse",
        progress: Reporter | None = None,
        rtt_tol_ms: float = 1.0,
        rate_tol: float = 0.02,
        host_runtime: Callable[[Network], HostRuntime] = NamespaceRuntime,
        cpus: list[int] | None = None,
        pin: str = "auto",
        on_cores_fail: str = "refuse",
        udt_buffers: str = "path",
        repeat: int = 1,
        cluster: Cluster | None = None,
        cluster_cpus: dict[str, list[int]] | None = None,
        repeats: Repeats | None = None,
    ):
        self.outdir, self.scale, self.duration, self.backend = outdir, scale, duration, backend
        self.influx, self.run_id, self.on_cal_fail = influx, run_id, on_calibration_fail
        self.progress: Reporter = progress or PlainReporter()
        self.rtt_tol_ms, self.rate_tol = rtt_tol_ms, rate_tol
        self.raw = outdir / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.host_runtime = host_runtime
        # The CPUs the run may use, how processes are pinned to them, and the current part's
        # seats (udtbed.emulation.cores; set while a part runs).
        self.cpus = cpus if cpus is not None else cores.run_cpus(None)
        self.pin, self.on_cores_fail = pin, on_cores_fail
        self.pins: cores.Pins | None = None
        if udt_buffers not in UDT_BUFFERS:
            raise ValueError(f"udt_buffers must be one of {', '.join(UDT_BUFFERS)}, not {udt_buffers!r}")
        self.udt_buffers = udt_buffers
        # Each part's stacks (those ``repeats.only`` names, where it names some) run this many
        # times, interleaved (A B A B ...: drift on a shared host hits every stack alike);
        # ``current_repeat`` is the one running (0: the first).
        self.repeats = repeats if repeats is not None else Repeats(repeat)
        self.repeat, self.current_repeat = self.repeats.n, 0
        # A cluster run (udtbed.emulation.cluster): its servers, and the CPUs the run may use on each.
        self.cluster, self.cluster_cpus = cluster, cluster_cpus or {}

    def start_jitter(self, exp: Experiment, part: Part, lineup: str, repeat: int) -> float:
        """How long a repeat's flows wait before they start: 0 for the first, else up to
        :data:`START_JITTER_S`, drawn from a seed of the run, part, stack and repeat (so that
        repeats do not meet the links' queues and the host's timers in lockstep)."""
        if repeat == 0:
            return 0.0
        return random.Random(f"{self.run_id}/{exp.name}/{part.label}/{lineup}/{repeat}").uniform(0, START_JITTER_S)

    def seat(self, *key: str) -> frozenset[int] | None:
        """The CPUs of the current part's seat ``key`` (None: not pinned, the runner's)."""
        return self.pins.of(*key) if self.pins else None

    def core_check(self, part: Part, topo: Topology) -> cores.CoreCheck:
        """``part``'s core plan checked against the run's CPUs (pins included where pinning is on);
        on a cluster, each seat against its server's CPUs."""
        plan = seats.plan(part, topo, self.backend)
        if self.cluster is not None:
            where = self.cluster.place(topo)
            return core_check(plan, where, self.cluster_cpus, self.cpus, self.scale, self.pin)
        return cores.check(plan, self.cpus, self.scale, self.pin)

    @contextlib.contextmanager
    def pinned(self, pins: cores.Pins | None) -> Iterator[None]:
        """While a part runs on ``pins``: its seats' CPUs for :meth:`seat`, and the runner (with
        every process it starts without a seat) on the rest; then the run's CPUs again."""
        if pins:
            self.log(f"  pinned: {', '.join(f'{k} on {v}' for k, v in pins.as_json().items())}")
            os.sched_setaffinity(0, pins.rest)
        self.pins = pins
        try:
            yield
        finally:
            self.pins = None
            os.sched_setaffinity(0, self.cpus)

    def log(self, line: str) -> None:
        self.progress.log(line)

    def runtime(self, net: Network) -> HostRuntime:
        """Where the stacks run on ``net``'s hosts (calibration always uses NamespaceRuntime)."""
        return self.host_runtime(net)

    @property
    def warmup(self) -> float:
        """Seconds left out of the summaries (:meth:`warmup_of` the run's duration)."""
        return self.warmup_of(self.duration)

    @staticmethod
    def warmup_of(seconds: float) -> float:
        """A short run leaves out the paper's 7.5 s to 90 % (8 s, at most 40 % of the run); a run
        longer than :data:`LONG_RUN_S` is summarised over its second half, as the papers' 100 s
        traces are read (4.11 takes about 30 s to 90 % on OC-12 at full scale, issue 13). The
        quick profiles (60 s at most) keep the short rule their bands were measured with."""
        return seconds / 2 if seconds > LONG_RUN_S else min(8.0, 0.4 * seconds)

    def short_warmup(self) -> float:
        """Seconds the bulk flows of a short-TCP point run before the short flows start."""
        return short_warmup(self.duration)


def stack_seconds(part: Part, duration: float) -> float:
    """The planned wall time of one stack's run of ``part`` in one repeat (start, stop and parse
    included), for the progress's ETA and the plan (udtbed.experiments.runner.plan)."""
    if part.sweep:
        return len(part.sweep.values) * ((part.sweep.seconds or duration) + STACK_OVERHEAD_S)
    if part.short_tcp:
        return len(part.short_tcp.bulk_flows) * (duration + short_warmup(duration) + STACK_OVERHEAD_S)
    return duration + STACK_OVERHEAD_S


def short_warmup(duration: float) -> float:
    """Seconds the bulk flows of a short-TCP point run before the short flows start."""
    return min(5.0, duration / 3)


@dataclass(frozen=True)
class Lineup:
    """Who runs a part once: the name its result has (the stack under test, or a baseline's
    stacks), the protocol whose bands judge it, and the stack of each bulk flow."""

    name: str
    protocol: str
    flow_stacks: Mapping[str, BulkStack]
    under_test: BulkStack | None = None  # None: a baseline part, every flow names its stack
