"""How an experiment runs: build → calibrate → each stack in turn, for every part.

The experiment comes from its data file (:mod:`udtbed.experiment`). For every stack under test
(:func:`lineups`: those of the protocols a part takes; a baseline part runs once) a bulk part
starts the listening end of every flow (the receiver; SABUL's sender), then the other ends (each
at its flow's ``start``), streams the files they write to InfluxDB while it runs
(:mod:`udtbed.live`), stops everything after the duration and keeps per-flow series, the part's
metrics and the verdict of every band (:mod:`udtbed.bands`). A flow that names its stack runs
that one beside the stack under test. A ``short_tcp`` part (SC'04 Fig. 13, SABUL Table 2) does
that once per count of bulk flows, with short TCP flows beside them. Paper numbers are Mb/s at
the papers' rates; the results show them × scale.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from udtharness import metrics
from udtharness.stacks import reference_stacks

from . import capture, cores, hostwatch
from .bands import against_reference, judge_all
from .calibrate import as_json, calibrate
from .experiment import Experiment, Flow, FlowOptions, Part, ShortTcp
from .hostwatch import HostReport
from .influx import InfluxWriter
from .live import LiveWatch, WatchedFlow, write_calibration
from .network import Network
from .results import ExperimentResult, FlowResult, PartResult, ShortTcpPoint, StackResult, SweepPoint
from .runtime import HostRuntime, NamespaceRuntime, Process
from .stacks import Role, Stack, Transfer, all_stacks, resample
from .topology import Topology
from .topology import load as load_topology

# Planned seconds around a stack's run of a part (start, stop, parse), for the progress's ETA.
STACK_OVERHEAD_S = 2.0
UDT_PAYLOAD = 1456  # UDT4.md §3: a 1500-byte packet's payload
UDT_DEFAULT_WINDOW = 8192  # 4.11's flow window and receive buffer, packets (UDT4.md §13.4)
# How a run sizes its UDT flows' window and buffers (``udtbed run --udt-buffers``, udt_window).
UDT_BUFFERS = ("path", "default")
CALIBRATION_S = 8.0
# The most a repeat after the first waits before its flows start (Run.start_jitter).
START_JITTER_S = 0.5
LONG_RUN_S = 60.0  # a run longer than this is summarised over its second half (Run.warmup_of)


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
    ):
        self.outdir, self.scale, self.duration, self.backend = outdir, scale, duration, backend
        self.influx, self.run_id, self.on_cal_fail = influx, run_id, on_calibration_fail
        self.progress: Reporter = progress or PlainReporter()
        self.rtt_tol_ms, self.rate_tol = rtt_tol_ms, rate_tol
        self.raw = outdir / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.host_runtime = host_runtime
        # The CPUs the run may use, how processes are pinned to them, and the current part's
        # seats (udtbed.cores; set while a part runs).
        self.cpus = cpus if cpus is not None else cores.run_cpus(None)
        self.pin, self.on_cores_fail = pin, on_cores_fail
        self.pins: cores.Pins | None = None
        if udt_buffers not in UDT_BUFFERS:
            raise ValueError(f"udt_buffers must be one of {', '.join(UDT_BUFFERS)}, not {udt_buffers!r}")
        self.udt_buffers = udt_buffers
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {repeat}")
        # Each part's stacks run this many times, interleaved (A B A B ...: drift on a shared
        # host hits every stack alike); ``current_repeat`` is the one running (0: the first).
        self.repeat, self.current_repeat = repeat, 0

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
        """``part``'s core plan checked against the run's CPUs (pins included where pinning is on)."""
        return cores.check(cores.plan(part, topo, self.backend), self.cpus, self.scale, self.pin)

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
        return min(5.0, self.duration / 3)

    def planned_seconds(self, part: Part, n_stacks: int) -> float:
        """The part's planned wall time (calibration and every stack), for the progress's ETA."""
        per_stack = self.duration + STACK_OVERHEAD_S
        if part.sweep:
            per_stack = len(part.sweep.values) * ((part.sweep.seconds or self.duration) + STACK_OVERHEAD_S)
        if part.short_tcp:
            per_stack = len(part.short_tcp.bulk_flows) * (self.duration + self.short_warmup() + STACK_OVERHEAD_S)
        return CALIBRATION_S + n_stacks * (self.repeat * per_stack + (self.repeat - 1) * START_JITTER_S / 2)


class CalibrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Lineup:
    """Who runs a part once: the name its result has (the stack under test, or a baseline's
    stacks), the protocol whose bands judge it, and the stack of each bulk flow."""

    name: str
    protocol: str
    flow_stacks: Mapping[str, Stack]
    under_test: Stack | None = None  # None: a baseline part, every flow names its stack


class PartSkipped(RuntimeError):
    """A part cannot run with this run's stacks; the message says why."""


def lineups(part: Part, stacks: list[Stack], registry: Mapping[str, Stack] | None = None) -> list[Lineup]:
    """The runs of ``part``: one per stack under test whose protocol it takes, each with the
    flows that name a stack on that one; a baseline part (every flow names its stack) once.
    :class:`PartSkipped` when a named stack is not available or no stack under test fits."""
    named = {f.stack for f in part.flows if f.stack}
    pinned: dict[str, Stack] = {}
    if named:
        registry = all_stacks() if registry is None else registry
        for name in sorted(named):
            ok, why = registry[name].available()
            if not ok:
                raise PartSkipped(f"its flows need stack {name}, which is not available ({why})")
            pinned[name] = registry[name]
    if part.baseline:
        stacks_in_order = list(dict.fromkeys(pinned[f.stack] for f in part.flows if f.stack))
        protocols = {s.protocol for s in stacks_in_order}
        return [
            Lineup(
                "+".join(s.name for s in stacks_in_order),
                protocols.pop() if len(protocols) == 1 else "mixed",
                {f.name: pinned[f.stack] for f in part.flows if f.stack},
            )
        ]
    # The settings the part's flows of the stack under test need (a fixed rate, buffers): a
    # stack without an option for one of them does not run the part.
    own = [f for f in part.flows if not f.stack]
    needs = {x for f in own for x in f.options.settings()}
    if part.short_tcp:
        needs |= part.short_tcp.bulk.settings()
    if part.sweep:
        needs.add(FlowOptions().with_option(part.sweep.option, 1).settings().pop())
    # ... and what every one of them must have for a stack to run it (FRTP: a rate).
    given = set.intersection(*(f.options.settings() for f in own)) if own else set()
    if part.sweep:
        given |= FlowOptions().with_option(part.sweep.option, 1).settings()
    nets: set[str] | None = None
    if any(s.control_net for s in stacks):  # such a stack needs its control net in the topology
        nets = {link.net for link in load_topology(part.topology).links}

    def fits(s: Stack) -> bool:
        has_net = s.control_net is None or (nets is not None and s.control_net in nets)
        takes = all(s.takes(x) for x in needs) and s.required <= given
        return part.runs(s.protocol) and has_net and takes

    out = [
        Lineup(s.name, s.protocol, {f.name: pinned[f.stack] if f.stack else s for f in part.flows}, s)
        for s in stacks
        if fits(s)
    ]
    if not out:
        want = ", ".join(part.protocols or ())
        raise PartSkipped(f"it runs {want} stacks under test, and the run has none of them")
    return out


def part_runs(part: Part, stacks: list[Stack]) -> int:
    """How many times ``part`` runs with ``stacks`` (0: it is skipped), for the progress."""
    try:
        return len(lineups(part, stacks))
    except PartSkipped:
        return 0


def planned_seconds(run: Run, experiments: list[Experiment], stacks: list[Stack]) -> float:
    return sum(run.planned_seconds(p, n) for e in experiments for p in e.parts if (n := part_runs(p, stacks)))


def run_experiment(run: Run, exp: Experiment, stacks: list[Stack]) -> ExperimentResult:
    result = ExperimentResult(
        experiment=exp.name,
        title=exp.title,
        figure=exp.figure,
        note=exp.note,
        scale=run.scale,
        duration_s=run.duration,
        warmup_s=run.warmup,
        backend=run.backend,
    )
    for part in exp.parts:
        try:
            runs = lineups(part, stacks)
        except PartSkipped as e:
            run.log(f"== {exp.name} / {part.label}: skipped: {e}")
            continue
        result.parts.append(_run_part(run, exp, part, runs))
    return result


def _run_part(run: Run, exp: Experiment, part: Part, runs: list[Lineup]) -> PartResult:
    topo = load_topology(part.topology)
    run.progress.step(f"{exp.name} / {part.label}: build, calibrate", CALIBRATION_S)
    run.log(f"== {exp.name} / {part.label}: building {topo.name} (scale {run.scale}, {run.backend})")
    work = run.raw / exp.name / part.label
    work.mkdir(parents=True, exist_ok=True)
    refs = reference_stacks()
    cc = run.core_check(part, topo)
    if not cc.ok:
        msg = f"{exp.name} / {part.label}: {cc.shortfall()}"
        if run.on_cores_fail == "refuse":
            raise cores.CoresError(msg)
        run.log(f"  WARNING: {msg}; flagged, running anyway")
    link_cpus = cc.pins.links() if cc.pins else {}
    with (
        run.pinned(cc.pins),
        Network(topo, scale=run.scale, backend=run.backend, workdir=work, link_cpus=link_cpus) as net,
    ):
        if part.short_tcp:
            pairs = [(part.short_tcp.src, part.short_tcp.dst)]
        else:
            pairs = [(f.src, f.dst) for f in part.flows]
        cals = calibrate(net, pairs, run.rtt_tol_ms, run.rate_tol, log=run.log)
        write_calibration(run.influx, {"run": run.run_id, "experiment": exp.name, "part": part.label}, cals)
        pres = PartResult(
            label=part.label,
            topology=topo.name,
            topology_file=part.topology.name,
            topology_paper=topo.paper,
            links={str(k): v for k, v in net.link_specs.items()}
            | {f"nic:{h}": {"tc_qdisc": a} for h, a in net.nic_specs.items()},
            calibration=as_json(cals),
            calibration_ok=all(c.ok for c in cals),
            paper=part.paper,
            sweep=asdict(part.sweep) if part.sweep else None,
            cores=cc.as_json(),
            offloads=net.offloads(),
        )
        if not pres.calibration_ok:
            msg = (
                f"calibration of {topo.name} is off beyond tolerance (RTT ±{run.rtt_tol_ms} ms, "
                f"rate ±{run.rate_tol * 100:.0f}%) at scale {run.scale}"
            )
            if run.on_cal_fail == "refuse":
                raise CalibrationError(msg + "; lower SCALE or pass CALIBRATION=flag to run anyway")
            run.log(f"  WARNING: {msg}; flagged, running anyway")
        # Repeats interleave the stacks (A B A B ...); each repeat writes its raw files apart.
        for repeat in range(run.repeat):
            run.current_repeat = repeat
            raw = work if repeat == 0 else work / f"repeat-{repeat + 1}"
            raw.mkdir(exist_ok=True)
            stacks: dict[str, StackResult] = {}
            for lineup in runs:
                of = f" (repeat {repeat + 1} of {run.repeat})" if run.repeat > 1 else ""
                label = f"{exp.name} / {part.label} / {lineup.name}{of}"
                run.progress.step(label, (run.planned_seconds(part, 1) - CALIBRATION_S) / run.repeat)
                beside = sorted({s.name for s in lineup.flow_stacks.values()} - {lineup.name})
                jitter = run.start_jitter(exp, part, lineup.name, repeat)
                run.log(
                    f"  -- {lineup.name}{of}: {run.duration:.0f} s"
                    + (f" (beside {', '.join(beside)})" if beside else "")
                    + (f", start {jitter:.2f} s late" if jitter else "")
                )
                time.sleep(jitter)
                if part.short_tcp:
                    assert lineup.under_test is not None
                    res = _short_tcp(run, exp, part, net, lineup.under_test, raw)
                elif part.sweep:
                    res = _sweep(run, exp, part, net, lineup, raw, topo)
                else:
                    res = _bulk(run, exp, part, net, lineup, raw, topo)
                res.repeat, res.start_jitter_s = repeat, round(jitter, 3)
                reference = refs.get(res.protocol) == lineup.name
                res.verdicts = judge_all(part, res, run.scale, run.warmup, run.duration, reference)
                for v in res.verdicts:
                    run.log(f"     {v.line()}")
                stacks[lineup.name] = res
            # Each band read against the reference stack's value in this repeat (udtbed.bands).
            for ref in refs.values():
                for res in against_reference(stacks, ref, part, run.scale, run.warmup, run.duration):
                    run.log(f"  -- {res.stack} against {ref}:")
                    for v in res.verdicts:
                        run.log(f"     {v.line()}")
            if repeat == 0:
                pres.stacks = stacks
            else:
                pres.more_repeats.append(stacks)
        # udt-linkem's last stats line; netem's qdisc counters (frames out, queue and loss drops).
        stats = net.link_stats() if net.backend == "linkem" else net.link_counters()
        pres.link_stats = {str(k): v for k, v in stats.items()}
    return pres


def _tags(run: Run, exp: Experiment, part: Part, stack: str, flow: str) -> dict[str, str]:
    return {
        "run": run.run_id,
        "experiment": exp.name,
        "part": part.label,
        "stack": stack,
        "flow": flow,
        "scale": str(run.scale),
        "backend": run.backend,
        "repeat": str(run.current_repeat + 1),
    }


@dataclass
class Started:
    """A bulk flow whose two ends run: its stack, where its receiver and sender write, and when
    it began (the connecting end's start)."""

    flow: Flow
    stack: Stack
    recv_stats: Path
    send_stats: Path
    offset_s: float
    transfer: Transfer = Transfer()
    procs: tuple[Process | None, ...] = ()  # (listener, connector)


def udt_window(topo: Topology, flow: Flow, scale: float, buffers: str = "path") -> int:
    """A UDT flow's flow window and buffers, packets: with ``buffers="path"``, what its path
    needs in flight (:meth:`Topology.window_packets`), never below 4.11's default of 8192 (the
    papers sized them for their paths); with ``"default"``, 4.11's 8192, with which a
    1 Gb/s × 110 ms path (9 444 packets of payload in one RTT) is window-bound."""
    if buffers == "default":
        return UDT_DEFAULT_WINDOW
    need = topo.window_packets(flow.src, flow.dst, scale, UDT_PAYLOAD)
    return max(UDT_DEFAULT_WINDOW, need or 0)


def transfer_for(
    flow: Flow, stack: Stack, net: Network, scale: float, seconds: float, base: Path, buffers: str = "path"
) -> Transfer:
    """``flow``'s settings at the run's scale (rates and buffers scale as the links do; a UDT
    flow's window as ``buffers`` says, :func:`udt_window`); with
    ``io = "disk"`` the sender's input is a file of ``size`` bytes (scaled; default: enough for
    ``seconds`` at the flow's rate or bottleneck), written now, and the receiver writes a file."""
    o = flow.options
    data_addr = net.address(flow.dst) if stack.control_net else None

    def scaled(n: int | None) -> int | None:
        return max(4096, round(n * scale)) if n is not None else None

    t = Transfer(
        data_addr=data_addr,
        rate_mbps=round(o.rate * scale, 6) if o.rate is not None else None,
        udp_buffer=scaled(o.udp_buffer),
        frtp_buffer=scaled(o.frtp_buffer),
        udt_window=udt_window(net.topo, flow, scale, buffers)
        if stack.protocol == "udt" and stack.takes("udt_window")
        else None,
    )
    if o.io != "disk":
        return t
    size = scaled(o.size)
    if size is None:
        rate = t.rate_mbps or (net.topo.bottleneck_bps(flow.src, flow.dst, scale=scale) or 1e9) / 1e6
        size = int(rate * 1e6 / 8 * (seconds + 5))
    src = Path(str(base) + ".in")
    with open(src, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 1 << 22)
            f.write(os.urandom(n))
            left -= n
    return replace(t, input=str(src), output=str(base) + ".out")


def _start_bulk(
    rt: HostRuntime,
    net: Network,
    stacks: Mapping[str, Stack],
    flows: list[Flow],
    work: Path,
    seconds: float,
    port0: int,
    tag: str,
    scale: float = 1.0,
    transfers: Mapping[str, Transfer] | None = None,
    env: dict[str, str] | None = None,
    pins: cores.Pins | None = None,
) -> list[Started]:
    """Every flow's listening end first (:attr:`Stack.listener`: the receiver, or SABUL's
    sender), then each flow's other end at its ``start`` (seconds after the listeners had half a
    second to bind), connecting to the listener's host; ``offset_s`` is when that was, on that
    clock. ``stacks``: each flow's stack, by flow name; ``transfers``: each flow's settings at
    the run's scale (:func:`transfer_for`; default: memory to memory, the stack's own). A stack
    with a control path (:attr:`Stack.control_net`) is met at the listener's address on that net,
    and its receiver is given its own data-net address (FRTP.md §1-2). ``pins``: each end's CPUs
    (:mod:`udtbed.cores`)."""
    ports = {f.name: port0 + i for i, f in enumerate(flows)}
    transfers = transfers or {}

    def files(f: Flow) -> str:
        return str(work / f"{tag}-{f.name}")

    def spawn(f: Flow, role: Role) -> Process | None:
        stack = stacks[f.name]
        host = f.dst if stack.listener == "receiver" else f.src
        addr = net.address(host, stack.control_net) if stack.control_net else net.address(host)
        t = transfers.get(f.name, Transfer())
        cpus = pins.of("flow", f.name, role) if pins else None
        if role == "receiver":
            argv, stdout = stack.receiver(addr, ports[f.name], Path(files(f) + ".stats"), t)
            return rt.spawn(f.dst, argv, stdout=stdout, stderr=Path(files(f) + ".recv.log"), env=env, cpus=cpus)
        argv = stack.sender(addr, ports[f.name], seconds, Path(files(f) + ".send.stats"), scale, t)
        return rt.spawn(f.src, argv, stderr=Path(files(f) + ".send.log"), env=env, cpus=cpus)

    listeners = {f.name: spawn(f, stacks[f.name].listener) for f in flows}
    time.sleep(0.5)
    t0 = time.monotonic()
    started = []
    for f in sorted(flows, key=lambda f: f.start):
        while time.monotonic() - t0 < f.start:
            time.sleep(0.05)
        other = spawn(f, stacks[f.name].connector())
        base = files(f)
        started.append(
            Started(
                f,
                stacks[f.name],
                Path(base + ".stats"),
                Path(base + ".send.stats"),
                time.monotonic() - t0,
                transfers.get(f.name, Transfer()),
                (listeners[f.name], other),
            )
        )
    return started


def _host_check(
    run: Run, net: Network, name: str, host: HostReport | None, started: list[Started]
) -> HostReport | None:
    """The part's CPU and emulator timing (:mod:`hostwatch`), with the UDT senders' pacing
    against the bottleneck and the flags that say the result is not the protocol's alone."""
    if host is None:
        return None
    # Only UDT's: its slow start ends at the receiver's arrival speed (UDT4.md §12.4), so pacing
    # above the bottleneck means compressed arrivals. SABUL starts at its initial rate (10 µs)
    # and probes above the link by design (SABUL.md §7-8): its period says nothing of timing.
    paced = [s for s in started if s.stack.protocol == "udt" and s.stack.sender_stats]
    if paced:
        host["sender_pacing"] = hostwatch.sender_pacing(
            {s.flow.name: s.send_stats for s in paced},
            {s.flow.name: net.topo.bottleneck_bps(s.flow.src, s.flow.dst, scale=run.scale) for s in paced},
        )
    seen_by_receivers = {
        (f"l{h.link.index}", "a_to_b" if h.frm == h.link.a else "b_to_a")
        for s in started
        for h in net.topo.timing_hops(s.flow.src, s.flow.dst)
    }
    hostwatch.mark_before_bottleneck(host, seen_by_receivers)
    host["flags"] = hostwatch.flags(host, host.get("sender_pacing"))
    for fl in host["flags"]:
        run.log(f"     TIMING {name}: {fl}")
    return host


def _watch(run: Run, live: LiveWatch, seconds: float, t_mono0: float, done: Callable[[], bool] = lambda: False) -> None:
    """Wait until ``seconds`` after ``t_mono0`` or until ``done()``, streaming every file's new lines."""
    end = t_mono0 + seconds
    last = time.monotonic()
    while True:
        live.poll()
        now = time.monotonic()
        run.progress.advance(now - last)
        last = now
        if now >= end or done():
            break
        time.sleep(min(0.5, max(0.0, end - now)))


def _live(
    run: Run,
    exp: Experiment,
    part: Part,
    name: str,
    net: Network,
    started: list[Started],
    t_wall0: float,
    extra_tags: dict[str, str] | None = None,
) -> LiveWatch:
    """The part's live watch: each started flow's receiver (and a UDT or SABUL sender's) stats
    files, tagged with the run's name (``name``: the stack under test, or the baseline's)."""
    flows = [
        WatchedFlow(
            s.flow.name,
            s.recv_stats,
            s.stack.line_parser(),
            s.offset_s,
            s.send_stats if s.stack.sender_stats else None,
        )
        for s in started
    ]
    return LiveWatch(run.influx, lambda fl: _tags(run, exp, part, name, fl) | (extra_tags or {}), net, flows, t_wall0)


def _flow_results(
    run: Run, live: LiveWatch, started: list[Started], seconds: float, warmup: float | None = None
) -> list[FlowResult]:
    out = []
    warmup = run.warmup if warmup is None else warmup
    for s in started:
        samples = live.samples(s.flow.name)
        series = resample(samples, s.offset_s, 1.0, seconds)
        steady = [x for t, x in series if t > warmup]
        out.append(
            FlowResult(
                name=s.flow.name,
                src=s.flow.src,
                dst=s.flow.dst,
                start_s=s.flow.start,
                stack=s.stack.name,
                protocol=s.stack.protocol,
                series_1s=series,
                series_raw=[(round(s.offset_s + x.t, 3), float(x.bytes)) for x in samples],
                mean_mbps=sum(steady) / len(steady) if steady else 0.0,
                bytes=samples[-1].bytes if samples else 0,
                rate_mbps=s.transfer.rate_mbps * s.stack.goodput_share if s.transfer.rate_mbps else None,
                losses_recv=_last_int(samples[-1].stats, "losses") if samples else None,
                window_pkts=s.transfer.udt_window,
            )
        )
    return out


def _last_int(d: Mapping[str, object] | None, key: str) -> int | None:
    v = (d or {}).get(key)
    return v if isinstance(v, int) else None


def _sender_counters(path: Path) -> dict[str, object]:
    """The last stats line a sender wrote (its ``pkts_sent`` and ``retrans``), {} if none."""
    last: dict[str, object] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return last
    for line in lines:
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(d, dict) and isinstance(d.get("pkts_sent"), int):
                last = d
    return last


def nic_dropped(net: Network, host: str) -> int | None:
    """Packets ``host``'s NIC (a topology ``nic``: the tbf on its data interface) has dropped
    so far, or None where the host has none or its counters cannot be read."""
    if host not in net.nic_specs:
        return None
    p = subprocess.run(
        ["ip", "netns", "exec", net.ns(host), "tc", "-s", "qdisc", "show", "dev", "data"],
        capture_output=True,
        text=True,
    )
    m = re.search(r"\(dropped (\d+),", p.stdout)
    return int(m.group(1)) if m else None


def udp_rcvbuf_errors(net: Network, host: str) -> int | None:
    """The host's UDP datagrams dropped for a full socket receive buffer so far (``/proc/net/snmp``
    of its namespace, ``Udp: RcvbufErrors``), or None where that cannot be read."""
    p = subprocess.run(["ip", "netns", "exec", net.ns(host), "cat", "/proc/net/snmp"], capture_output=True, text=True)
    rows = [line.split()[1:] for line in p.stdout.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2 or "RcvbufErrors" not in rows[0]:
        return None
    return int(rows[1][rows[0].index("RcvbufErrors")])


def _flow_extras(res: StackResult, started: list[Started], host: hostwatch.HostReport | None) -> None:
    """Per flow: the sender's retransmissions and packets sent, each end's CPU (over the
    measured window, % of one core, by process id), and for a finite transfer whether the
    receiver wrote exactly the input. The files of a disk transfer are removed."""
    cpu = {p["pid"]: p["cpu_pct"] for p in host["processes"]} if host else {}
    for s, f in zip(started, res.flows, strict=True):
        d = _sender_counters(s.send_stats)
        f.pkts_sent, f.retrans = _last_int(d, "pkts_sent"), _last_int(d, "retrans")
        ends = dict(zip((s.stack.listener, s.stack.connector()), s.procs, strict=False))
        for role, proc in ends.items():
            pid = getattr(proc, "pid", None)
            value = cpu.get(pid) if pid is not None else None
            if role == "sender":
                f.cpu_send_pct = value
            else:
                f.cpu_recv_pct = value
        if s.flow.options.size is not None:
            out = Path(s.transfer.output)
            f.exact = out.exists() and filecmp.cmp(s.transfer.input, out, shallow=False)
        for p in (s.transfer.input, s.transfer.output):
            if p.startswith(str(s.recv_stats.parent)):
                Path(p).unlink(missing_ok=True)


def _bulk(
    run: Run,
    exp: Experiment,
    part: Part,
    net: Network,
    lineup: Lineup,
    work: Path,
    topo: Topology,
    flows: list[Flow] | None = None,
    seconds: float | None = None,
    tag: str | None = None,
    extra_tags: dict[str, str] | None = None,
) -> StackResult:
    """One run of ``part``'s flows (or ``flows``) for ``seconds`` (default: the run's duration),
    or until every finite transfer ended."""
    host = None
    rt = run.runtime(net)
    flows = list(part.flows) if flows is None else flows
    seconds = run.duration if seconds is None else seconds
    tag = tag or f"{lineup.name}-bulk"
    transfers = {
        f.name: transfer_for(
            f, lineup.flow_stacks[f.name], net, run.scale, seconds, work / f"{tag}-{f.name}", run.udt_buffers
        )
        for f in flows
    }
    pcaps = capture.start(rt, net, work, tag) if part.capture else {}
    if pcaps:
        time.sleep(0.5)  # tcpdump is listening before the first packet
    rcvbuf0 = {f.dst: udp_rcvbuf_errors(net, f.dst) for f in flows}
    t_wall0, t_mono0 = time.time(), time.monotonic()
    finite = all(f.options.size is not None for f in flows)
    try:
        # A captured part's stacks send without UDP GSO (docs/cli.md, UDT_OFFLOAD): the sending
        # host's capture then holds the packets the wire carries, not super-datagrams.
        env = {"UDT_OFFLOAD": "0"} if pcaps else None
        started = _start_bulk(
            rt, net, lineup.flow_stacks, flows, work, seconds, 7000, tag, run.scale, transfers, env, pins=run.pins
        )
        live = _live(run, exp, part, lineup.name, net, started, t_wall0, extra_tags)

        def done() -> bool:
            return finite and all(p is not None and p.poll() is not None for s in started for p in s.procs)

        watch = hostwatch.HostWatch(net)
        _watch(run, live, seconds, t_mono0, done)
        host = watch.finish()
    finally:
        rt.stop_all()
    live.close()
    flow_results = _flow_results(run, live, started, seconds, run.warmup_of(seconds))
    res = StackResult(stack=lineup.name, protocol=lineup.protocol, flows=flow_results)
    _flow_extras(res, started, host)
    for f in flow_results:  # what the receiving host's sockets dropped (all of its flows')
        before, after = rcvbuf0.get(f.dst), udp_rcvbuf_errors(net, f.dst)
        f.rcvbuf_drops = after - before if before is not None and after is not None else None
    if pcaps:
        control = lineup.under_test.control_net if lineup.under_test else None
        res.capture = capture.summarize(pcaps, net, {s.flow.name: s.flow.src for s in started}, control)
        if "separated" in res.capture:
            res.metrics["paths_separated"] = float(res.capture["separated"])
        run.log(f"     capture: {_capture_line(res.capture)}")
    res.host = _host_check(run, net, lineup.name, host, started)
    for f in flow_results:
        cap = topo.bottleneck_bps(f.src, f.dst, scale=run.scale)
        f.capacity_mbps = cap / 1e6 if cap else None
        if cap and f.series_1s:
            ts, xs = zip(*f.series_1s, strict=True)
            f.time_to_90pct_s = metrics.convergence_time(list(ts), list(xs), cap / 1e6)
    res.metrics = _metrics(run, flow_results, run.warmup_of(seconds)) | res.metrics
    m = res.metrics
    run.log(
        "     "
        + ", ".join(f"{f.name} {f.mean_mbps:.1f} Mb/s" for f in flow_results)
        + (f"; Jain {m['jain_index']:.3f}" if m.get("jain_index") is not None else "")
        + (f"; stability {m['stability_index']:.3f}" if m.get("stability_index") is not None else "")
        + "".join(f"; {f.name} loss {f.loss_pct:.3f} %" for f in flow_results if f.loss_pct is not None)
        + "".join(f"; {f.name} socket drops {f.rcvbuf_drops}" for f in flow_results if f.rcvbuf_drops)
        + "".join(f"; {f.name} exact: {f.exact}" for f in flow_results if f.exact is not None)
    )
    return res


def _capture_line(c: dict[str, object]) -> str:
    ifaces = c.get("interfaces", {})
    assert isinstance(ifaces, dict)
    line = ", ".join(f"{k}: {v['udp_data']} DATA, {v['udp_other']} UDP ctl, {v['tcp']} TCP" for k, v in ifaces.items())
    if "separated" in c:
        line += f"; paths separated: {c['separated']}"
    return line


def _sweep(
    run: Run, exp: Experiment, part: Part, net: Network, lineup: Lineup, work: Path, topo: Topology
) -> StackResult:
    """The part once per value of its sweep, every flow's option set to it, on the same network."""
    assert part.sweep is not None
    sw = part.sweep
    res = StackResult(stack=lineup.name, protocol=lineup.protocol)
    for value in sw.values:
        flows = [replace(f, options=f.options.with_option(sw.option, value)) for f in part.flows]
        run.log(f"     {sw.option} = {value:g} (x scale {run.scale:g})")
        tag = f"{lineup.name}-{sw.option}-{value:g}"
        one = _bulk(run, exp, part, net, lineup, work, topo, flows, sw.seconds, tag, {sw.option: f"{value:g}"})
        res.sweep.append(SweepPoint(value, one.flows, one.host))
        if one.capture and res.capture is None:
            res.capture = one.capture
    return res


def _metrics(run: Run, flows: list[FlowResult], warmup: float | None = None) -> dict[str, float | None]:
    """The part's metrics (udtharness.metrics: one definition for simulator, testbed and suite)."""
    means = [f.mean_mbps for f in flows]
    m: dict[str, float | None] = {"aggregate_mbps": sum(means)}
    if means:
        m["min_flow_mbps"] = min(means)
    if len(means) > 1:
        m["jain_index"] = metrics.jain_index(means) if sum(means) > 0 else None
        # The throughput of a join of the streams: each advances at the slowest's pace.
        m["join_mbps"] = len(means) * min(means)
    try:
        w = run.warmup if warmup is None else warmup
        m["stability_index"] = metrics.stability_index([[x for t, x in f.series_1s if t > w] for f in flows])
    except ValueError:
        m["stability_index"] = None
    return m


def _short_tcp(run: Run, exp: Experiment, part: Part, net: Network, stack: Stack, work: Path) -> StackResult:
    assert part.short_tcp is not None
    spec = part.short_tcp
    warm = run.short_warmup()
    # The 1 MB flows are RTT-bound (slow start over 110 ms), so their throughput does not
    # shrink with SCALE; their number does, to keep their share of the link: SC'04's 5 at a
    # time give about its 69 Mb/s of 1 Gb/s (7 %), so 5 x scale (at least 1) at a scale.
    workers = max(1, round(spec.workers * run.scale))
    res = StackResult(stack=stack.name, protocol=stack.protocol, short_tcp_workers=workers, short_tcp_cc=spec.cc)
    for n in spec.bulk_flows:
        rt = run.runtime(net)
        tag = f"n{n}"
        seconds = run.duration + warm
        flows, transfers = short_tcp_bulk(
            spec, n, stack, net, run.scale, seconds, work / f"{stack.name}-{tag}", run.udt_buffers
        )
        host = None
        short_out = work / f"{stack.name}-{tag}-short.json"
        nic0 = nic_dropped(net, spec.src)
        t_wall0, t_mono0 = time.time(), time.monotonic()
        try:
            bulk_stacks = {f.name: stack for f in flows}
            started = _start_bulk(
                rt,
                net,
                bulk_stacks,
                flows,
                work,
                seconds,
                7100,
                f"{stack.name}-{tag}",
                run.scale,
                transfers,
                pins=run.pins,
            )
            live = _live(run, exp, part, stack.name, net, started, t_wall0, {"bulk_flows": str(n)})
            watch = hostwatch.HostWatch(net)
            _watch(run, live, warm, t_mono0)
            py = [sys.executable, "-m", "udtbed.probe"]
            sink = ["tcp-sink", "--port", "6000", "--seconds", str(run.duration + 30)]
            rt.spawn(spec.dst, py + sink, stdout=work / f"{stack.name}-{tag}-sink.json", cpus=run.seat("short", "sink"))
            time.sleep(0.3)
            short_argv = ["tcp-short", "--dst", net.address(spec.dst), "--port", "6000", "--workers", str(workers)]
            short_argv += ["--count", str(spec.count), "--size", str(spec.size), "--seconds", str(run.duration)]
            short_argv += ["--cc", spec.cc]
            short_log = work / f"{stack.name}-{tag}-short.log"
            short = rt.spawn(
                spec.src, py + short_argv, stdout=short_out, stderr=short_log, cpus=run.seat("short", "driver")
            )
            _watch(run, live, run.duration, time.monotonic())
            short.wait(timeout=60)
            host = watch.finish()
        finally:
            rt.stop_all()
        live.close()
        try:
            r = json.loads(short_out.read_text().splitlines()[-1])
        except (OSError, IndexError, json.JSONDecodeError):
            r = {"aggregate_mbps": 0.0, "flows": []}
        bulk = _flow_results(run, live, started, run.duration + warm)
        nic1 = nic_dropped(net, spec.src)
        nic = nic1 - nic0 if nic0 is not None and nic1 is not None else None
        run.influx.write(
            "short_tcp",
            _tags(run, exp, part, stack.name, "short") | {"bulk_flows": str(n)},
            {"aggregate_mbps": r["aggregate_mbps"], "flows": len(r["flows"])},
        )
        res.points.append(
            ShortTcpPoint(
                bulk_flows=n,
                short_aggregate_mbps=float(r["aggregate_mbps"]),
                short_flows=len(r["flows"]),
                bulk_mean_mbps=[f.mean_mbps for f in bulk],
                bulk_series_1s={f.name: f.series_1s for f in bulk},
                host=_host_check(run, net, stack.name, host, started),
                nic_dropped=nic,
            )
        )
        run.log(
            f"     {n:2d} bulk {stack.name}: short TCP aggregate {r['aggregate_mbps']:.1f} Mb/s "
            f"({len(r['flows'])} flows), bulk total {sum(f.mean_mbps for f in bulk):.1f} Mb/s"
            + (f", the senders' NIC dropped {nic} packets" if nic is not None else "")
        )
    res.metrics = {"short_tcp_ratio": short_tcp_ratio(res.points)}
    return res


def short_tcp_bulk(
    spec: ShortTcp,
    n: int,
    stack: Stack,
    net: Network,
    scale: float,
    seconds: float,
    base: Path,
    buffers: str = "path",
) -> tuple[list[Flow], dict[str, Transfer]]:
    """A ``short_tcp`` point's ``n`` bulk flows and their settings at the run's scale (the window
    ``buffers`` says, ``bulk_udp_buffer``), as a bulk part's flows get theirs (:func:`transfer_for`)."""
    flows = [Flow(f"bulk{j}", spec.src, spec.dst, options=spec.bulk) for j in range(n)]
    return flows, {
        f.name: transfer_for(f, stack, net, scale, seconds, Path(f"{base}-{f.name}"), buffers) for f in flows
    }


def short_tcp_ratio(points: list[ShortTcpPoint]) -> float | None:
    """The short flows' aggregate beside the most bulk flows over that beside the fewest (the
    figure comparable across scales: SC'04 69 -> 48 Mb/s, 0.70; SABUL Table 2 82 -> 32, 0.39)."""
    if len(points) < 2:
        return None
    fewest = min(points, key=lambda p: p.bulk_flows)
    most = max(points, key=lambda p: p.bulk_flows)
    return most.short_aggregate_mbps / fewest.short_aggregate_mbps if fewest.short_aggregate_mbps else None
