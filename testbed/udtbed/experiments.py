"""The papers' experiments and how one runs: build → calibrate → each stack in turn.

An experiment has parts, each on one topology with a set of bulk flows (or, for TCP
friendliness, bulk flows plus short TCP flows). For every stack the part starts the
receivers, then the senders, streams the receivers' progress to InfluxDB while it runs,
stops everything after the duration and keeps per-flow series and summaries. Paper numbers
are Mb/s at the papers' rates; the results show them × scale beside ours.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from udtconf import metrics

from . import hostwatch, live
from .calibrate import as_json, calibrate
from .influx import InfluxWriter
from .network import Network
from .runtime import HostRuntime, NamespaceRuntime
from .stacks import Sample, Stack, resample
from .topology import Topology, load

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
# Concurrent 1 MB TCP flows in the friendliness experiment at scale 1 (Fig. 13).
SHORT_TCP_WORKERS = 5


@dataclass
class Flow:
    name: str
    src: str
    dst: str
    start: float = 0.0


@dataclass
class Part:
    label: str
    topology: str
    flows: list[Flow]
    paper: dict[str, dict[str, float]] = field(default_factory=dict)  # stack kind -> flow -> Mb/s
    short_tcp: list[int] | None = None  # friendliness: bulk-flow counts to try


@dataclass
class Experiment:
    name: str
    title: str
    figure: str
    parts: list[Part]
    note: str = ""


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in [
        Experiment(
            "efficiency",
            "Single-flow efficiency on three paths",
            "SC'04 Fig. 11",
            [
                Part("chicago-local", "chicago-local", [Flow("local", "chicago", "local")], {"udt": {"local": 940}}),
                Part(
                    "chicago-ottawa", "chicago-ottawa", [Flow("ottawa", "chicago", "ottawa")], {"udt": {"ottawa": 580}}
                ),
                Part(
                    "chicago-amsterdam",
                    "chicago-amsterdam",
                    [Flow("amsterdam", "chicago", "amsterdam")],
                    {"udt": {"amsterdam": 940}, "tcp": {"amsterdam": 128}},
                ),
            ],
            "Paper: UDT 940 / 580 / 940 Mb/s; TCP ~128 Mb/s to Amsterdam after tuning.",
        ),
        Experiment(
            "fairness",
            "Three flows sharing one 1 Gb/s link",
            "SC'04 Fig. 12",
            [
                Part(
                    "three-site",
                    "three-site",
                    [
                        Flow("local", "chicago", "local"),
                        Flow("ottawa", "chicago", "ottawa"),
                        Flow("amsterdam", "chicago", "amsterdam"),
                    ],
                    {
                        "udt": {"local": 325, "ottawa": 325, "amsterdam": 325},
                        "tcp": {"local": 754, "ottawa": 151, "amsterdam": 27},
                    },
                ),
            ],
            "Paper: UDT ~325 Mb/s each; TCP 754 / 151 / 27 Mb/s.",
        ),
        Experiment(
            "join",
            "Streaming join: A (100 ms) and B (1 ms) into C",
            "SC'04 Fig. 1, §5.3",
            [
                Part(
                    "streaming-join",
                    "streaming-join",
                    [Flow("a-c", "a", "c"), Flow("b-c", "b", "c")],
                    {"tcp": {"a-c": 3.52, "b-c": 863}, "udt": {"join": 700}},
                ),
            ],
            "Paper: TCP 3.52 / 863 Mb/s (join = 2 x slower = 7 Mb/s); UDT join throughput 600-800 Mb/s.",
        ),
        Experiment(
            "friendliness",
            "1 MB TCP flows against 0..10 bulk flows, Chicago-Amsterdam",
            "SC'04 Fig. 13",
            [
                Part(
                    "chicago-amsterdam",
                    "chicago-amsterdam",
                    [],
                    {"short_tcp": {"0": 69, "10": 48}},
                    short_tcp=[0, 1, 5, 10],
                ),
            ],
            "Paper: aggregate of the short TCP flows falls from 69 Mb/s (no UDT) to 48 Mb/s (10 UDT).",
        ),
    ]
}


class Run:
    """Shared state of one testbed run: where results go, scale, influx, logging."""

    def __init__(
        self,
        outdir: Path,
        scale: float,
        duration: float,
        backend: str,
        influx: InfluxWriter,
        run_id: str,
        on_calibration_fail: str = "refuse",
        log: Callable[[str], None] = print,
        rtt_tol_ms: float = 1.0,
        rate_tol: float = 0.02,
        host_runtime: Callable[[Network], HostRuntime] = NamespaceRuntime,
    ):
        self.outdir, self.scale, self.duration, self.backend = outdir, scale, duration, backend
        self.influx, self.run_id, self.on_cal_fail, self.log = influx, run_id, on_calibration_fail, log
        self.rtt_tol_ms, self.rate_tol = rtt_tol_ms, rate_tol
        self.raw = outdir / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.host_runtime = host_runtime

    def runtime(self, net: Network) -> HostRuntime:
        """Where the stacks run on ``net``'s hosts (calibration always uses NamespaceRuntime)."""
        return self.host_runtime(net)

    @property
    def warmup(self) -> float:
        """Seconds left out of the summaries: the paper's 7.5 s to 90 %, at most 40 % of the run."""
        return min(8.0, 0.4 * self.duration)


class CalibrationError(RuntimeError):
    pass


def run_experiment(run: Run, exp: Experiment, stacks: list[Stack]) -> dict:
    result: dict = {
        "experiment": exp.name,
        "title": exp.title,
        "figure": exp.figure,
        "note": exp.note,
        "scale": run.scale,
        "duration_s": run.duration,
        "warmup_s": run.warmup,
        "backend": run.backend,
        "parts": [],
    }
    for part in exp.parts:
        topo = load(TOPOLOGIES / f"{part.topology}.toml")
        run.log(f"== {exp.name} / {part.label}: building {topo.name} (scale {run.scale}, {run.backend})")
        work = run.raw / exp.name / part.label
        work.mkdir(parents=True, exist_ok=True)
        with Network(topo, scale=run.scale, backend=run.backend, workdir=work) as net:
            pairs = [(f.src, f.dst) for f in part.flows] or [("chicago", "amsterdam")]
            cals = calibrate(net, pairs, run.rtt_tol_ms, run.rate_tol, log=run.log)
            pres = {
                "label": part.label,
                "topology": topo.name,
                "topology_file": str(topo.path.name),
                "topology_paper": topo.paper,
                "links": net.link_specs,
                "calibration": as_json(cals),
                "calibration_ok": all(c.ok for c in cals),
                "paper": part.paper,
                "stacks": {},
            }
            if not pres["calibration_ok"]:
                msg = (
                    f"calibration of {topo.name} is off beyond tolerance (RTT ±{run.rtt_tol_ms} ms, "
                    f"rate ±{run.rate_tol * 100:.0f}%) at scale {run.scale}"
                )
                if run.on_cal_fail == "refuse":
                    raise CalibrationError(msg + "; lower SCALE or pass CALIBRATION=flag to run anyway")
                run.log(f"  WARNING: {msg}; flagged, running anyway")
            for stack in stacks:
                run.log(f"  -- {stack.name}: {run.duration:.0f} s")
                if part.short_tcp is not None:
                    pres["stacks"][stack.name] = _friendliness(run, exp, part, net, stack, work)
                else:
                    pres["stacks"][stack.name] = _bulk(run, exp, part, net, stack, work, topo)
            pres["link_stats"] = net.link_stats()
        result["parts"].append(pres)
    return result


def _tags(run: Run, exp: Experiment, part: Part, stack: Stack, flow: str) -> dict[str, str]:
    return {
        "run": run.run_id,
        "experiment": exp.name,
        "part": part.label,
        "stack": stack.name,
        "flow": flow,
        "scale": str(run.scale),
        "backend": run.backend,
    }


def _start_bulk(
    rt: HostRuntime, net: Network, stack: Stack, flows: list[Flow], work: Path, seconds: float, port0: int, tag: str
) -> tuple[list[tuple[Flow, Path, float]], list]:
    receivers, started = [], []
    for i, f in enumerate(flows):
        stats = work / f"{stack.name}-{tag}-{f.name}.stats"
        argv, stdout = stack.receiver(port0 + i, stats)
        rt.spawn(f.dst, argv, stdout=stdout, stderr=work / f"{stack.name}-{tag}-{f.name}.recv.log")
        receivers.append((f, stats))
    time.sleep(0.5)
    t0 = time.monotonic()
    senders = []
    for i, (f, stats) in enumerate(sorted(receivers, key=lambda r: r[0].start)):
        while time.monotonic() - t0 < f.start:
            time.sleep(0.05)
        idx = flows.index(f)
        senders.append(
            rt.spawn(
                f.src,
                stack.sender(net.address(f.dst), port0 + idx, seconds, stats=_send_stats(stack, work, tag, f)),
                stderr=work / f"{stack.name}-{tag}-{f.name}.send.log",
            )
        )
        started.append((f, stats, time.monotonic() - t0))
    return started, senders


def _send_stats(stack: Stack, work: Path, tag: str, f: Flow) -> Path:
    return work / f"{stack.name}-{tag}-{f.name}.send.stats"


def _host_check(
    run: Run, net: Network, stack: Stack, host: dict | None, work: Path, tag: str, flows: list[Flow]
) -> dict | None:
    """The part's CPU and emulator timing (:mod:`hostwatch`), with the UDT senders' pacing
    against the bottleneck and the flags that say the result is not the protocol's alone."""
    if host is None:
        return None
    if stack.kind == "udt":
        host["sender_pacing"] = hostwatch.sender_pacing(
            {f.name: _send_stats(stack, work, tag, f) for f in flows},
            {f.name: net.topo.bottleneck_bps(f.src, f.dst, scale=run.scale) for f in flows},
        )
    seen_by_receivers = {
        (f"l{h.link.index}", "a_to_b" if h.frm == h.link.a else "b_to_a")
        for f in flows
        for h in net.topo.timing_hops(f.src, f.dst)
    }
    hostwatch.mark_before_bottleneck(host, seen_by_receivers)
    host["flags"] = hostwatch.flags(host, host.get("sender_pacing"))
    for fl in host["flags"]:
        run.log(f"     TIMING {stack.name}: {fl}")
    return host


def _watch(
    run: Run,
    stack: Stack,
    started,
    seconds: float,
    tags: Callable[[str], dict],
    t_wall0: float,
    t_mono0: float,
    net: Network | None = None,
) -> None:
    """Wait ``seconds``, streaming the receivers', UDT senders' and emulators' new stats to InfluxDB."""
    # Until every Stack has its own parse_line: a UDT line is cumulative, an iperf3 line one interval.
    total = 0

    def parse_line(text: str) -> Sample | None:
        nonlocal total
        s = stack.parse(text)
        if not s or stack.kind == "udt":
            return s[-1] if s else None
        total += s[-1].bytes
        return Sample(s[-1].t, total)

    flows = [
        live.WatchedFlow(
            f.name,
            stats,
            getattr(stack, "parse_line", parse_line),
            off,
            stats.with_suffix(".send.stats") if stack.kind == "udt" else None,
        )
        for f, stats, off in started
    ]
    watch = live.LiveWatch(run.influx, tags, net, flows, t_wall0)
    end = t_mono0 + seconds
    while (now := time.monotonic()) < end:
        watch.poll()
        time.sleep(min(0.5, max(0.0, end - now)))
    watch.close()


def _flow_results(run: Run, stack: Stack, started, seconds: float) -> list[dict]:
    out = []
    for f, stats, off in started:
        samples = stack.parse(stats.read_text()) if stats.exists() else []
        series = resample(samples, off, 1.0, seconds)
        steady = [x for t, x in series if t > run.warmup]
        out.append(
            {
                "name": f.name,
                "src": f.src,
                "dst": f.dst,
                "start_s": f.start,
                "series_1s": series,
                "series_raw": [[round(off + s.t, 3), s.bytes] for s in samples],
                "mean_mbps": sum(steady) / len(steady) if steady else 0.0,
                "bytes": samples[-1].bytes if samples else 0,
            }
        )
    return out


def _bulk(run: Run, exp: Experiment, part: Part, net: Network, stack: Stack, work: Path, topo: Topology) -> dict:
    host = None
    rt = run.runtime(net)
    try:
        t_wall0, t_mono0 = time.time(), time.monotonic()
        started, _ = _start_bulk(rt, net, stack, part.flows, work, run.duration, 7000, "bulk")
        watch = hostwatch.HostWatch(net)
        _watch(run, stack, started, run.duration, lambda fl: _tags(run, exp, part, stack, fl), t_wall0, t_mono0, net)
        host = watch.finish()
    finally:
        rt.stop_all()
    flows = _flow_results(run, stack, started, run.duration)
    means = [f["mean_mbps"] for f in flows]
    res: dict = {
        "kind": stack.kind,
        "flows": flows,
        "metrics": {},
        "host": _host_check(run, net, stack, host, work, "bulk", part.flows),
    }
    m = res["metrics"]
    for f in flows:
        cap = topo.bottleneck_bps(f["src"], f["dst"], scale=run.scale)
        f["capacity_mbps"] = cap / 1e6 if cap else None
        if cap and f["series_1s"]:
            ts, xs = zip(*f["series_1s"])
            f["time_to_90pct_s"] = metrics.convergence_time(ts, xs, cap / 1e6)
    if len(means) > 1 and sum(means) > 0:
        m["jain_index"] = metrics.jain_index(means)
    try:
        m["stability_index"] = metrics.stability_index(
            [[x for t, x in f["series_1s"] if t > run.warmup] for f in flows]
        )
    except ValueError as e:
        m["stability_index"] = None
        m["stability_note"] = str(e)
    m["aggregate_mbps"] = sum(means)
    if exp.name == "join":
        m["join_mbps"] = 2 * min(means) if means else 0.0
    run.log(
        "     "
        + ", ".join(f"{f['name']} {f['mean_mbps']:.1f} Mb/s" for f in flows)
        + (f"; Jain {m['jain_index']:.3f}" if "jain_index" in m else "")
        + (f"; stability {m['stability_index']:.3f}" if m.get("stability_index") is not None else "")
    )
    return res


def _friendliness(run: Run, exp: Experiment, part: Part, net: Network, stack: Stack, work: Path) -> dict:
    points = []
    warm = min(5.0, run.duration / 3)
    # The 1 MB flows are RTT-bound (slow start over 110 ms), so their throughput does not
    # shrink with SCALE; their number does, to keep their share of the link: 5 at a time
    # give about the paper's 69 Mb/s of 1 Gb/s (7 %), so 5 x scale (at least 1) at a scale.
    workers = max(1, round(SHORT_TCP_WORKERS * run.scale))
    for n in part.short_tcp or []:
        rt = run.runtime(net)
        flows = [Flow(f"bulk{j}", "chicago", "amsterdam") for j in range(n)]
        tag = f"n{n}"
        host = None
        try:
            t_wall0, t_mono0 = time.time(), time.monotonic()
            started, _ = _start_bulk(rt, net, stack, flows, work, run.duration + warm, 7100, tag)
            watch = hostwatch.HostWatch(net)
            tags = lambda fl: _tags(run, exp, part, stack, fl) | {"bulk_flows": str(n)}  # noqa: E731
            _watch(run, stack, started, warm, tags, t_wall0, t_mono0, net)
            py = [sys.executable, "-m", "udtbed.probe"]
            rt.spawn(
                "amsterdam",
                py + ["tcp-sink", "--port", "6000", "--seconds", str(run.duration + 30)],
                stdout=work / f"{stack.name}-{tag}-sink.json",
            )
            time.sleep(0.3)
            short_out = work / f"{stack.name}-{tag}-short.json"
            short = rt.spawn(
                "chicago",
                py
                + [
                    "tcp-short",
                    "--dst",
                    net.address("amsterdam"),
                    "--port",
                    "6000",
                    "--workers",
                    str(workers),
                    "--count",
                    "500",
                    "--seconds",
                    str(run.duration),
                ],
                stdout=short_out,
                stderr=work / f"{stack.name}-{tag}-short.log",
            )
            _watch(run, stack, started, run.duration, tags, t_wall0, time.monotonic(), net)
            short.wait(timeout=60)
            host = watch.finish()
        finally:
            rt.stop_all()
        try:
            r = json.loads(short_out.read_text().splitlines()[-1])
        except (OSError, IndexError, json.JSONDecodeError):
            r = {"aggregate_mbps": 0.0, "flows": []}
        bulk = _flow_results(run, stack, started, run.duration + warm)
        run.influx.write(
            "short_tcp",
            _tags(run, exp, part, stack, "short") | {"bulk_flows": str(n)},
            {"aggregate_mbps": r["aggregate_mbps"], "flows": len(r["flows"])},
        )
        points.append(
            {
                "bulk_flows": n,
                "short_aggregate_mbps": r["aggregate_mbps"],
                "short_flows": len(r["flows"]),
                "bulk_mean_mbps": [f["mean_mbps"] for f in bulk],
                "bulk_series_1s": {f["name"]: f["series_1s"] for f in bulk},
                "host": _host_check(run, net, stack, host, work, tag, flows),
            }
        )
        run.log(
            f"     {n:2d} bulk {stack.name}: short TCP aggregate {r['aggregate_mbps']:.1f} Mb/s "
            f"({len(r['flows'])} flows), bulk total {sum(f['mean_mbps'] for f in bulk):.1f} Mb/s"
        )
    base = points[0]["short_aggregate_mbps"] if points else 0
    return {
        "kind": stack.kind,
        "points": points,
        "short_tcp_workers": workers,
        "metrics": {
            "short_aggregate_ratio_last_over_first": (points[-1]["short_aggregate_mbps"] / base) if base else None
        },
    }
