"""Experiments as data: ``experiments/*.toml``, read by the runner, the quick profiles and the
report alike (docs/testbed/experiments.md, "Experiments as data").

An experiment has parts; a part runs on one topology file with either bulk flows (one per
``flows`` entry, each stack in turn) or, for TCP friendliness, ``short_tcp``: short 1 MB TCP
flows beside 0..N bulk flows of the stack under test. A bulk flow runs the stack under test
unless it names its own (``stack = "tcp-cubic"``: the SABUL paper's Table 1 puts two TCP flows
beside two SABUL flows); a part whose flows all name their stack is a baseline, run once
whatever stacks the run has. ``protocols`` limits the stacks under test a part runs. Beside each part stand the paper's
numbers (``paper``, Mb/s at the paper's rates, by protocol and flow) and its tolerance bands
(``[[part.band]]``), each with the paper figure it stands for and why it is where it is. A part
with a ``profile`` table is also a quick profile: `make test` runs it short and holds every UDT
stack to its bands.

Every error names the file, the line and what is wrong, as for topology files::

    name = "efficiency"
    title = "Single-flow efficiency on three paths"
    figure = "SC'04 Fig. 11"
    default = true                     # in `make testbed`'s default set
    [[part]]
    label = "chicago-local"
    topology = "chicago-local"         # topologies/<name>.toml, or a path relative to this file
    flows = [{ name = "local", src = "chicago", dst = "local", start = 0 }]
    paper = { udt = { local = 940 } }
    profile = { duration = 25 }        # a quick profile of `make test`
    [[part.band]]
    metric = "mean_mbps"               # see METRICS
    flow = "local"
    after_s = 15
    min = 0.85
    of = "capacity"                    # the bound's unit, see UNITS
    paper = "940 of 1000 Mb/s (94 %)"
    why = "..."
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from udtharness import stacks as registry

from .. import REPO
from ..emulation.topology import KeyPart, TopologyError, read_toml
from ..emulation.topology import load as load_topology

EXPERIMENTS_DIR = REPO / "experiments"
TOPOLOGIES_DIR = REPO / "topologies"

# What a band can bound; the runner computes each of these for every UDT and TCP stack's part.
METRICS = {
    "mean_mbps": "a flow's mean goodput (Mb/s) after `after_s` (default: the run's warm-up)",
    "time_to_90pct_s": "seconds until a flow's 1 s goodput first reaches 90 % of its bottleneck",
    "jain_index": "Jain's fairness index of the flows' means",
    "aggregate_mbps": "the sum of the flows' means",
    "min_flow_mbps": "the smallest flow mean",
    "join_mbps": "the join throughput: the number of flows times the slowest flow's mean",
    "flow_ratio": "a flow's mean over another's (`flow` / `over`)",
    "short_tcp_ratio": "the short TCP flows' aggregate beside the most bulk flows over that beside the fewest",
    "loss_pct": "a flow's packet-loss rate: the sender's retransmissions over the packets it sent, in %",
    "rcvbuf_drops": "UDP datagrams the flow's receiving host dropped for a full socket buffer during the run",
    "bytes_exact": "1 when a finite flow's receiver wrote exactly the sender's input, else 0",
    "paths_separated": "1 when the part's capture saw DATA only on the data net and control only on the control net",
}
PER_FLOW = {"mean_mbps", "time_to_90pct_s", "flow_ratio", "loss_pct", "bytes_exact", "rcvbuf_drops"}
# How `min` / `max` are expressed.
UNITS = {
    "absolute": "the metric's own unit (s, Mb/s at the run's scale, an index, a ratio)",
    "capacity": "a fraction of the bottleneck rate (the flow's, or the part's largest for part metrics)",
    "fair_share": "a fraction of the part's bottleneck rate divided by the number of flows",
    "paper_mbps": "Mb/s at the paper's rates, multiplied by the run's scale",
    "rate": "a fraction of the flow's fixed rate in goodput terms (the rate times payload / packet size)",
    "reference": "a fraction of the reference stack's value of the same metric in the same run (libudt for UDT)",
}
SHORT_TCP_METRICS = {"short_tcp_ratio"}  # a short_tcp part's; every other metric is a bulk part's
PART_KEYS = {"label", "topology", "flows", "short_tcp", "paper", "profile", "band", "protocols", "sweep", "capture"}
# A flow's settings (FlowOptions): rates and buffers at the paper's scale, as the links are.
OPTION_KEYS = {"rate", "udp_buffer", "frtp_buffer", "io", "size"}
FLOW_KEYS = {"name", "src", "dst", "start", "stack"} | OPTION_KEYS
SWEEP_KEYS = {"option", "values", "seconds", "paper"}
SWEEPABLE = {"rate", "udp_buffer", "frtp_buffer"}
IO_MODES = ("memory", "disk")
SHORT_TCP_KEYS = {"src", "dst", "bulk_flows", "count", "workers", "size", "cc", "bulk_udp_buffer"}
BAND_KEYS = {
    "metric",
    "flow",
    "over",
    "after_s",
    "min",
    "max",
    "of",
    "paper",
    "why",
    "protocol",
    "profile_min",
    "profile_max",
}
TOP_KEYS = {"name", "title", "figure", "note", "default", "part"}


class ExperimentError(ValueError):
    """An experiment file is wrong; the message is ``file:line: what is wrong``."""


class _Fail(Protocol):
    """Makes the :class:`ExperimentError` for ``msg`` at the line of the key path ``key``."""

    def __call__(self, msg: str, *key: KeyPart) -> ExperimentError: ...


@dataclass(frozen=True)
class FlowOptions:
    """A flow's settings, as the paper gives them: rates in Mb/s and sizes in bytes at the
    paper's link rates, scaled by the run as the links are (:meth:`scaled`), so that a buffer
    covers the same time at any scale. None: the stack's default."""

    rate: float | None = None  # a fixed sending rate (FRTP's; UDT's --cc fixed)
    udp_buffer: int | None = None  # the data socket's buffers
    frtp_buffer: int | None = None  # FRTP's retransmission / resequencing buffer
    io: str = "memory"  # "disk": the sender reads a file, the receiver writes one
    size: int | None = None  # a finite transfer of this many bytes (a file), checked byte for byte

    def with_option(self, option: str, value: float) -> FlowOptions:
        """These options with ``option`` (one of SWEEPABLE) set to ``value``."""
        if option == "rate":
            return replace(self, rate=value)
        if option == "udp_buffer":
            return replace(self, udp_buffer=int(value))
        if option == "frtp_buffer":
            return replace(self, frtp_buffer=int(value))
        raise ValueError(f"{option!r} is not a sweepable option ({', '.join(sorted(SWEEPABLE))})")

    def settings(self) -> set[str]:
        """The :class:`udtbed.experiments.stacks.Transfer` settings these options need from a stack."""
        fields = {"rate": "rate_mbps", "udp_buffer": "udp_buffer", "frtp_buffer": "frtp_buffer"}
        return {t for k, t in fields.items() if getattr(self, k) is not None}


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    start: float = 0.0
    stack: str | None = None  # a registry stack this flow always runs; None: the stack under test
    options: FlowOptions = FlowOptions()


@dataclass(frozen=True)
class Sweep:
    """One part run once per value of a flow option (every flow's), on the same built network:
    ``seconds`` each (default: the run's duration). ``paper``: the paper's points, each
    ``{ value, mbps, loss_pct }`` (goodput at the paper's rates), for the report."""

    option: str
    values: tuple[float, ...]
    seconds: float | None = None
    paper: tuple[dict[str, float], ...] = ()


@dataclass(frozen=True)
class ShortTcp:
    """Short TCP flows of ``size`` bytes from ``src`` to ``dst`` beside each count of bulk flows
    of the stack under test (SC'04 Fig. 13; SABUL paper Table 2): ``workers`` at a time (at
    scale 1; the run scales them), until ``count`` are done or the run's duration is over, with
    the kernel's congestion control ``cc`` (``reno``: Reno with SACK, the 2004 papers' TCP).
    ``bulk`` is the bulk flows' settings (``bulk_udp_buffer``: their data socket's buffer)."""

    src: str
    dst: str
    bulk_flows: tuple[int, ...]
    count: int = 500
    workers: int = 5  # concurrent short flows at scale 1; scaled with the run
    size: int = 1 << 20  # bytes per flow (1 MB)
    cc: str = "cubic"  # net.ipv4.tcp_available_congestion_control
    bulk: FlowOptions = FlowOptions()


@dataclass(frozen=True)
class Band:
    """A tolerance band: ``metric`` within [min, max] (in ``of`` units), standing for ``paper``."""

    metric: str
    paper: str
    why: str
    flow: str | None = None
    over: str | None = None
    after_s: float | None = None
    min: float | None = None
    max: float | None = None
    of: str = "absolute"
    protocol: str = "udt"  # the stacks it judges
    # A band `of = "reference"`: the quick profile's bounds, where its 25-40 s run cannot hold
    # the band's own; without either it does not gate the profiles.
    profile_min: float | None = None
    profile_max: float | None = None

    @property
    def relative(self) -> bool:
        """Bounds in units of the reference stack's value in the same run (judged beside it)."""
        return self.of == "reference"

    def bounds(self, profile: bool) -> tuple[float | None, float | None]:
        """(min, max), the quick profile's where it has its own."""
        if profile and (self.profile_min is not None or self.profile_max is not None):
            return self.profile_min, self.profile_max
        return self.min, self.max

    def in_profile(self) -> bool:
        """Whether the quick profiles judge the band (a reference-relative one only with its own bounds)."""
        return not self.relative or self.profile_min is not None or self.profile_max is not None

    def describe(self) -> str:
        """The band as a reader sees it, e.g. 'mean_mbps(local, after 15 s) >= 0.85 x capacity'."""
        args = [a for a in (self.flow, f"over {self.over}" if self.over else None) if a]
        if self.after_s is not None:
            args.append(f"after {self.after_s:g} s")
        name = f"{self.metric}({', '.join(args)})" if args else self.metric
        unit = "" if self.of == "absolute" else f" x {self.of}"
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}{unit}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}{unit}")
        return f"{name} {' and '.join(parts)}"


@dataclass(frozen=True)
class Profile:
    """A part's quick profile in `make test`: its duration and, if given, the only stacks run."""

    duration: float
    stacks: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Part:
    label: str
    topology: Path
    flows: tuple[Flow, ...] = ()
    short_tcp: ShortTcp | None = None
    paper: dict[str, dict[str, float]] = field(default_factory=dict)  # protocol -> flow/key -> Mb/s
    bands: tuple[Band, ...] = ()
    profile: Profile | None = None
    protocols: tuple[str, ...] | None = None  # the stacks under test it runs, by protocol (None: all)
    sweep: Sweep | None = None
    capture: bool = False  # tcpdump on every host interface: which net carried what (and when)

    @property
    def topology_name(self) -> str:
        return self.topology.stem

    @property
    def baseline(self) -> bool:
        """Every flow names its stack: the part runs once, not once per stack under test."""
        return bool(self.flows) and all(f.stack for f in self.flows)

    def runs(self, protocol: str) -> bool:
        """Whether a stack under test of ``protocol`` runs this part."""
        return not self.baseline and (self.protocols is None or protocol in self.protocols)


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    figure: str
    parts: tuple[Part, ...]
    note: str = ""
    default: bool = False
    path: Path | None = None


def bulk_stacks() -> list[str]:
    """The registry's stacks that can run a bulk flow (a ``[bulk]`` table), by name."""
    return [n for n, s in registry.registry().items() if s.bulk is not None]


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def load(path: str | Path) -> Experiment:
    """Parse and validate an experiment file (topologies included): ``file:line`` errors."""
    path = Path(path)
    data, loc = read_toml(path, ExperimentError)

    def fail(msg: str, *key: KeyPart) -> ExperimentError:
        return ExperimentError(f"{path}:{loc.line(*key)}: {msg}")

    for k in data:
        if k not in TOP_KEYS:
            raise fail(f"unknown key {k!r} (known: {', '.join(sorted(TOP_KEYS))})", k)
    for k in ("name", "title", "figure"):
        if not isinstance(data.get(k), str) or not data[k]:
            raise fail(f"{k!r} must be a non-empty string", k)
    if data["name"] != path.stem:
        raise fail(f"name {data['name']!r} differs from the file name {path.stem!r}", "name")
    parts_raw = data.get("part")
    if not isinstance(parts_raw, list) or not parts_raw:
        raise fail("an experiment needs at least one [[part]]")
    parts = [_part(path, p, i, fail) for i, p in enumerate(parts_raw)]
    labels = [p.label for p in parts]
    for i, lab in enumerate(labels):
        if lab in labels[:i]:
            raise fail(f"part label {lab!r} used twice", "part", i, "label")
    return Experiment(
        name=data["name"],
        title=data["title"],
        figure=data["figure"],
        parts=tuple(parts),
        note=str(data.get("note", "")),
        default=bool(data.get("default", False)),
        path=path,
    )


def _part(path: Path, p: Any, i: int, fail: _Fail) -> Part:
    if not isinstance(p, dict):
        raise fail("[[part]] must be a table", "part", i)
    for k in p:
        if k not in PART_KEYS:
            raise fail(f"unknown key {k!r} in [[part]] (known: {', '.join(sorted(PART_KEYS))})", "part", i, k)
    label, topo_ref = p.get("label"), p.get("topology")
    if not isinstance(label, str) or not label:
        raise fail("'label' must be a non-empty string", "part", i, "label")
    if not isinstance(topo_ref, str) or not topo_ref:
        raise fail("'topology' must name a topology file", "part", i, "topology")
    topo_path = (path.parent / topo_ref) if topo_ref.endswith(".toml") else TOPOLOGIES_DIR / f"{topo_ref}.toml"
    try:
        topo = load_topology(topo_path)
    except TopologyError as e:
        raise fail(f"topology {topo_ref!r}: {e}", "part", i, "topology") from None
    hosts = set(topo.hosts)

    def host(v: Any, what: str) -> str:
        if v not in hosts:
            raise fail(f"{what} {v!r} is not a host of {topo_path.name} ({', '.join(sorted(hosts))})", "part", i)
        return str(v)

    flows: list[Flow] = []
    for f in p.get("flows", []):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise fail("each flow needs name, src and dst", "part", i, "flows")
        unknown = set(f) - FLOW_KEYS
        if unknown:
            raise fail(f"unknown flow key(s) {sorted(unknown)}", "part", i, "flows")
        start = f.get("start", 0.0)
        if not _num(start) or start < 0:
            raise fail(f"flow {f['name']}: start must be seconds >= 0", "part", i, "flows")
        stack = f.get("stack")
        if stack is not None and stack not in bulk_stacks():
            have = ", ".join(bulk_stacks())
            raise fail(f"flow {f['name']}: stack {stack!r} is not a registry stack with [bulk] ({have})", "part", i)
        src, dst = host(f.get("src"), "src"), host(f.get("dst"), "dst")
        flows.append(Flow(f["name"], src, dst, float(start), stack, _options(f, i, fail)))
    names = [f.name for f in flows]
    if len(set(names)) != len(names):
        raise fail("flow names must be unique within a part", "part", i, "flows")
    short = None
    if "short_tcp" in p:
        s = p["short_tcp"]
        counts = s.get("bulk_flows") if isinstance(s, dict) else None
        if not isinstance(counts, list) or not counts or not all(isinstance(n, int) and n >= 0 for n in counts):
            raise fail("short_tcp needs src, dst and bulk_flows = [counts >= 0]", "part", i, "short_tcp")
        unknown = set(s) - SHORT_TCP_KEYS
        if unknown:
            raise fail(f"unknown short_tcp key(s) {sorted(unknown)}", "part", i, "short_tcp")
        for k in ("count", "workers", "size"):
            if k in s and not (isinstance(s[k], int) and s[k] > 0):
                raise fail(f"short_tcp {k} must be a whole number > 0", "part", i, "short_tcp")
        ub = s.get("bulk_udp_buffer")
        if ub is not None and not (isinstance(ub, int) and ub > 0):
            raise fail("short_tcp bulk_udp_buffer must be a whole number of bytes > 0", "part", i, "short_tcp")
        cc = s.get("cc", "cubic")
        if not (isinstance(cc, str) and re.fullmatch(r"[a-z0-9_]+", cc)):
            raise fail('short_tcp cc must name a kernel congestion control, e.g. "reno"', "part", i, "short_tcp")
        short = ShortTcp(
            host(s.get("src"), "short_tcp src"),
            host(s.get("dst"), "short_tcp dst"),
            tuple(counts),
            int(s.get("count", 500)),
            int(s.get("workers", 5)),
            int(s.get("size", 1 << 20)),
            cc,
            FlowOptions(udp_buffer=ub),
        )
    if bool(flows) == bool(short):
        raise fail("a part has either flows or short_tcp (exactly one of them)", "part", i)
    protocols = p.get("protocols")
    if protocols is not None:
        known = sorted(set(registry.BULK_CONTRACTS.values()))
        if not isinstance(protocols, list) or not protocols or not all(x in known for x in protocols):
            raise fail(f"protocols = [one or more of {', '.join(known)}]", "part", i, "protocols")
        if flows and all(f.stack for f in flows):
            raise fail("protocols: every flow names its stack, so no stack under test runs", "part", i, "protocols")
    paper = p.get("paper", {})
    if not isinstance(paper, dict) or not all(
        isinstance(v, dict) and all(_num(x) for x in v.values()) for v in paper.values()
    ):
        raise fail("paper = { protocol = { flow = Mb/s } }", "part", i, "paper")
    profile = None
    if "profile" in p:
        pr = p["profile"]
        if not isinstance(pr, dict) or not _num(pr.get("duration")) or pr["duration"] <= 0:
            raise fail("profile = { duration = seconds > 0 [, stacks = [...]] }", "part", i, "profile")
        st = pr.get("stacks")
        profile = Profile(float(pr["duration"]), tuple(st) if st is not None else None)
    sweep = _sweep(p["sweep"], i, fail) if "sweep" in p else None
    if sweep is not None and (short is not None or "band" in p or profile is not None):
        raise fail("a sweep part has bulk flows and no bands or profile (its points are plotted)", "part", i, "sweep")
    capture = p.get("capture", False)
    if not isinstance(capture, bool):
        raise fail("capture = true or false", "part", i, "capture")
    rated = {f.name for f in flows if f.options.rate is not None}
    bands = tuple(_band(b, i, j, set(names), short is not None, fail, rated) for j, b in enumerate(p.get("band", [])))
    if any(b.metric == "paths_separated" for b in bands) and not capture:
        raise fail("a paths_separated band needs capture = true", "part", i, "band")
    return Part(
        label,
        topo_path,
        tuple(flows),
        short,
        {str(k): {str(f): float(x) for f, x in v.items()} for k, v in paper.items()},
        bands,
        profile,
        tuple(protocols) if protocols is not None else None,
        sweep,
        capture,
    )


def _options(f: dict[str, Any], i: int, fail: _Fail) -> FlowOptions:
    where = ("part", i, "flows")
    for k in ("rate",):
        if k in f and not (_num(f[k]) and f[k] > 0):
            raise fail(f"flow {f['name']}: {k} must be Mb/s > 0", *where)
    for k in ("udp_buffer", "frtp_buffer", "size"):
        if k in f and not (isinstance(f[k], int) and f[k] > 0):
            raise fail(f"flow {f['name']}: {k} must be a whole number of bytes > 0", *where)
    io = f.get("io", "memory")
    if io not in IO_MODES:
        raise fail(f"flow {f['name']}: io = {io!r} is not one of {', '.join(IO_MODES)}", *where)
    if "size" in f and io != "disk":
        raise fail(f'flow {f["name"]}: a finite transfer (size) reads and writes files: io = "disk"', *where)
    return FlowOptions(
        float(f["rate"]) if "rate" in f else None, f.get("udp_buffer"), f.get("frtp_buffer"), io, f.get("size")
    )


def _sweep(s: Any, i: int, fail: _Fail) -> Sweep:
    where = ("part", i, "sweep")
    if not isinstance(s, dict):
        raise fail("sweep = { option, values = [...] [, seconds, paper = [{ value, mbps, loss_pct }]] }", *where)
    unknown = set(s) - SWEEP_KEYS
    if unknown:
        raise fail(f"unknown sweep key(s) {sorted(unknown)} (known: {', '.join(sorted(SWEEP_KEYS))})", *where)
    if s.get("option") not in SWEEPABLE:
        raise fail(f"sweep option {s.get('option')!r} is not one of {', '.join(sorted(SWEEPABLE))}", *where)
    values = s.get("values")
    if not isinstance(values, list) or not values or not all(_num(v) and v > 0 for v in values):
        raise fail("sweep values = [numbers > 0]", *where)
    seconds = s.get("seconds")
    if seconds is not None and not (_num(seconds) and seconds > 0):
        raise fail("sweep seconds must be > 0", *where)
    paper = s.get("paper", [])
    if not isinstance(paper, list) or not all(
        isinstance(x, dict)
        and _num(x.get("value"))
        and set(x) <= {"value", "mbps", "loss_pct"}
        and all(_num(v) for v in x.values())
        for x in paper
    ):
        raise fail("sweep paper = [{ value, mbps, loss_pct }, ...]", *where)
    return Sweep(
        s["option"],
        tuple(float(v) for v in values),
        float(seconds) if seconds is not None else None,
        tuple({k: float(v) for k, v in x.items()} for x in paper),
    )


def _band(b: Any, i: int, j: int, flows: set[str], short_tcp: bool, fail: _Fail, rated: set[str]) -> Band:
    where = ("part", i, "band")
    if not isinstance(b, dict):
        raise fail("[[part.band]] must be a table", *where)
    for k in b:
        if k not in BAND_KEYS:
            raise fail(f"unknown key {k!r} in [[part.band]] (known: {', '.join(sorted(BAND_KEYS))})", *where)
    metric = b.get("metric")
    if metric not in METRICS:
        raise fail(f"band {j + 1}: metric {metric!r} is not one of {', '.join(METRICS)}", *where)
    if (metric in SHORT_TCP_METRICS) != short_tcp:
        kind = "a short_tcp part" if short_tcp else "a part of bulk flows"
        raise fail(f"band {j + 1}: metric {metric!r} does not apply to {kind}", *where)
    if b.get("of") == "rate" and (metric != "mean_mbps" or b.get("flow") not in rated):
        raise fail(f'band {j + 1}: of = "rate" bounds mean_mbps of a flow with a rate ({sorted(rated)})', *where)
    if metric == "paths_separated" and b.get("of", "absolute") != "absolute":
        raise fail(f'band {j + 1}: paths_separated is 0 or 1 (of = "absolute")', *where)
    if metric in PER_FLOW and b.get("flow") not in flows:
        raise fail(f"band {j + 1}: {metric} needs flow = one of {sorted(flows)}", *where)
    if metric == "flow_ratio" and b.get("over") not in flows:
        raise fail(f"band {j + 1}: flow_ratio needs over = one of {sorted(flows)}", *where)
    if b.get("of", "absolute") not in UNITS:
        raise fail(f"band {j + 1}: of = {b.get('of')!r} is not one of {', '.join(UNITS)}", *where)
    if b.get("min") is None and b.get("max") is None:
        raise fail(f"band {j + 1}: give min, max or both", *where)
    if b.get("of") == "reference":
        refs = registry.reference_stacks()
        protocol = b.get("protocol", "udt")
        if metric in {"bytes_exact", "paths_separated"} or protocol not in refs:
            why = f"{metric} is 0 or 1" if protocol in refs else f"protocol {protocol!r} has no reference stack"
            raise fail(
                f'band {j + 1}: of = "reference" bounds a measurement against the reference stack\'s in the '
                f"same run ({', '.join(f'{p}: {s}' for p, s in sorted(refs.items()))}); {why}",
                *where,
            )
    if ("profile_min" in b or "profile_max" in b) and b.get("of") != "reference":
        raise fail(f'band {j + 1}: profile_min / profile_max are for a band of = "reference"', *where)
    for k in ("min", "max", "after_s", "profile_min", "profile_max"):
        if k in b and not _num(b[k]):
            raise fail(f"band {j + 1}: {k} must be a number", *where)
    for k in ("paper", "why"):
        if not isinstance(b.get(k), str) or not b[k].strip():
            raise fail(
                f"band {j + 1}: {k!r} must say which paper figure it stands for and why it is where it is", *where
            )
    return Band(
        metric=metric,
        paper=b["paper"],
        why=b["why"],
        flow=b.get("flow"),
        over=b.get("over"),
        after_s=float(b["after_s"]) if "after_s" in b else None,
        min=float(b["min"]) if "min" in b else None,
        max=float(b["max"]) if "max" in b else None,
        of=b.get("of", "absolute"),
        protocol=str(b.get("protocol", "udt")),
        profile_min=float(b["profile_min"]) if "profile_min" in b else None,
        profile_max=float(b["profile_max"]) if "profile_max" in b else None,
    )


def load_all(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    """Every experiment file in ``directory`` by name, in file-name order."""
    return {e.name: e for e in (load(p) for p in sorted(Path(directory).glob("*.toml")))}
