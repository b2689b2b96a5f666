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

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from udtconf import metrics

from . import hostwatch
from .bands import judge_all
from .calibrate import as_json, calibrate
from .experiment import Experiment, Flow, Part
from .hostwatch import HostReport
from .influx import InfluxWriter
from .live import LiveWatch, WatchedFlow, write_calibration
from .network import Network
from .results import ExperimentResult, FlowResult, PartResult, ShortTcpPoint, StackResult
from .runtime import HostRuntime, NamespaceRuntime
from .stacks import Role, Stack, all_stacks, resample
from .topology import Topology
from .topology import load as load_topology

# Planned seconds around a stack's run of a part (start, stop, parse), for the progress's ETA.
STACK_OVERHEAD_S = 2.0
CALIBRATION_S = 8.0


class Reporter(Protocol):
    """Where a run reports its progress (udtconf.progress.Progress fits)."""

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
    ):
        self.outdir, self.scale, self.duration, self.backend = outdir, scale, duration, backend
        self.influx, self.run_id, self.on_cal_fail = influx, run_id, on_calibration_fail
        self.progress: Reporter = progress or PlainReporter()
        self.rtt_tol_ms, self.rate_tol = rtt_tol_ms, rate_tol
        self.raw = outdir / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.host_runtime = host_runtime

    def log(self, line: str) -> None:
        self.progress.log(line)

    def runtime(self, net: Network) -> HostRuntime:
        """Where the stacks run on ``net``'s hosts (calibration always uses NamespaceRuntime)."""
        return self.host_runtime(net)

    @property
    def warmup(self) -> float:
        """Seconds left out of the summaries: the paper's 7.5 s to 90 %, at most 40 % of the run."""
        return min(8.0, 0.4 * self.duration)

    def short_warmup(self) -> float:
        """Seconds the bulk flows of a short-TCP point run before the short flows start."""
        return min(5.0, self.duration / 3)

    def planned_seconds(self, part: Part, n_stacks: int) -> float:
        """The part's planned wall time (calibration and every stack), for the progress's ETA."""
        per_stack = self.duration + STACK_OVERHEAD_S
        if part.short_tcp:
            per_stack = len(part.short_tcp.bulk_flows) * (self.duration + self.short_warmup() + STACK_OVERHEAD_S)
        return CALIBRATION_S + n_stacks * per_stack


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
    out = [
        Lineup(s.name, s.protocol, {f.name: pinned[f.stack] if f.stack else s for f in part.flows}, s)
        for s in stacks
        if part.runs(s.protocol)
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
    with Network(topo, scale=run.scale, backend=run.backend, workdir=work) as net:
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
            links={str(k): v for k, v in net.link_specs.items()},
            calibration=as_json(cals),
            calibration_ok=all(c.ok for c in cals),
            paper=part.paper,
        )
        if not pres.calibration_ok:
            msg = (
                f"calibration of {topo.name} is off beyond tolerance (RTT ±{run.rtt_tol_ms} ms, "
                f"rate ±{run.rate_tol * 100:.0f}%) at scale {run.scale}"
            )
            if run.on_cal_fail == "refuse":
                raise CalibrationError(msg + "; lower SCALE or pass CALIBRATION=flag to run anyway")
            run.log(f"  WARNING: {msg}; flagged, running anyway")
        for lineup in runs:
            label = f"{exp.name} / {part.label} / {lineup.name}"
            run.progress.step(label, run.planned_seconds(part, 1) - CALIBRATION_S)
            beside = sorted({s.name for s in lineup.flow_stacks.values()} - {lineup.name})
            run.log(f"  -- {lineup.name}: {run.duration:.0f} s" + (f" (beside {', '.join(beside)})" if beside else ""))
            if part.short_tcp:
                assert lineup.under_test is not None
                res = _short_tcp(run, exp, part, net, lineup.under_test, work)
            else:
                res = _bulk(run, exp, part, net, lineup, work, topo)
            res.verdicts = judge_all(part, res, run.scale, run.warmup, run.duration)
            for v in res.verdicts:
                run.log(f"     {v.line()}")
            pres.stacks[lineup.name] = res
        pres.link_stats = {str(k): v for k, v in net.link_stats().items()}
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
) -> list[Started]:
    """Every flow's listening end first (:attr:`Stack.listener`: the receiver, or SABUL's
    sender), then each flow's other end at its ``start`` (seconds after the listeners had half a
    second to bind), connecting to the listener's host; ``offset_s`` is when that was, on that
    clock. ``stacks``: each flow's stack, by flow name."""
    ports = {f.name: port0 + i for i, f in enumerate(flows)}

    def files(f: Flow) -> str:
        return str(work / f"{tag}-{f.name}")

    def spawn(f: Flow, role: Role) -> None:
        stack = stacks[f.name]
        addr = net.address(f.dst if stack.listener == "receiver" else f.src)
        if role == "receiver":
            argv, stdout = stack.receiver(addr, ports[f.name], Path(files(f) + ".stats"))
            rt.spawn(f.dst, argv, stdout=stdout, stderr=Path(files(f) + ".recv.log"))
        else:
            argv = stack.sender(addr, ports[f.name], seconds, stats=Path(files(f) + ".send.stats"), scale=scale)
            rt.spawn(f.src, argv, stderr=Path(files(f) + ".send.log"))

    for f in flows:
        spawn(f, stacks[f.name].listener)
    time.sleep(0.5)
    t0 = time.monotonic()
    started = []
    for f in sorted(flows, key=lambda f: f.start):
        while time.monotonic() - t0 < f.start:
            time.sleep(0.05)
        spawn(f, stacks[f.name].connector())
        base = files(f)
        started.append(
            Started(f, stacks[f.name], Path(base + ".stats"), Path(base + ".send.stats"), time.monotonic() - t0)
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


def _watch(run: Run, live: LiveWatch, seconds: float, t_mono0: float) -> None:
    """Wait until ``seconds`` after ``t_mono0``, streaming every file's new lines."""
    end = t_mono0 + seconds
    last = time.monotonic()
    while True:
        live.poll()
        now = time.monotonic()
        run.progress.advance(now - last)
        last = now
        if now >= end:
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


def _flow_results(run: Run, live: LiveWatch, started: list[Started], seconds: float) -> list[FlowResult]:
    out = []
    for s in started:
        samples = live.samples(s.flow.name)
        series = resample(samples, s.offset_s, 1.0, seconds)
        steady = [x for t, x in series if t > run.warmup]
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
            )
        )
    return out


def _bulk(
    run: Run, exp: Experiment, part: Part, net: Network, lineup: Lineup, work: Path, topo: Topology
) -> StackResult:
    host = None
    rt = run.runtime(net)
    t_wall0, t_mono0 = time.time(), time.monotonic()
    try:
        flows = list(part.flows)
        tag = f"{lineup.name}-bulk"
        started = _start_bulk(rt, net, lineup.flow_stacks, flows, work, run.duration, 7000, tag, run.scale)
        live = _live(run, exp, part, lineup.name, net, started, t_wall0)
        watch = hostwatch.HostWatch(net)
        _watch(run, live, run.duration, t_mono0)
        host = watch.finish()
    finally:
        rt.stop_all()
    live.close()
    flow_results = _flow_results(run, live, started, run.duration)
    res = StackResult(stack=lineup.name, protocol=lineup.protocol, flows=flow_results)
    res.host = _host_check(run, net, lineup.name, host, started)
    for f in flow_results:
        cap = topo.bottleneck_bps(f.src, f.dst, scale=run.scale)
        f.capacity_mbps = cap / 1e6 if cap else None
        if cap and f.series_1s:
            ts, xs = zip(*f.series_1s, strict=True)
            f.time_to_90pct_s = metrics.convergence_time(list(ts), list(xs), cap / 1e6)
    res.metrics = _metrics(run, flow_results)
    m = res.metrics
    run.log(
        "     "
        + ", ".join(f"{f.name} {f.mean_mbps:.1f} Mb/s" for f in flow_results)
        + (f"; Jain {m['jain_index']:.3f}" if m.get("jain_index") is not None else "")
        + (f"; stability {m['stability_index']:.3f}" if m.get("stability_index") is not None else "")
    )
    return res


def _metrics(run: Run, flows: list[FlowResult]) -> dict[str, float | None]:
    """The part's metrics (udtconf.metrics: one definition for simulator, testbed and suite)."""
    means = [f.mean_mbps for f in flows]
    m: dict[str, float | None] = {"aggregate_mbps": sum(means)}
    if means:
        m["min_flow_mbps"] = min(means)
    if len(means) > 1:
        m["jain_index"] = metrics.jain_index(means) if sum(means) > 0 else None
        # The throughput of a join of the streams: each advances at the slowest's pace.
        m["join_mbps"] = len(means) * min(means)
    try:
        m["stability_index"] = metrics.stability_index([[x for t, x in f.series_1s if t > run.warmup] for f in flows])
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
    res = StackResult(stack=stack.name, protocol=stack.protocol, short_tcp_workers=workers)
    for n in spec.bulk_flows:
        rt = run.runtime(net)
        flows = [Flow(f"bulk{j}", spec.src, spec.dst) for j in range(n)]
        tag = f"n{n}"
        host = None
        short_out = work / f"{stack.name}-{tag}-short.json"
        t_wall0, t_mono0 = time.time(), time.monotonic()
        try:
            bulk_stacks = {f.name: stack for f in flows}
            seconds = run.duration + warm
            started = _start_bulk(rt, net, bulk_stacks, flows, work, seconds, 7100, f"{stack.name}-{tag}", run.scale)
            live = _live(run, exp, part, stack.name, net, started, t_wall0, {"bulk_flows": str(n)})
            watch = hostwatch.HostWatch(net)
            _watch(run, live, warm, t_mono0)
            py = [sys.executable, "-m", "udtbed.probe"]
            sink = ["tcp-sink", "--port", "6000", "--seconds", str(run.duration + 30)]
            rt.spawn(spec.dst, py + sink, stdout=work / f"{stack.name}-{tag}-sink.json")
            time.sleep(0.3)
            short_argv = ["tcp-short", "--dst", net.address(spec.dst), "--port", "6000", "--workers", str(workers)]
            short_argv += ["--count", str(spec.count), "--size", str(spec.size), "--seconds", str(run.duration)]
            short = rt.spawn(spec.src, py + short_argv, stdout=short_out, stderr=work / f"{stack.name}-{tag}-short.log")
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
            )
        )
        run.log(
            f"     {n:2d} bulk {stack.name}: short TCP aggregate {r['aggregate_mbps']:.1f} Mb/s "
            f"({len(r['flows'])} flows), bulk total {sum(f.mean_mbps for f in bulk):.1f} Mb/s"
        )
    res.metrics = {"short_tcp_ratio": short_tcp_ratio(res.points)}
    return res


def short_tcp_ratio(points: list[ShortTcpPoint]) -> float | None:
    """The short flows' aggregate beside the most bulk flows over that beside the fewest (the
    figure comparable across scales: SC'04 69 -> 48 Mb/s, 0.70; SABUL Table 2 82 -> 32, 0.39)."""
    if len(points) < 2:
        return None
    fewest = min(points, key=lambda p: p.bulk_flows)
    most = max(points, key=lambda p: p.bulk_flows)
    return most.short_aggregate_mbps / fewest.short_aggregate_mbps if fewest.short_aggregate_mbps else None
