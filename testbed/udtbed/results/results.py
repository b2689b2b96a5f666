"""Results as types: what a run measured, written to and read from the JSON files of a run
directory (``<experiment>.json``), so that the report, the quick profiles and InfluxDB read the
same fields instead of rebuilding tables from string keys.

``ExperimentResult`` ⊃ ``PartResult`` (one topology) ⊃ ``StackResult`` (one stack on that part)
⊃ ``FlowResult`` (one bulk flow) or ``ShortTcpPoint`` (one bulk-flow count of Fig. 13), each
``StackResult`` with the ``Verdict`` of every band of its part.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..emulation.hostwatch import HostReport

Series = list[tuple[float, float]]  # (seconds since the part's start, Mb/s or bytes)
# A verdict read against the reference stack's in the same run (udtbed.experiments.bands.reading): within the
# band; outside it while the reference is inside (or no reference ran); or outside it on the same
# side as the reference, which is then 4.11's own deviation from the paper, not a lowered band.
# A band over repeats (udtbed.results.repeats) also reads "inconclusive": its interval straddles an edge.
Reading = Literal["PASS", "FAIL", "4.11 deviation", "inconclusive"]


def _series(v: Any) -> Series:
    return [(float(t), float(x)) for t, x in v]


@dataclass
class FlowResult:
    name: str
    src: str
    dst: str
    start_s: float
    series_1s: Series  # receiver goodput per second, Mb/s
    series_raw: Series  # (t, cumulative bytes) as the receiver reported them
    mean_mbps: float  # over the run after its warm-up
    bytes: int
    capacity_mbps: float | None = None  # the flow's bottleneck at the run's scale
    time_to_90pct_s: float | None = None
    stack: str = ""  # the stack the flow ran: the stack under test, or the one the flow names
    protocol: str = ""
    rate_mbps: float | None = None  # a fixed rate's goodput ceiling (rate x payload / packet), at the run's scale
    # The sender's last stats line: packets sent (retransmissions included) and retransmitted.
    pkts_sent: int | None = None
    retrans: int | None = None
    losses_recv: int | None = None  # the gaps the receiver found (its stats' losses)
    # UDP datagrams the receiving host dropped for a full socket buffer during the run (all its flows')
    rcvbuf_drops: int | None = None
    cpu_send_pct: float | None = None  # the sender's / receiver's CPU over the run, % of one core
    cpu_recv_pct: float | None = None
    exact: bool | None = None  # a finite flow: the receiver wrote exactly the input (None: not finite)
    window_pkts: int | None = None  # a UDT flow's flow window and buffers, packets (udtbed.experiments.flows.udt_window)

    @property
    def loss_pct(self) -> float | None:
        """Packet-loss rate as the FRTP paper counts it: retransmissions over packets sent, %."""
        return 100.0 * self.retrans / self.pkts_sent if self.pkts_sent and self.retrans is not None else None

    def mean_after(self, t0: float) -> float | None:
        xs = [x for t, x in self.series_1s if t > t0]
        return sum(xs) / len(xs) if xs else None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FlowResult:
        return cls(
            name=d["name"],
            src=d["src"],
            dst=d["dst"],
            start_s=float(d["start_s"]),
            series_1s=_series(d["series_1s"]),
            series_raw=_series(d["series_raw"]),
            mean_mbps=float(d["mean_mbps"]),
            bytes=int(d["bytes"]),
            capacity_mbps=d.get("capacity_mbps"),
            time_to_90pct_s=d.get("time_to_90pct_s"),
            stack=d.get("stack", ""),
            protocol=d.get("protocol", ""),
            rate_mbps=d.get("rate_mbps"),
            pkts_sent=d.get("pkts_sent"),
            retrans=d.get("retrans"),
            losses_recv=d.get("losses_recv"),
            rcvbuf_drops=d.get("rcvbuf_drops"),
            cpu_send_pct=d.get("cpu_send_pct"),
            cpu_recv_pct=d.get("cpu_recv_pct"),
            exact=d.get("exact"),
            window_pkts=d.get("window_pkts"),
        )


@dataclass
class SweepPoint:
    """One value of a part's sweep (:class:`udtbed.experiments.experiment.Sweep`): the option's value as the
    experiment gives it (at the paper's scale) and the flows it ran."""

    value: float
    flows: list[FlowResult]
    host: HostReport | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepPoint:
        return cls(float(d["value"]), [FlowResult.from_dict(f) for f in d["flows"]], d.get("host"))


@dataclass
class ShortTcpPoint:
    """Fig. 13: the short TCP flows' aggregate beside ``bulk_flows`` bulk flows."""

    bulk_flows: int
    short_aggregate_mbps: float
    short_flows: int
    bulk_mean_mbps: list[float]
    bulk_series_1s: dict[str, Series]
    host: HostReport | None = None
    # Packets the senders' own NIC dropped meanwhile (a topology host with `nic`; None: none).
    nic_dropped: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShortTcpPoint:
        return cls(
            bulk_flows=int(d["bulk_flows"]),
            short_aggregate_mbps=float(d["short_aggregate_mbps"]),
            short_flows=int(d["short_flows"]),
            bulk_mean_mbps=[float(x) for x in d["bulk_mean_mbps"]],
            bulk_series_1s={k: _series(v) for k, v in d["bulk_series_1s"].items()},
            host=d.get("host"),
            nic_dropped=d.get("nic_dropped"),
        )


@dataclass
class Verdict:
    """One band judged on one stack's part: the measured value against the bounds at this run's
    scale. ``ok`` is None when the value could not be measured (that fails a profile too).
    ``reading`` is ``ok`` read against the reference stack's verdict on the same band in the same
    run (``ref_stack``, its ``ref_value`` and ``ref_ok``; empty for the reference itself or when
    none ran); None when not measured, or in a result written before readings. A ``relative``
    verdict's band is in units of ``ref_value`` (``of = "reference"``)."""

    metric: str
    band: str  # Band.describe()
    paper: str
    why: str
    value: float | None
    low: float | None
    high: float | None
    ok: bool | None
    note: str = ""
    reading: Reading | None = None
    ref_stack: str = ""
    ref_value: float | None = None
    ref_ok: bool | None = None
    relative: bool = False  # the band's unit is ref_value (of = "reference"): udtbed.experiments.bands
    # Over repeats (udtbed.results.repeats): how many, the interval of ``value`` (for a relative band,
    # of the per-pair ratio to the reference, ``ratio``), the three-way judgement, and about how
    # many repeats in all would decide an inconclusive one (None: none would, at this mean).
    n: int = 1
    ci_low: float | None = None
    ci_high: float | None = None
    ratio: float | None = None
    judgement: str | None = None  # udtharness.uncertainty.Judgement's value
    repeats_to_decide: int | None = None
    samples: list[float | None] = field(default_factory=list)
    # What stands for a value there is none of because the run ended first ("not within the 20 s
    # run": a flow that never reached 90 %); "" reads "not measured".
    shown: str = ""
    # What the host watch flagged on the runs behind the verdict (udtbed.emulation.hostwatch.machine_flags:
    # another process on the run's CPUs, steal, late releases): such a verdict measured the
    # machine as well as the stacks, so it is inconclusive whatever its value (udtbed.results.repeats).
    machine_flags: list[str] = field(default_factory=list)

    @property
    def value_text(self) -> str:
        """The value as the report shows it, without its interval."""
        return (self.shown or "not measured") if self.value is None else f"{self.value:.3g}"

    @property
    def mark(self) -> str:
        if self.judgement == "inconclusive":
            return "~"
        return {True: "✓", False: "✕", None: "?"}[self.ok]

    @property
    def want(self) -> str:
        """The bounds at the run's scale: '≥ 85', '≤ 15', '50 – 60' (or '–': no bound known)."""
        lo, hi = self.low, self.high
        if lo is not None and hi is not None:
            return f"{lo:.3g} – {hi:.3g}"
        return f"≥ {lo:.3g}" if lo is not None else f"≤ {hi:.3g}" if hi is not None else "–"

    @property
    def ref(self) -> str:
        """The reference stack's value in the same run, e.g. 'libudt 54.9' ('' when none ran)."""
        if not self.ref_stack:
            return ""
        return f"{self.ref_stack} {'–' if self.ref_value is None else f'{self.ref_value:.3g}'}"

    @property
    def interval(self) -> str:
        """Over repeats: ' [low, high] n = N' (of the ratio to the reference for a relative band),
        and what would decide an inconclusive one; '' for one run."""
        if self.n < 2 or self.ci_low is None or self.ci_high is None:
            return ""
        of = f" ratio {self.ratio:.3g}" if self.ratio is not None else ""
        text = f"{of} [{self.ci_low:.3g}, {self.ci_high:.3g}] n = {self.n}"
        if self.judgement == "inconclusive" and not self.machine_flags:
            more = self.repeats_to_decide
            text += f"; about {more} repeats would decide it" if more else "; no number of repeats would decide it"
        return text

    def line(self) -> str:
        value = self.value_text if self.value is None else f"{self.value_text}{self.interval}"
        want = f"want {self.want}" + (f"; {self.ref}" if self.ref else "")
        reading = f": {self.reading}" if self.reading else ""
        return f"{self.mark} {self.band}: {value} ({want}){reading}{' - ' + self.note if self.note else ''}"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(
            metric=d["metric"],
            band=d["band"],
            paper=d["paper"],
            why=d["why"],
            value=d.get("value"),
            low=d.get("low"),
            high=d.get("high"),
            ok=d.get("ok"),
            note=d.get("note", ""),
            reading=d.get("reading"),
            ref_stack=d.get("ref_stack", ""),
            ref_value=d.get("ref_value"),
            ref_ok=d.get("ref_ok"),
            relative=d.get("relative", False),
            n=d.get("n", 1),
            ci_low=d.get("ci_low"),
            ci_high=d.get("ci_high"),
            ratio=d.get("ratio"),
            judgement=d.get("judgement"),
            repeats_to_decide=d.get("repeats_to_decide"),
            samples=list(d.get("samples", [])),
            shown=d.get("shown", ""),
            machine_flags=list(d.get("machine_flags", [])),
        )


@dataclass
class StackResult:
    stack: str
    protocol: str  # "udt", "sabul" or "tcp": which of the paper's numbers and bands apply
    flows: list[FlowResult] = field(default_factory=list)
    points: list[ShortTcpPoint] = field(default_factory=list)
    short_tcp_workers: int | None = None
    short_tcp_cc: str | None = None  # the short flows' congestion control
    metrics: dict[str, float | None] = field(default_factory=dict)
    host: HostReport | None = None  # udtbed.emulation.hostwatch: CPU, emulator timing, flags
    verdicts: list[Verdict] = field(default_factory=list)
    sweep: list[SweepPoint] = field(default_factory=list)
    # udtbed.emulation.capture: per host interface what it carried, the paths' separation, inter-packet times
    capture: dict[str, Any] | None = None
    # Which repeat of the part this is (0: the first; udtbed run --repeat) and how long its flows
    # waited, by the repeat's seed, before they started.
    repeat: int = 0
    start_jitter_s: float = 0.0

    def flow(self, name: str) -> FlowResult:
        for f in self.flows:
            if f.name == name:
                return f
        raise KeyError(f"no flow {name!r} in {self.stack}'s result ({', '.join(f.name for f in self.flows)})")

    @property
    def _hosts(self) -> list[HostReport]:
        """The host reports of the measurement: one per short-flow or sweep point, else the part's."""
        hosts = [p.host for p in self.points or self.sweep] if self.points or self.sweep else [self.host]
        return [h for h in hosts if h]

    @property
    def timing_flags(self) -> list[str]:
        return [fl for h in self._hosts for fl in h.get("flags", [])]

    @property
    def machine_flags(self) -> list[str]:
        """Those of the timing flags the machine raised whatever the stacks did: emulators that
        released frames late, the hypervisor's steal, busy processes outside the run
        (udtbed.emulation.hostwatch.machine_flags). A sender pacing faster than the bottleneck is not one."""
        from ..emulation.hostwatch import machine_flags

        return [fl for h in self._hosts for fl in machine_flags(h)]

    @property
    def passed(self) -> bool | None:
        """All bands met (None: no band judged this stack)."""
        if not self.verdicts:
            return None
        return all(v.ok for v in self.verdicts)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StackResult:
        return cls(
            stack=d["stack"],
            protocol=d["protocol"],
            flows=[FlowResult.from_dict(f) for f in d.get("flows", [])],
            points=[ShortTcpPoint.from_dict(p) for p in d.get("points", [])],
            short_tcp_workers=d.get("short_tcp_workers"),
            short_tcp_cc=d.get("short_tcp_cc"),
            metrics=dict(d.get("metrics", {})),
            host=d.get("host"),
            verdicts=[Verdict.from_dict(v) for v in d.get("verdicts", [])],
            sweep=[SweepPoint.from_dict(p) for p in d.get("sweep", [])],
            capture=d.get("capture"),
            repeat=d.get("repeat", 0),
            start_jitter_s=d.get("start_jitter_s", 0.0),
        )


@dataclass
class PartResult:
    label: str
    topology: str
    topology_file: str
    topology_paper: str
    links: dict[str, Any]  # link index -> the emulated link's spec per direction; "nic:<host>" -> a host NIC's tc qdisc
    calibration: list[dict[str, Any]]  # udtbed.emulation.calibrate.as_json
    calibration_ok: bool
    paper: dict[str, dict[str, float]]
    stacks: dict[str, StackResult] = field(default_factory=dict)
    link_stats: dict[str, Any] = field(default_factory=dict)
    # A sweep part's option, values (as the experiment gives them) and the paper's points.
    sweep: dict[str, Any] | None = None
    # The part's core plan and pinning (udtbed.emulation.cores.CoreCheck.as_json): need, have, ok, pinned.
    cores: dict[str, Any] | None = None
    # The emulated interfaces' offloads as read after the build (udtbed.emulation.network.Network.offloads).
    offloads: dict[str, dict[str, int]] | None = None
    # The repeats after the first (``stacks`` is the first), each its stacks' results.
    more_repeats: list[dict[str, StackResult]] = field(default_factory=list)

    def repeats(self) -> list[dict[str, StackResult]]:
        """Every repeat's results, the first first."""
        return [self.stacks, *self.more_repeats]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartResult:
        return cls(
            label=d["label"],
            topology=d["topology"],
            topology_file=d["topology_file"],
            topology_paper=d["topology_paper"],
            links=dict(d.get("links", {})),
            calibration=list(d["calibration"]),
            calibration_ok=bool(d["calibration_ok"]),
            paper=d.get("paper", {}),
            stacks={k: StackResult.from_dict(v) for k, v in d.get("stacks", {}).items()},
            link_stats=d.get("link_stats", {}),
            sweep=d.get("sweep"),
            cores=d.get("cores"),
            offloads=d.get("offloads"),
            more_repeats=[{k: StackResult.from_dict(v) for k, v in r.items()} for r in d.get("more_repeats", [])],
        )


@dataclass
class ExperimentResult:
    experiment: str
    title: str
    figure: str
    note: str
    scale: float
    duration_s: float
    warmup_s: float
    backend: str
    parts: list[PartResult] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=dict)  # the run's metadata (run.json) at the time

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json())
        return path

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentResult:
        return cls(
            experiment=d["experiment"],
            title=d["title"],
            figure=d["figure"],
            note=d.get("note", ""),
            scale=float(d["scale"]),
            duration_s=float(d["duration_s"]),
            warmup_s=float(d["warmup_s"]),
            backend=d["backend"],
            parts=[PartResult.from_dict(p) for p in d["parts"]],
            run=d.get("run", {}),
        )

    @classmethod
    def read(cls, path: Path) -> ExperimentResult:
        return cls.from_dict(json.loads(Path(path).read_text()))
