"""The papers' NS-2 figures, simulated with our real protocol code (docs/simulator.md).

A scenario file (``experiments/sim/*.toml``) describes one figure as data: a bottleneck, the
series drawn on the figure (each a set of flows), the swept parameter and its values, the
metric each run reduces to, and the paper's claims as checks. This module expands a scenario
into run specs, runs them with ``udt-sim`` (``impl/netsim``) in parallel, reduces each run
with ``udtharness.metrics`` (the one implementation the testbed and the suite share), judges the
claims, and writes ``<name>.json`` and ``<name>.png``.

``python -m udtbed simulate [--quick] [--only NAME,...] [--results results/sim]``
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import statistics
import subprocess
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from udtharness import metrics

from .. import REPO

SCENARIOS_DIR = REPO / "experiments" / "sim"
SIMULATOR = REPO / "impl" / "target" / "release" / "udt-sim"
METRICS = ("jain", "stability", "friendliness", "rtt_ratio", "scaling", "series", "share", "short")
# ``queue_bdp``: the bottleneck's queue in BDPs (rate x the longest RTT), for the sensitivity
# sweeps over a queue size the paper does not give.
SWEEPABLE = ("rtt_ms", "count", "rate_mbps", "queue_bdp")
# Wire bytes of a full packet, for the queue sizes the captions give in BDPs.
PACKET_BYTES = 1500
# The simulator's TCP profiles (``tcp_profile``; impl/netsim/src/tcp.rs, ``TcpConfig::profile``):
# today's model, and NS-2 2.26's defaults, which the papers ran.
TCP_PROFILES = ("default", "ns2-2.26")


# A flow's ``cc`` per protocol: UDT's controllers and NS-2 model, SABUL's NS-2 model
# (SABUL-2004-NS2.md); TCP has none.
CC_BY_PROTOCOL: dict[str, tuple[str, ...]] = {"udt": ("udt411", "paper", "ns2-2004"), "sabul": ("ns2-2004",), "tcp": ()}


class ScenarioError(ValueError):
    """A scenario file that cannot be run: says which file, which key and what to write."""


@dataclass(frozen=True)
class Check:
    """One claim of the paper, as a test of the metric's values.

    ``min``/``max`` bound ``series``'s value (``key`` of the metric's values) at every x
    of ``at`` (default: every x); ``below``/``above`` compare it with another series' value
    at the same x, allowing ``margin`` (the spread between seeds); ``grows``/``shrinks``
    compare the value at the last x of ``at`` with the value at its first.
    """

    claim: str
    series: str
    key: str
    at: tuple[float, ...] | None = None
    min: float | None = None
    max: float | None = None
    below: str | None = None
    above: str | None = None
    margin: float = 0.0
    grows: bool = False
    shrinks: bool = False
    # Bounds on value(last x of at) / value(first x of at).
    ratio_min: float | None = None
    ratio_max: float | None = None
    # Judged on the quick (make test) version too; otherwise only on full runs.
    quick: bool = False
    # Shown with its outcome but not counted: a claim no figure of the paper quantifies (SABUL's
    # "acceptable throughput"); its CheckResult has ok None and the judgement "informational".
    informational: bool = False


@dataclass(frozen=True)
class PaperMark:
    """The paper's figure for one value (``key``) of a sweep: a number (``value``) or a band
    (``min``/``max``); :func:`paper_position` says where in the sweep it falls, series by
    series, and the plot draws it."""

    key: str
    label: str
    value: float | None = None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Series:
    label: str
    flows: tuple[dict[str, Any], ...]
    bottleneck: dict[str, Any] = field(default_factory=dict)
    # Successive short transfers beside the flows (``RunSpec.short_flows``).
    short_flows: dict[str, Any] | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    figure: str
    title: str
    setup: str
    claim: str
    metric: str
    x: str | None
    values: tuple[float, ...]
    duration_s: float
    seed: int
    sample_s: float
    warmup_s: float
    bottleneck: dict[str, Any]
    series: tuple[Series, ...]
    checks: tuple[Check, ...]
    quick_values: tuple[float, ...]
    quick_duration_s: float
    quick_warmup_s: float
    note: str = ""
    # Every TCP flow's profile (short transfers and friendliness twins included) unless the
    # flow names its own; None: the simulator's default.
    tcp_profile: str | None = None
    paper: PaperMark | None = None
    # The metric once more with this warm-up (its value as ``<metric>_warmup_<w>s``), so that a
    # claim can be judged with and without the warm-up the paper does not give.
    also_warmup_s: float | None = None


def _fail(path: Path, key: str, msg: str) -> ScenarioError:
    return ScenarioError(f"{path}: {key}: {msg}")


def _floats(path: Path, key: str, v: Any) -> tuple[float, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
        raise _fail(path, key, "must be a non-empty list of numbers, e.g. [1, 10, 100]")
    return tuple(float(x) for x in v)


def load(path: str | Path) -> Scenario:
    """Reads and checks one scenario file."""
    path = Path(path)
    try:
        d = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ScenarioError(f"{path}: {e}") from e
    known = {
        "name", "figure", "title", "setup", "claim", "metric", "x", "values", "duration_s", "seed",
        "sample_s", "warmup_s", "bottleneck", "series", "check", "quick", "note", "short_flows", "tcp_profile", "paper",
        "also_warmup_s",
    }  # fmt: skip
    for k in d:
        if k not in known:
            raise _fail(path, k, f"unknown key; a scenario has {', '.join(sorted(known))}")
    for k in ("name", "figure", "title", "setup", "claim", "metric", "bottleneck", "series"):
        if k not in d:
            raise _fail(path, k, "missing (docs/simulator.md, 'Scenario files')")
    if d["name"] != path.stem:
        raise _fail(path, "name", f"must equal the file's name {path.stem!r}")
    metric = d["metric"]
    if metric not in METRICS:
        raise _fail(path, "metric", f"{metric!r} is not one of {', '.join(METRICS)}")
    x = d.get("x")
    if x is not None and x not in SWEEPABLE:
        raise _fail(path, "x", f"{x!r} cannot be swept: use one of {', '.join(SWEEPABLE)}")
    values = _floats(path, "values", d["values"]) if x is not None else (0.0,)
    if x is None and "values" in d:
        raise _fail(path, "values", "needs x, the parameter the values are for")
    if not isinstance(d["bottleneck"], dict):
        raise _fail(path, "bottleneck", "must be a table, e.g. { rate_mbps = 100, queue = 'max(10, bdp)' }")
    _tcp_profile(path, "tcp_profile", "tcp", d.get("tcp_profile"))
    series_raw = d["series"]
    if not isinstance(series_raw, list) or not series_raw:
        raise _fail(path, "series", "needs at least one [[series]] with a label and flows")
    series = []
    for i, s in enumerate(series_raw):
        short = s.get("short_flows", d.get("short_flows"))
        if not isinstance(s, dict) or "label" not in s or not isinstance(s.get("flows"), list):
            raise _fail(path, f"series[{i}]", "needs a label and a list of flows")
        if not s["flows"] and short is None:
            raise _fail(path, f"series[{i}]", "needs flows (or short_flows)")
        for j, f in enumerate(s["flows"]):
            if not isinstance(f, dict) or f.get("protocol") not in ("udt", "tcp", "sabul"):
                raise _fail(path, f"series[{i}].flows[{j}]", "needs protocol = 'udt', 'tcp' or 'sabul'")
            if "cc" in f and f["cc"] not in CC_BY_PROTOCOL[f["protocol"]]:
                allowed = " or ".join(repr(c) for c in CC_BY_PROTOCOL[f["protocol"]]) or "none"
                raise _fail(
                    path, f"series[{i}].flows[{j}].cc", f"{f['cc']!r} is not a {f['protocol']} model: use {allowed}"
                )
            if "rtt_ms" not in f and x != "rtt_ms":
                raise _fail(path, f"series[{i}].flows[{j}]", "needs rtt_ms (or sweep x = 'rtt_ms')")
            _tcp_profile(path, f"series[{i}].flows[{j}].tcp_profile", f["protocol"], f.get("tcp_profile"))
        if isinstance(short, dict):
            where = f"series[{i}].short_flows" if "short_flows" in s else "short_flows"
            _tcp_profile(path, f"{where}.tcp_profile", short.get("protocol", "tcp"), short.get("tcp_profile"))
        extra = set(s) - {"label", "flows", "bottleneck", "short_flows"}
        if extra:
            raise _fail(path, f"series[{i}]", f"unknown keys {sorted(extra)}")
        series.append(Series(s["label"], tuple(s["flows"]), s.get("bottleneck", {}), short))
    labels = [s.label for s in series]
    if len(set(labels)) != len(labels):
        raise _fail(path, "series", "labels must be distinct")
    checks = []
    for i, c in enumerate(d.get("check", [])):
        key = f"check[{i}]"
        if not isinstance(c, dict) or "claim" not in c or c.get("series") not in labels:
            raise _fail(path, key, f"needs a claim and a series among {labels}")
        for other in ("below", "above"):
            if other in c and c[other] not in labels:
                raise _fail(path, f"{key}.{other}", f"{c[other]!r} is not a series of this scenario")
        kinds = ("min", "max", "below", "above", "grows", "shrinks", "ratio_min", "ratio_max")
        if not any(k in c for k in kinds):
            raise _fail(path, key, f"needs one of {', '.join(kinds)}")
        relative = c.get("grows") or c.get("shrinks") or "ratio_min" in c or "ratio_max" in c
        if relative and len(c.get("at", [])) < 2:
            raise _fail(path, key, "grows/shrinks/ratio_* compare two x values: give at = [first, last]")
        extra = set(c) - {
            "claim", "series", "key", "at", "min", "max", "below", "above", "margin", "grows", "shrinks", "quick",
            "ratio_min", "ratio_max", "informational",
        }  # fmt: skip
        if extra:
            raise _fail(path, key, f"unknown keys {sorted(extra)}")
        checks.append(
            Check(
                claim=c["claim"],
                series=c["series"],
                key=c.get("key", metric),
                at=_floats(path, f"{key}.at", c["at"]) if "at" in c else None,
                min=c.get("min"),
                max=c.get("max"),
                below=c.get("below"),
                above=c.get("above"),
                margin=float(c.get("margin", 0.0)),
                grows=bool(c.get("grows", False)),
                shrinks=bool(c.get("shrinks", False)),
                ratio_min=c.get("ratio_min"),
                ratio_max=c.get("ratio_max"),
                quick=bool(c.get("quick", False)),
                informational=bool(c.get("informational", False)),
            )
        )
    quick = d.get("quick", {})
    extra = set(quick) - {"values", "duration_s", "warmup_s"}
    if extra:
        raise _fail(path, "quick", f"unknown keys {sorted(extra)}: the quick version sets values, duration_s, warmup_s")
    duration = float(d.get("duration_s", 100))
    warmup = float(d.get("warmup_s", 0.0))
    quick_duration = float(quick.get("duration_s", duration))
    if warmup >= duration:
        raise _fail(path, "warmup_s", f"{warmup:g} leaves nothing of the {duration:g} s run to measure")
    also_warmup = d.get("also_warmup_s")
    if also_warmup is not None and (
        not isinstance(also_warmup, int | float) or isinstance(also_warmup, bool) or not 0 <= also_warmup < duration
    ):
        raise _fail(path, "also_warmup_s", f"must be a number of seconds from 0 to below the run's {duration:g} s")
    return Scenario(
        name=d["name"],
        path=path,
        figure=d["figure"],
        title=d["title"],
        setup=d["setup"],
        claim=d["claim"],
        metric=metric,
        x=x,
        values=values,
        duration_s=duration,
        seed=int(d.get("seed", 1)),
        sample_s=float(d.get("sample_s", 1.0)),
        warmup_s=warmup,
        bottleneck=d["bottleneck"],
        series=tuple(series),
        checks=tuple(checks),
        quick_values=_floats(path, "quick.values", quick["values"]) if "values" in quick else values,
        quick_duration_s=quick_duration,
        quick_warmup_s=float(quick.get("warmup_s", min(warmup, quick_duration / 2))),
        note=d.get("note", ""),
        tcp_profile=d.get("tcp_profile"),
        paper=_paper(path, d["paper"], x) if "paper" in d else None,
        also_warmup_s=float(also_warmup) if also_warmup is not None else None,
    )


def _paper(path: Path, p: Any, x: str | None) -> PaperMark:
    example = "e.g. { key = 'ottawa_mbps', value = 580, label = 'Fig. 11: 580 Mb/s' } or min/max for a band"
    if not isinstance(p, dict) or not isinstance(p.get("key"), str) or not isinstance(p.get("label"), str):
        raise _fail(path, "paper", f"needs a key and a label, {example}")
    extra = set(p) - {"key", "label", "value", "min", "max"}
    if extra:
        raise _fail(path, "paper", f"unknown keys {sorted(extra)}")
    nums = {k: p[k] for k in ("value", "min", "max") if k in p}
    if any(not isinstance(v, int | float) or isinstance(v, bool) for v in nums.values()):
        raise _fail(path, "paper", "value, min and max are numbers")
    if ("value" in nums) == ("min" in nums or "max" in nums):
        raise _fail(path, "paper", f"give either a value or a band (min and/or max), {example}")
    if x is None:
        raise _fail(path, "paper", "marks where the paper's figure falls in a sweep: needs x and values")
    return PaperMark(
        p["key"],
        p["label"],
        *(float(nums[k]) if k in nums else None for k in ("value", "min", "max")),
    )


def _tcp_profile(path: Path, key: str, protocol: Any, profile: Any) -> None:
    """A ``tcp_profile`` names one of :data:`TCP_PROFILES` and is given to TCP only."""
    if profile is None:
        return
    if profile not in TCP_PROFILES:
        raise _fail(path, key, f"{profile!r} is not a TCP profile: use one of {', '.join(TCP_PROFILES)}")
    if protocol != "tcp":
        raise _fail(path, key, f"applies to TCP only, not {protocol!r}")


def load_all(directory: Path = SCENARIOS_DIR) -> dict[str, Scenario]:
    return {p.stem: load(p) for p in sorted(directory.glob("*.toml"))}


_QUEUE = re.compile(r"^\s*(?:(max|min)\(\s*([\w.]+)\s*,\s*([\w.]+)\s*\)|([\w.]+))\s*$")


def bdp_packets(rate_mbps: float, rtt_ms: float) -> float:
    """The bandwidth-delay product in full packets."""
    return rate_mbps * 1e6 * rtt_ms / 1e3 / (PACKET_BYTES * 8)


def queue_packets(expr: str | int, rate_mbps: float, rtt_ms: float) -> int:
    """A caption's queue size in packets: a number, ``bdp``, or ``max(a, b)``/``min(a, b)`` of
    those, where ``bdp`` is rate × the longest RTT in full packets."""
    bdp = bdp_packets(rate_mbps, rtt_ms)
    if isinstance(expr, int):
        return expr
    m = _QUEUE.match(expr)
    if not m:
        raise ValueError(f"queue {expr!r}: write a number of packets, bdp, or max(a, b) / min(a, b) of them")

    def term(t: str) -> float:
        if t == "bdp":
            return bdp
        try:
            return float(t)
        except ValueError:
            raise ValueError(f"queue {expr!r}: {t!r} is neither a number nor bdp") from None

    if m.group(4):
        v = term(m.group(4))
    else:
        f = max if m.group(1) == "max" else min
        v = f(term(m.group(2)), term(m.group(3)))
    return max(1, math.ceil(v))


@dataclass
class Point:
    """One x of one series: the run spec(s) and, once run, the results and values."""

    series: str
    x: float
    specs: list[dict[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)
    values: dict[str, float | None] = field(default_factory=dict)
    # Seconds after each flow's start that the means and the stability leave out.
    warmup_s: float = 0.0


def _run_spec(sc: Scenario, s: Series, x: float, duration: float) -> dict[str, Any]:
    flows = []
    for f in s.flows:
        f = dict(f)
        if sc.x == "rtt_ms" and "rtt_ms" not in f:
            f["rtt_ms"] = x
        if sc.x == "count" and "count" not in f:
            if int(x) == 0:
                continue  # no flow of this description at this point (Fig. 13's 0 bulk flows)
            f["count"] = int(x)
        if "own_queue" in f:
            f["own_queue_pkts"] = queue_packets(f.pop("own_queue"), float(f["own_rate_mbps"]), float(f["rtt_ms"]))
        if sc.tcp_profile and f["protocol"] == "tcp":
            f.setdefault("tcp_profile", sc.tcp_profile)
        flows.append(f)
    b = {**sc.bottleneck, **s.bottleneck}
    if sc.x == "rate_mbps":
        b["rate_mbps"] = x
    rtts = [float(f["rtt_ms"]) for f in flows] + ([float(s.short_flows["rtt_ms"])] if s.short_flows else [])
    queue = b.pop("queue", "max(bdp, 100)")
    if sc.x == "queue_bdp":
        b["queue_pkts"] = max(1, math.ceil(x * bdp_packets(float(b["rate_mbps"]), max(rtts))))
    else:
        b["queue_pkts"] = queue_packets(queue, float(b["rate_mbps"]), max(rtts))
    spec: dict[str, Any] = {"seed": sc.seed, "duration_s": duration, "sample_s": sc.sample_s, "bottleneck": b}
    spec["flows"] = flows
    if s.short_flows:
        spec["short_flows"] = dict(s.short_flows)
        if sc.tcp_profile and spec["short_flows"].get("protocol", "tcp") == "tcp":
            spec["short_flows"].setdefault("tcp_profile", sc.tcp_profile)
    return spec


def expand(sc: Scenario, quick: bool = False) -> list[Point]:
    """Every run the figure needs (friendliness: each point's all-TCP twin too)."""
    values = sc.quick_values if quick else sc.values
    duration = sc.quick_duration_s if quick else sc.duration_s
    points = []
    for s in sc.series:
        for x in values:
            spec = _run_spec(sc, s, x, duration)
            specs = [spec]
            if sc.metric == "friendliness":
                alone = json.loads(json.dumps(spec))
                for f in alone["flows"]:
                    if f["protocol"] != "tcp":
                        f["protocol"] = "tcp"
                        for k in ("cc", "flow_control", "initial_rate_mbps"):
                            f.pop(k, None)
                        if sc.tcp_profile:
                            f["tcp_profile"] = sc.tcp_profile
                specs.append(alone)
            points.append(Point(s.label, x, specs, warmup_s=sc.quick_warmup_s if quick else sc.warmup_s))
    return points


def run_one(spec: dict[str, Any], simulator: Path = SIMULATOR) -> dict[str, Any]:
    """Runs ``udt-sim`` on one spec and returns its result."""
    if not simulator.exists():
        raise FileNotFoundError(f"{simulator} is missing: run `make build` (cargo build --release) first")
    p = subprocess.run([str(simulator), "-"], input=json.dumps(spec), capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"udt-sim failed ({p.returncode}) on {json.dumps(spec)}: {p.stderr.strip()}")
    result: dict[str, Any] = json.loads(p.stdout)
    return result


def _samples_after(flow: dict[str, Any], warmup_s: float) -> list[float]:
    return [x for t, x in zip(flow["times_s"], flow["throughput_mbps"], strict=True) if t > flow["start_s"] + warmup_s]


def _mean_after(flow: dict[str, Any], warmup_s: float) -> float:
    xs = _samples_after(flow, warmup_s)
    return statistics.fmean(xs) if xs else 0.0


def _safe(f: Callable[[], float]) -> float | None:
    try:
        return f()
    except ValueError:
        return None


def reduce(sc: Scenario, point: Point) -> dict[str, float | None]:
    """The metric's values for one run (and its twin)."""
    r = point.results[0]
    flows = r["flows"]
    w = point.warmup_s
    means = [_mean_after(f, w) for f in flows]
    capacity = float(r["spec"]["bottleneck"]["rate_mbps"])
    v: dict[str, float | None] = {
        "aggregate_mbps": sum(means),
        "utilisation": r["bottleneck"]["utilisation"],
    }
    if sc.metric == "jain":
        v["jain"] = _safe(lambda: metrics.jain_index(means))
    elif sc.metric == "stability":
        v["stability"] = _safe(lambda: metrics.stability_index([_samples_after(f, w) for f in flows]))
    elif sc.metric == "friendliness":
        alone = point.results[1]["flows"]
        tcp_mixed = [m for f, m in zip(flows, means, strict=True) if f["protocol"] == "tcp"]
        tcp_alone = [_mean_after(f, w) for f in alone]
        v["friendliness"] = _safe(lambda: metrics.tcp_friendliness_index(tcp_mixed, tcp_alone))
        others = [m for f, m in zip(flows, means, strict=True) if f["protocol"] != "tcp"]
        v["other_mean_mbps"] = statistics.fmean(others) if others else None
        v["tcp_mean_mbps"] = statistics.fmean(tcp_mixed) if tcp_mixed else None
    elif sc.metric == "rtt_ratio":
        short = min(range(len(flows)), key=lambda i: (flows[i]["rtt_ms"], i))
        long = max(range(len(flows)), key=lambda i: (flows[i]["rtt_ms"], i))
        if short == long:
            short, long = 0, len(flows) - 1
        v["rtt_ratio"] = _safe(lambda: metrics.rtt_fairness_ratio(means[long], means[short]))
    elif sc.metric == "scaling":
        v["scaling"] = sum(means) / capacity
        v["stdev_mbps"] = statistics.stdev(means) if len(means) > 1 else 0.0
        v["jain"] = _safe(lambda: metrics.jain_index(means))
        v["stability"] = _safe(lambda: metrics.stability_index([_samples_after(f, w) for f in flows]))
    elif sc.metric == "series":
        v["series"] = v["aggregate_mbps"]
        v["stability"] = _safe(lambda: metrics.stability_index([_samples_after(f, w) for f in flows]))
        v["jain"] = _safe(lambda: metrics.jain_index(means))
        # What a plot of goodput over time shows from t = 0: the bottleneck's drops over the run,
        # and how far each flow's goodput moves from one sample to the next (the mean absolute
        # change, Mb/s): its oscillation, slow start's ramp included.
        v["drops"] = r["bottleneck"]["dropped_queue"]
        v["min_flow_mbps"] = min(means) if means else None
        for f, m in zip(flows, means, strict=True):
            v[f"{f['name']}_mbps"] = m
            # The loss events its sender reacted to over the whole run (UDT: NAKs received).
            v[f"{f['name']}_loss_events"] = f["loss_events"]
            xs = _samples_after(f, 0.0)
            v[f"{f['name']}_osc_mbps"] = (
                statistics.fmean(abs(b - a) for a, b in itertools.pairwise(xs)) if len(xs) > 1 else None
            )
            cap = min(capacity, float(f.get("own_rate_mbps") or capacity))
            t90 = metrics.convergence_time(f["times_s"], f["throughput_mbps"], cap, start=f["start_s"])
            v[f"{f['name']}_t90_s"] = t90
    elif sc.metric == "short":
        transfers: dict[str, Any] = r.get("short_flows") or {}
        v["short"] = transfers.get("aggregate_mbps")
        v["short_completed"] = transfers.get("completed")
        v["short_mean_s"] = transfers.get("mean_duration_s")
        v["bulk_mbps"] = v["aggregate_mbps"]
    elif sc.metric == "share":
        by: dict[str, float] = {}
        for f, m in zip(flows, means, strict=True):
            by[f["protocol"]] = by.get(f["protocol"], 0.0) + m
        total = sum(by.values())
        for proto, m in by.items():
            v[f"{proto}_mbps"] = m
            v[f"{proto}_share"] = m / total if total > 0 else None
        v["share"] = v.get("sabul_share", v.get("udt_share"))
    alt = sc.also_warmup_s
    if alt is not None:
        again = reduce(replace(sc, also_warmup_s=None), replace(point, warmup_s=alt))
        v[f"{sc.metric}_warmup_{alt:g}s"] = again.get(sc.metric)
    return v


@dataclass(frozen=True)
class CheckResult:
    """A claim judged: ``ok`` True (holds), False (fails), None (not judged, or over seeds
    inconclusive: ``seeds`` then says in which it held)."""

    check: Check
    ok: bool | None
    detail: str
    # Over seeds (:func:`simulate_seeds`): the claim's outcome in each seed, first seed first.
    seeds: tuple[bool | None, ...] = ()

    @property
    def judgement(self) -> str:
        if self.check.informational:
            return "informational"
        if self.ok is None:
            return "inconclusive" if any(x is not None for x in self.seeds) else "not judged"
        return "holds" if self.ok else "fails"


def judge(sc: Scenario, points: list[Point], quick: bool) -> list[CheckResult]:
    """Every claim checked against the values (quick runs: only the checks marked quick)."""
    by = {(p.series, p.x): p.values for p in points}
    xs = sorted({p.x for p in points})
    out = []
    for c in sc.checks:
        if quick and not c.quick:
            continue
        at = [x for x in xs if c.at is None or x in c.at]
        bad, seen = [], []
        for x in at:
            v = by.get((c.series, x), {}).get(c.key)
            if v is None:
                bad.append(f"x={x:g}: no value")
                continue
            seen.append(f"{x:g}: {v:.3g}")
            if c.min is not None and v < c.min:
                bad.append(f"x={x:g}: {v:.3g} < {c.min:g}")
            if c.max is not None and v > c.max:
                bad.append(f"x={x:g}: {v:.3g} > {c.max:g}")
            for other, sign in ((c.below, 1), (c.above, -1)):
                if other is None:
                    continue
                o = by.get((other, x), {}).get(c.key)
                if o is None:
                    bad.append(f"x={x:g}: {other} has no value")
                elif sign * (v - o) >= c.margin:
                    rel = "below" if sign == 1 else "above"
                    within = f" (+{c.margin:g})" if c.margin else ""
                    bad.append(f"x={x:g}: {v:.3g} not {rel} {other}'s {o:.3g}{within}")
        ratio = c.ratio_min is not None or c.ratio_max is not None
        if (c.grows or c.shrinks or ratio) and len(at) >= 2:
            first, last = (by.get((c.series, x), {}).get(c.key) for x in (at[0], at[-1]))
            if first is None or last is None:
                bad.append(f"no value at x={at[0]:g} or x={at[-1]:g}")
            elif ratio:
                q = last / first if first else math.inf
                seen.append(f"ratio {q:.3g}")
                if (c.ratio_min is not None and q < c.ratio_min) or (c.ratio_max is not None and q > c.ratio_max):
                    bad.append(f"x={at[-1]:g} over x={at[0]:g}: {q:.3g} outside [{c.ratio_min}, {c.ratio_max}]")
            else:
                if (c.grows and last <= first) or (c.shrinks and last >= first):
                    how = "grow" if c.grows else "shrink"
                    bad.append(f"does not {how} from x={at[0]:g} ({first:.3g}) to x={at[-1]:g} ({last:.3g})")
        ok = None if not at else not bad
        detail = "; ".join(bad) if bad else ", ".join(seen)
        if c.informational:
            # Shown, not counted: the bound's outcome goes into the detail instead of ok.
            detail = ("within the bound: " if ok else "outside the bound: ") + detail if at else detail
            ok = None
        out.append(CheckResult(c, ok, detail))
    return out


def simulate(
    sc: Scenario, quick: bool = False, jobs: int | None = None, simulator: Path = SIMULATOR
) -> tuple[list[Point], list[CheckResult]]:
    """Runs every point of the scenario (``jobs`` at a time) and judges its claims."""
    points = expand(sc, quick)
    pairs = [(p, s) for p in points for s in p.specs]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda ps: run_one(ps[1], simulator), pairs))
    for (p, _), r in zip(pairs, results, strict=True):
        p.results.append(r)
    for p in points:
        p.values = reduce(sc, p)
    return points, judge(sc, points, quick)


# The most a seed after the first moves each flow's start later (simulate_seeds).
START_JITTER_S = 0.5


def reseeded(sc: Scenario, k: int) -> Scenario:
    """``sc`` for its ``k``-th seed (0: ``sc`` itself): the simulator's seed (its loss streams
    and its random choices) is ``sc.seed + k``, and every flow starts up to
    :data:`START_JITTER_S` later, drawn from that seed, so that the flows do not meet the queue
    in the same phase in every seed."""
    if k == 0:
        return sc
    rng = random.Random(f"{sc.name}/{sc.seed + k}")
    series = tuple(
        replace(
            s,
            flows=tuple(
                {**f, "start_s": round(float(f.get("start_s", 0.0)) + rng.uniform(0, START_JITTER_S), 4)}
                for f in s.flows
            ),
        )
        for s in sc.series
    )
    return replace(sc, seed=sc.seed + k, series=series)


def simulate_seeds(
    sc: Scenario, seeds: int, quick: bool = False, jobs: int | None = None, simulator: Path = SIMULATOR
) -> tuple[list[list[Point]], list[CheckResult]]:
    """The scenario under ``seeds`` seeds (:func:`reseeded`), each judged alone, and every claim
    over them: it **holds** when it held in every seed, **fails** when it failed in every one,
    and is **inconclusive** (``ok`` None) when the seeds disagree: the claim sits within the
    seeds' scatter. One seed gives back :func:`simulate`'s verdicts."""
    runs = [simulate(reseeded(sc, k), quick, jobs, simulator) for k in range(seeds)]
    if seeds == 1:
        return [runs[0][0]], runs[0][1]
    combined = []
    for i, first in enumerate(runs[0][1]):
        outcomes = tuple(checks[i].ok for _, checks in runs)
        judged = [x for x in outcomes if x is not None]
        held = sum(judged)
        ok = None if not judged or 0 < held < len(judged) else held == len(judged)
        words = f"holds in {held} of {len(judged)} seeds" if judged else "judged in no seed"
        failed = next((checks[i].detail for _, checks in runs if checks[i].ok is False), "")
        detail = words + (f"; first failure: {failed}" if failed and held < len(judged) else "")
        combined.append(CheckResult(first.check, ok, detail, outcomes))
    return [points for points, _ in runs], combined


def paper_position(sc: Scenario, points: list[Point]) -> dict[str, str]:
    """Per series, where the paper's figure (``sc.paper``) falls in the sweep: between which two
    x values a number lies, or at which x values a band is met; empty without a mark."""
    mark = sc.paper
    if mark is None:
        return {}
    x_name = sc.x or "x"
    out = {}
    for s in sc.series:
        pts = sorted((p.x, p.values.get(mark.key)) for p in points if p.series == s.label)
        have = [(x, v) for x, v in pts if v is not None]
        if not have:
            out[s.label] = f"no value of {mark.key} in the sweep"
            continue
        shown = ", ".join(f"{x:g}: {v:.3g}" for x, v in have)
        if mark.value is not None:
            target = mark.value
            cross = [(a, b) for a, b in itertools.pairwise(have) if min(a[1], b[1]) <= target <= max(a[1], b[1])]
            lo, hi = min(have, key=lambda xv: xv[1]), max(have, key=lambda xv: xv[1])
            if cross:
                where = "; ".join(
                    f"between {x_name} = {a[0]:g} ({a[1]:.3g}) and {b[0]:g} ({b[1]:.3g})" for a, b in cross
                )
            elif target > hi[1]:
                where = f"above the whole sweep (its highest: {hi[1]:.3g} at {x_name} = {hi[0]:g})"
            else:
                where = f"below the whole sweep (its lowest: {lo[1]:.3g} at {x_name} = {lo[0]:g})"
            out[s.label] = f"{mark.label} lies {where} [{shown}]"
        else:
            inside = [x for x, v in have if (mark.min is None or v >= mark.min) and (mark.max is None or v <= mark.max)]
            band = f"[{'' if mark.min is None else f'{mark.min:g}'}, {'' if mark.max is None else f'{mark.max:g}'}]"
            where = f"met at {x_name} = {', '.join(f'{x:g}' for x in inside)}" if inside else "met nowhere in the sweep"
            out[s.label] = f"{mark.label} {band}: {where} [{shown}]"
    return out


def flow_table(points: Iterable[Point]) -> list[dict[str, Any]]:
    """Per run: each flow's mean goodput over the run, Mb/s (the snapshot's rows)."""
    rows = []
    for p in points:
        for r in p.results:
            rows.append(
                {
                    "series": p.series,
                    "x": p.x,
                    "flows": {f["name"]: round(statistics.fmean(f["throughput_mbps"] or [0.0]), 2) for f in r["flows"]},
                    "retransmitted": sum(f["retransmitted"] for f in r["flows"]),
                    "dropped_queue": r["bottleneck"]["dropped_queue"],
                    "nic_dropped_queue": r["host_nic"]["dropped_queue"] if r.get("host_nic") else None,
                }
            )
    return rows


def to_json(
    sc: Scenario,
    points: list[Point],
    checks: list[CheckResult],
    quick: bool,
    more_seeds: list[list[Point]] | None = None,
) -> dict[str, Any]:
    """The scenario's result; with ``more_seeds`` (the points of the seeds after the first) the
    metric's values of each seed too, and each claim's outcome per seed."""
    more = more_seeds or []
    return {
        "name": sc.name,
        "figure": sc.figure,
        "title": sc.title,
        "setup": sc.setup,
        "claim": sc.claim,
        "note": sc.note,
        "metric": sc.metric,
        "x": sc.x,
        "seed": sc.seed,
        "quick": quick,
        "points": [
            {
                "series": p.series,
                "x": p.x,
                "values": p.values,
                "wall_s": sum(r["wall_s"] for r in p.results),
                "speed": min(r["speed"] for r in p.results),
                "runs": p.results,
            }
            for p in points
        ],
        "checks": [
            {
                "claim": c.check.claim,
                "series": c.check.series,
                "key": c.check.key,
                "ok": c.ok,
                "judgement": c.judgement,
                "detail": c.detail,
                "seeds": list(c.seeds),
            }
            for c in checks
        ],
        "paper": (
            {
                "key": sc.paper.key,
                "label": sc.paper.label,
                "value": sc.paper.value,
                "min": sc.paper.min,
                "max": sc.paper.max,
                "where": paper_position(sc, points),
            }
            if sc.paper
            else None
        ),
        "seeds": [sc.seed + k for k in range(1 + len(more))],
        "more_seeds": [
            [{"series": p.series, "x": p.x, "values": p.values, "specs": p.specs} for p in pts] for pts in more
        ],
    }


def snapshot(sc: Scenario, points: list[Point], checks: list[CheckResult]) -> str:
    """The text ``make test`` pins: per run the flows' mean goodput and the metric's values."""
    lines = [f"# {sc.name}: {sc.figure} (quick version, seed {sc.seed})"]
    for p in points:
        vals = ", ".join(f"{k}={v:.4g}" if v is not None else f"{k}=None" for k, v in sorted(p.values.items()))
        lines.append(f"[{p.series} x={p.x:g}] {vals}")
        for r in p.results:
            flows = " ".join(f"{f['name']}={statistics.fmean(f['throughput_mbps'] or [0.0]):.2f}" for f in r["flows"])
            nic = f" nic_drops={r['host_nic']['dropped_queue']}" if r.get("host_nic") else ""
            lines.append(f"  {flows} | drops={r['bottleneck']['dropped_queue']}{nic}")
    for c in checks:
        verdict = f"informational ({c.detail})" if c.check.informational else ("ok" if c.ok else "FAILED")
        lines.append(f"check {verdict}: {c.check.claim}")
    for label, where in paper_position(sc, points).items():
        lines.append(f"paper, {label}: {where}")
    return "\n".join(lines) + "\n"


def plot(sc: Scenario, points: list[Point], path: Path) -> None:
    """The figure: the metric against x per series, or goodput over time per flow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep_of_series = sc.metric == "series" and sc.x is not None and sc.paper is not None
    if sc.metric == "series" and not sweep_of_series:
        fig, axes = plt.subplots(len(points), 1, figsize=(8, 2.6 * len(points)), squeeze=False, sharex=True)
        for ax, p in zip(axes[:, 0], points, strict=True):
            for f in p.results[0]["flows"]:
                ax.plot(f["times_s"], f["throughput_mbps"], label=f"{f['name']} ({f['rtt_ms']:g} ms)", lw=1)
            ax.set_title(f"{p.series}" + (f", {sc.x} = {p.x:g}" if sc.x else ""), fontsize=9)
            ax.set_ylabel("Mb/s")
            ax.legend(fontsize=7, loc="lower right")
        axes[-1, 0].set_xlabel("time (s)")
    else:
        keys = (
            [sc.paper.key]
            if sweep_of_series and sc.paper
            else [sc.metric] + (["stdev_mbps"] if sc.metric == "scaling" else [])
        )
        fig, axes = plt.subplots(1, len(keys), figsize=(6.5 * len(keys), 4), squeeze=False)
        for ax, key in zip(axes[0], keys, strict=True):
            for s in sc.series:
                pts = [(p.x, p.values.get(key)) for p in points if p.series == s.label]
                xs = [x for x, v in pts if v is not None]
                ys = [v for _, v in pts if v is not None]
                ax.plot(xs, ys, marker="o", label=s.label)
            for c in sc.checks:
                if c.key == key and (c.min is not None or c.max is not None):
                    for bound in (c.min, c.max):
                        if bound is not None:
                            ax.axhline(bound, color="grey", ls=":", lw=1)
            if sc.paper and sc.paper.key == key:
                if sc.paper.value is not None:
                    ax.axhline(sc.paper.value, color="tab:red", ls="--", lw=1, label=sc.paper.label)
                else:
                    lo = sc.paper.min if sc.paper.min is not None else ax.get_ylim()[0]
                    hi = sc.paper.max if sc.paper.max is not None else ax.get_ylim()[1]
                    ax.axhspan(lo, hi, color="tab:red", alpha=0.12, label=sc.paper.label)
            if sc.x in ("rtt_ms", "count", "queue_bdp") and min(p.x for p in points) > 0:
                ax.set_xscale("log")
            ax.set_xlabel(
                {"rtt_ms": "RTT (ms)", "count": "flows", "rate_mbps": "link (Mb/s)", "queue_bdp": "queue (BDP)"}.get(
                    sc.x or "", ""
                )
            )
            ax.set_ylabel(key)
            ax.legend(fontsize=8)
    fig.suptitle(f"{sc.figure}: {sc.title} (simulated)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(
    sc: Scenario,
    points: list[Point],
    checks: list[CheckResult],
    outdir: Path,
    quick: bool,
    more_seeds: list[list[Point]] | None = None,
) -> Path:
    """``<outdir>/<name>.json`` and ``.png`` (the first seed's); returns the JSON's path."""
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / f"{sc.name}.json"
    out.write_text(json.dumps(to_json(sc, points, checks, quick, more_seeds), indent=1) + "\n")
    plot(sc, points, outdir / f"{sc.name}.png")
    return out
