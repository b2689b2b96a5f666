"""Our simulator's TCP checked against NS-2 itself (issue 29).

``impl/netsim/src/tcp.rs`` claims to model NS-2's ``Agent/TCP/Sack1`` sending to
``Agent/TCPSink/Sack1`` as the 2004 papers ran it. This module runs the same dumbbells in both:
for each :class:`CrossCheck` it writes an NS-2 Tcl script (:func:`ns2_script`), runs ``ns`` on it
and parses what the script prints (:func:`parse_ns2_output`); it builds the equivalent
``udt-sim`` run spec (:func:`sim_spec`), runs it and reads the same figures. Each scenario runs
under several seeds, the same flows' start times in both simulators (drawn from the seed), and
the comparison is per-flow mean goodput (ratio and both spreads), the aggregate, the bottleneck's
drops and Jain's index. A scenario **agrees** when its mean per-flow goodput, ours over NS-2's,
lies within :data:`GOODPUT_TOLERANCE` (docs/simulator.md, "Checked against NS-2", says why that
tolerance).

The topology is docs/simulator.md's: flow *i*'s sender node ``s_i`` has its access link to the
router ``r1`` (one-way delay ``rtt/2 − D``, rate :data:`ACCESS_BPS`, and ours the same rate
here), ``r1 → r2`` is the bottleneck (rate, DropTail queue in packets, delay ``D``, random
loss), and every sink sits on ``r2`` itself, as our receivers sit right after the bottleneck.
ACKs go back through ``r2 → r1`` (the same rate and delay, a queue no ACK stream fills) and the
access link. NS-2's ``queue-limit Q`` holds Q − 1 waiting packets plus the one on the wire
(``DropTail::enque`` drops when ``length + 1 >= qlim_``), which is what our ``queue_pkts``
counts (the backlog includes the frame being serialised), so both get the same Q.
"""

from __future__ import annotations

import enum
import json
import math
import random
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scipy import stats  # type: ignore[import-untyped]
from udtharness import uncertainty

from . import sim

# NS-2's ``ns`` binary (Debian's ``ns2`` package; ``make setup`` installs it).
NS_BINARY = "ns"

# Payload bytes per segment and the TCP/IP header NS-2 adds (``tcpip_base_hdr_size_``): the
# 1500-byte packets our model sends (tcp.rs, ``TcpConfig::mss`` and ``HEADER_BYTES``).
MSS = 1460
HEADER = 40
# Our TCP's default advertised window (``TcpConfig::window_pkts``); NS-2 gets the same.
WINDOW_PKTS = 20_000
# Access links: NS-2's links need a rate, so 100 Gb/s (0.12 µs a packet), and ours get the same
# (``access_rate_mbps``; by default they have none).
ACCESS_BPS = 100e9
# Queues nothing should fill (access links, the reverse bottleneck).
HUGE_QUEUE = 1_000_000
# The most each seed after the first moves a flow's start (as ``sim.START_JITTER_S``).
START_JITTER_S = sim.START_JITTER_S

# Ours over NS-2, mean per-flow goodput: a scenario agrees within this (docs/simulator.md,
# "Checked against NS-2": the differences the model documents, and the seeds' own spread).
GOODPUT_TOLERANCE = 0.05

# The NS-2 settings that make its agents the model tcp.rs claims, each with why. Set as
# ``Agent/TCP set <name> <value>`` (or the class named) before any agent is created.
NS2_SETTINGS: tuple[tuple[str, str, str, str], ...] = (
    ("Agent/TCP", "packetSize_", str(MSS), "1460 bytes of payload + 40 of header = 1500 on the wire (mss)"),
    ("Agent/TCP", "tcpip_base_hdr_size_", str(HEADER), "the 40-byte header our model counts (HEADER_BYTES)"),
    ("Agent/TCP", "window_", str(WINDOW_PKTS), "the advertised window (window_pkts, default 20 000)"),
    ("Agent/TCP", "maxcwnd_", "0", "no cap on cwnd but window_"),
    ("Agent/TCP", "windowInit_", "2", "initial cwnd 2 (initial_cwnd; 2.35's default too)"),
    ("Agent/TCP", "ssthresh_", "0", "no initial ssthresh (initial_ssthresh unbounded)"),
    ("Agent/TCP", "syn_", "false", "no SYN: our one-way agents send data at once (2.35 defaults to true)"),
    ("Agent/TCP", "delay_growth_", "false", "no cwnd growth held back for a SYN"),
    ("Agent/TCP", "minrto_", "0.2", "min RTO 200 ms (min_rto)"),
    ("Agent/TCP", "rtxcur_init_", "3.0", "initial RTO 3 s (initial_rto)"),
    ("Agent/TCP", "maxrto_", "60", "max RTO 60 s (max_rto)"),
    ("Agent/TCP", "tcpTick_", "0.000001", "µs timer resolution (our RTT estimator; 2.35's default is 10 ms)"),
    ("Agent/TCP", "singledup_", "0", "no Limited Transmit (2.35's default is on)"),
    ("Agent/TCP", "maxburst_", "0", "no maxburst_ (the default)"),
    ("Agent/TCP", "numdupacks_", "3", "fast retransmit on the third duplicate ACK"),
    ("Agent/TCP", "bugFix_", "true", "one window halving per window of data (recover)"),
    ("Agent/TCP", "timestamps_", "false", "Karn's one timed segment, no timestamps"),
    ("Agent/TCP", "slow_start_restart_", "false", "no slow-start restart after idle (a bulk source is never idle)"),
    ("Agent/TCP", "ecn_", "0", "no ECN"),
    ("Agent/TCPSink", "generateDSacks_", "false", "plain SACK, no D-SACK"),
    ("Agent/TCPSink", "maxSackBlocks_", "3", "three SACK blocks per ACK (MAX_SACK_BLOCKS)"),
)

# The model's profiles (``tcp_profile`` in a run spec; tcp.rs, ``TcpConfig::profile``).
DEFAULT_PROFILE = "default"
PROFILES = sim.TCP_PROFILES

# ``ns2-2.26``: NS-2 2.35's agents set to 2.26's defaults, the papers' NS-2 (docs/simulator.md,
# "The papers' NS-2 was 2.26"); each replaces or adds to :data:`NS2_SETTINGS`.
NS2_226_SETTINGS: tuple[tuple[str, str, str, str], ...] = (
    ("Agent/TCP", "syn_", "true", "2.26's SYN: a 40-byte SYN first (syn)"),
    ("Agent/TCP", "delay_growth_", "true", "cwnd 1 until the SYN's ACK, then windowInit_ (syn)"),
    ("Agent/TCP", "minrto_", "1", "2.26's min RTO 1 s (min_rto)"),
    ("Agent/TCP", "rtxcur_init_", "6.0", "2.26's initial RTO 6 s (initial_rto)"),
    ("Agent/TCP", "maxrto_", "64", "2.26's max RTO 64 s (max_rto)"),
    ("Agent/TCP", "tcpTick_", "0.01", "2.26's 10 ms RTT clock (rtt_tick)"),
    ("Agent/TCP", "singledup_", "1", "2.26's Limited Transmit (limited_transmit)"),
    ("Agent/TCP", "precisionReduce_", "false", "2.26's whole-segment window reductions (integer_reductions)"),
)


def ns2_settings(profile: str = DEFAULT_PROFILE) -> tuple[tuple[str, str, str, str], ...]:
    """The ``Agent`` variables NS-2 gets for our model's ``profile``."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
    if profile == DEFAULT_PROFILE:
        return NS2_SETTINGS
    over = {(c, v): (c, v, value, why) for c, v, value, why in NS2_226_SETTINGS}
    kept = tuple(over.pop((c, v), (c, v, value, why)) for c, v, value, why in NS2_SETTINGS)
    return kept + tuple(over.values())


@dataclass(frozen=True)
class CrossCheck:
    """One dumbbell of TCP Sack1 flows, run in both simulators."""

    name: str
    flows: int
    rtt_ms: float
    rate_mbps: float
    queue_pkts: int
    loss: float = 0.0
    duration_s: float = 30.0
    warmup_s: float = 10.0
    delay_ms: float = 0.0  # D, the bottleneck's own one-way delay
    quick: bool = False

    @property
    def bdp_pkts(self) -> float:
        return self.rate_mbps * 1e6 * self.rtt_ms / 1e3 / 8 / (MSS + HEADER)


def _bdp(rate_mbps: float, rtt_ms: float) -> int:
    return max(1, round(rate_mbps * 1e6 * rtt_ms / 1e3 / 8 / (MSS + HEADER)))


def _scenario(flows: int, rtt_ms: float, queue: str, loss: float, duration_s: float, quick: bool = False) -> CrossCheck:
    rate = RATE_FOR_RTT[rtt_ms]
    bdp = _bdp(rate, rtt_ms)
    q = bdp if queue == "bdp" else max(SMALL_QUEUE_MIN, round(bdp / 8))
    tag = f"{flows}f-{rtt_ms:g}ms-{rate:g}M-q{q}{'-loss' if loss else ''}"
    warmup = min(10.0, duration_s / 3)
    return CrossCheck(tag, flows, rtt_ms, rate, q, loss, duration_s, warmup, quick=quick)


# The bottleneck's rate at each RTT: the BDP is 83 packets at every RTT, so that the queues, the
# windows and the sawtooth's period (in RTTs) are alike and only the RTT (and with it the RTO's
# 200 ms floor against the RTT) changes.
RATE_FOR_RTT = {1.0: 1000.0, 10.0: 100.0, 100.0: 10.0}
# The small queue: 1/8 BDP, at least this many packets.
SMALL_QUEUE_MIN = 10
# Random loss on the bottleneck in the lossy scenarios.
LOSS = 0.001


def scenarios(quick: bool = False) -> list[CrossCheck]:
    """The cross-check points: 1, 2 and 10 flows; RTTs 1, 10 and 100 ms; a BDP queue (83
    packets) and a small one (1/8 BDP: 10); with and without 0.1 % random loss: 36 points of
    60 s, the first 10 s left out. ``quick``: three 20 s points at 10 ms that the tests run
    (a fraction of a second each)."""
    if quick:
        return [
            _scenario(1, 10.0, "bdp", 0.0, 20.0, True),
            _scenario(2, 10.0, "small", 0.0, 20.0, True),
            _scenario(10, 10.0, "bdp", LOSS, 20.0, True),
        ]
    return [
        _scenario(flows, rtt, queue, loss, 60.0)
        for rtt in RATE_FOR_RTT
        for flows in (1, 2, 10)
        for queue in ("bdp", "small")
        for loss in (0.0, LOSS)
    ]


def start_times(sc: CrossCheck, seed: int) -> list[float]:
    """Each flow's start, s: up to :data:`START_JITTER_S` after 0, drawn from the seed, the
    same in both simulators (so that only the loss streams differ)."""
    rng = random.Random(f"ns2check/{sc.name}/{seed}")
    return [round(rng.uniform(0, START_JITTER_S), 4) for _ in range(sc.flows)]


# --- NS-2 --------------------------------------------------------------------------------


def _tcl_num(x: float) -> str:
    return repr(float(x))


def ns2_seed(seed: int) -> int:
    """NS-2's RNG seed for our ``seed``: a large one drawn from it. NS-2's MRG32k3a seeded with
    a small integer k draws about k·3e-4 first (seeds 1, 2, 3: 0.0003, 0.0007, 0.0010), so a
    0.1 % loss model drops the very first packet and the flow waits out the 3 s initial RTO."""
    return random.Random(f"ns2check/ns2-seed/{seed}").randrange(1, 2**31 - 1)


def ns2_script(sc: CrossCheck, seed: int, profile: str = DEFAULT_PROFILE) -> str:
    """The Tcl script that runs ``sc`` in NS-2 under ``seed``, its agents set as our model's
    ``profile`` (:func:`ns2_settings`). It prints, at the measured
    window's start, every :data:`SNAP_S` after and at its end, ``ns2check snap <time> <bytes_
    of each sink>``, and at the end ``ns2check drops <bottleneck drops> <of which random loss>``.
    The sinks' ``bytes_`` is a C ``int``: it wraps after 2 GiB (17 s at 1 Gb/s), so the parser
    adds up the steps between snapshots modulo 2^32."""
    starts = start_times(sc, seed)
    access_ms = sc.rtt_ms / 2 - sc.delay_ms
    if access_ms < 0:
        raise ValueError(f"{sc.name}: rtt_ms {sc.rtt_ms} is less than twice delay_ms {sc.delay_ms}")
    rate_bps = sc.rate_mbps * 1e6
    lines = [
        f"# {sc.name}, seed {seed}: written by testbed/udtbed/simulation/ns2check.py",
        "set ns [new Simulator]",
        # The default RNG drives the ErrorModel's uniform draws (and nothing else here).
        f"$defaultRNG seed {ns2_seed(seed)}",
    ]
    for cls, var, value, why in ns2_settings(profile):
        lines.append(f"{cls} set {var} {value} ;# {why}")
    lines += [
        "Queue/DropTail set queue_in_bytes_ false",
        "set r1 [$ns node]",
        "set r2 [$ns node]",
        f"$ns simplex-link $r1 $r2 {_tcl_num(rate_bps)} {_tcl_num(sc.delay_ms / 1e3)} DropTail",
        f"$ns simplex-link $r2 $r1 {_tcl_num(rate_bps)} {_tcl_num(sc.delay_ms / 1e3)} DropTail",
        f"$ns queue-limit $r1 $r2 {sc.queue_pkts}",
        f"$ns queue-limit $r2 $r1 {HUGE_QUEUE}",
        # Counts every packet the bottleneck drops, the queue's and the error model's.
        "set devnull [open /dev/null w]",
        "set qmon [$ns monitor-queue $r1 $r2 $devnull]",
    ]
    if sc.loss > 0:
        lines += [
            # Random loss between the queue and the wire (``lossmodel``): a lost packet leaves
            # the queue but is not transmitted, nearly ours (lost before the queue). The error
            # model resumes the queue after uniform(8·size/bandwidth_): bandwidth_ at the link's
            # own rate (the default 2 Mb/s would stall a fast link for milliseconds per loss).
            "set em [new ErrorModel]",
            "$em unit pkt",
            f"$em set rate_ {sc.loss!r}",
            f"$em set bandwidth_ {_tcl_num(rate_bps)}",
            "$em ranvar [new RandomVariable/Uniform]",
            "$ns lossmodel $em $r1 $r2",
            # Its drops also pass a monitor of their own, to tell them from the queue's.
            "set lmon [new QueueMonitor]",
            "set lsnoop [new SnoopQueue/Drop]",
            "$lsnoop set-monitor $lmon",
            "$lsnoop target [$em drop-target]",
            "$em drop-target $lsnoop",
        ]
    for i in range(sc.flows):
        lines += [
            f"set s({i}) [$ns node]",
            f"$ns simplex-link $s({i}) $r1 {_tcl_num(ACCESS_BPS)} {_tcl_num(access_ms / 1e3)} DropTail",
            f"$ns simplex-link $r1 $s({i}) {_tcl_num(ACCESS_BPS)} {_tcl_num(access_ms / 1e3)} DropTail",
            f"$ns queue-limit $s({i}) $r1 {HUGE_QUEUE}",
            f"$ns queue-limit $r1 $s({i}) {HUGE_QUEUE}",
            f"set tcp({i}) [new Agent/TCP/Sack1]",
            f"$tcp({i}) set fid_ {i}",
            f"$ns attach-agent $s({i}) $tcp({i})",
            f"set sink({i}) [new Agent/TCPSink/Sack1]",
            f"$ns attach-agent $r2 $sink({i})",
            f"$ns connect $tcp({i}) $sink({i})",
            f"set ftp({i}) [new Application/FTP]",
            f"$ftp({i}) attach-agent $tcp({i})",
            f'$ns at {_tcl_num(starts[i])} "$ftp({i}) start"',
        ]
    sinks = " ".join(f"[$sink({i}) set bytes_]" for i in range(sc.flows))
    lost = "[$lmon set pdrops_]" if sc.loss > 0 else "0"
    lines += [
        "proc snap {} {",
        "    global ns sink",
        f'    puts "ns2check snap [$ns now] {sinks}"',
        "}",
        "proc finish {} {",
        "    global ns qmon" + (" lmon" if sc.loss > 0 else ""),
        "    snap",
        f'    puts "ns2check drops [$qmon set pdrops_] {lost}"',
        "    exit 0",
        "}",
        *(f'$ns at {_tcl_num(t)} "snap"' for t in _snap_times(sc)),
        f'$ns at {_tcl_num(sc.duration_s)} "finish"',
        "$ns run",
    ]
    return "\n".join(lines) + "\n"


# NS-2 prints the sinks' byte counters this often within the measured window.
SNAP_S = 1.0


def _snap_times(sc: CrossCheck) -> list[float]:
    n = math.ceil((sc.duration_s - sc.warmup_s) / SNAP_S - 1e-9)
    return [round(sc.warmup_s + k * SNAP_S, 9) for k in range(n)]


@dataclass(frozen=True)
class Figures:
    """What one run of one scenario gave (either simulator)."""

    goodput_mbps: tuple[float, ...]  # per flow, payload, over [warmup_s, duration_s]
    drops: int  # packets the bottleneck dropped over the whole run (queue and random loss)
    random_drops: int  # of which the random loss


class NsMissing(RuntimeError):
    """``ns`` is not installed."""


def ns_binary() -> str | None:
    """The path of NS-2's ``ns``, or None."""
    return shutil.which(NS_BINARY)


def parse_ns2_output(text: str, sc: CrossCheck) -> Figures:
    """The figures from what :func:`ns2_script`'s script printed: the sinks' ``bytes_`` count
    1500 bytes per in-order segment (TCPSink adds the packet's size), so the payload is
    ``bytes_ · MSS / (MSS + HEADER)``."""
    snaps: list[tuple[float, list[int]]] = []
    drops: tuple[int, int] | None = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] != "ns2check":
            continue
        if parts[1] == "drops":
            drops = (int(parts[2]), int(parts[3]))
        elif parts[1] == "snap":
            snaps.append((float(parts[2]), [int(float(x)) for x in parts[3:]]))
    if len(snaps) < 2 or drops is None:
        raise ValueError(f"{sc.name}: NS-2's output lacks the snap or drops lines:\n{text[-2000:]}")
    if any(len(b) != sc.flows for _, b in snaps):
        raise ValueError(f"{sc.name}: NS-2 printed a snapshot without {sc.flows} sinks")
    delivered = [0] * sc.flows
    for (_, before), (_, after) in zip(snaps, snaps[1:], strict=False):
        for i in range(sc.flows):
            delivered[i] += (after[i] - before[i]) % 2**32
    t0, t1 = snaps[0][0], snaps[-1][0]
    scale = MSS / (MSS + HEADER) * 8 / 1e6 / (t1 - t0)
    return Figures(tuple(d * scale for d in delivered), drops[0], drops[1])


def run_ns2(sc: CrossCheck, seed: int, ns: str | None = None, profile: str = DEFAULT_PROFILE) -> Figures:
    """Runs ``sc`` under ``seed`` in NS-2."""
    ns = ns or ns_binary()
    if ns is None:
        raise NsMissing("NS-2's `ns` is not installed: `make setup` installs it (Debian package ns2)")
    with tempfile.TemporaryDirectory(prefix="ns2check-") as d:
        script = Path(d) / "run.tcl"
        script.write_text(ns2_script(sc, seed, profile))
        p = subprocess.run([ns, str(script)], capture_output=True, text=True, check=False, cwd=d)
    if p.returncode != 0:
        raise RuntimeError(f"ns failed ({p.returncode}) on {sc.name} seed {seed}: {p.stderr.strip()[-2000:]}")
    return parse_ns2_output(p.stdout, sc)


# --- ours --------------------------------------------------------------------------------

SAMPLE_S = 0.5


def sim_spec(sc: CrossCheck, seed: int, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """The ``udt-sim`` run spec of ``sc`` under ``seed`` (impl/netsim/src/scenario.rs), its
    flows on the model's ``profile``."""
    extra = {} if profile == DEFAULT_PROFILE else {"tcp_profile": profile}
    return {
        "seed": seed,
        "duration_s": sc.duration_s,
        "sample_s": SAMPLE_S,
        "bottleneck": {
            "rate_mbps": sc.rate_mbps,
            "queue_pkts": sc.queue_pkts,
            "delay_ms": sc.delay_ms,
            "loss": sc.loss,
            # NS-2's access links, whose 0.12 µs a packet spaces a burst: with ours unlimited a
            # window's packets reach the bottleneck in the same ns, and at 1 ms on a 10-packet
            # queue one of 10 flows starved in 2 of 10 seeds (docs/simulator.md).
            "access_rate_mbps": ACCESS_BPS / 1e6,
        },
        "flows": [
            {"protocol": "tcp", "rtt_ms": sc.rtt_ms, "start_s": t, "window_pkts": WINDOW_PKTS, **extra}
            for t in start_times(sc, seed)
        ],
    }


def parse_sim_result(result: dict[str, Any], sc: CrossCheck) -> Figures:
    """The figures from a ``udt-sim`` result: each flow's goodput samples after the warm-up."""
    goodput = []
    for f in result["flows"]:
        xs = [x for t, x in zip(f["times_s"], f["throughput_mbps"], strict=True) if t > sc.warmup_s + 1e-9]
        goodput.append(sum(xs) / len(xs) if xs else 0.0)
    b = result["bottleneck"]
    return Figures(tuple(goodput), int(b["dropped_queue"]) + int(b["dropped_loss"]), int(b["dropped_loss"]))


def run_ours(sc: CrossCheck, seed: int, simulator: Path = sim.SIMULATOR, profile: str = DEFAULT_PROFILE) -> Figures:
    return parse_sim_result(sim.run_one(sim_spec(sc, seed, profile), simulator), sc)


# --- comparison --------------------------------------------------------------------------


def jain(xs: Sequence[float]) -> float:
    sq = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * sq) if sq > 0 else 1.0


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _sd(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


@dataclass
class Side:
    """One simulator's runs of a scenario over the seeds."""

    runs: list[Figures] = field(default_factory=list)

    @property
    def per_flow(self) -> list[float]:
        """Every flow's goodput in every seed."""
        return [g for r in self.runs for g in r.goodput_mbps]

    @property
    def mean(self) -> float:
        return _mean(self.per_flow)

    @property
    def sd(self) -> float:
        """The spread of per-flow goodput over flows and seeds."""
        return _sd(self.per_flow)

    @property
    def aggregate(self) -> float:
        return _mean([sum(r.goodput_mbps) for r in self.runs])

    @property
    def drops(self) -> float:
        return _mean([r.drops for r in self.runs])

    @property
    def jain(self) -> float:
        return _mean([jain(r.goodput_mbps) for r in self.runs])

    def summary(self) -> dict[str, Any]:
        return {
            "per_flow_mean_mbps": self.mean,
            "per_flow_sd_mbps": self.sd,
            "aggregate_mbps": self.aggregate,
            "drops": self.drops,
            "jain": self.jain,
            "runs": [asdict(r) for r in self.runs],
        }


class Verdict(enum.Enum):
    AGREE = "✓"
    DISAGREE = "✕"
    INCONCLUSIVE = "~"


@dataclass
class Comparison:
    scenario: CrossCheck
    ours: Side
    ns2: Side
    tolerance: float = GOODPUT_TOLERANCE

    @property
    def ratio(self) -> float:
        return self.ours.mean / self.ns2.mean if self.ns2.mean > 0 else math.inf

    def _per_seed(self) -> tuple[list[float], list[float]]:
        return [_mean(r.goodput_mbps) for r in self.ours.runs], [_mean(r.goodput_mbps) for r in self.ns2.runs]

    @property
    def stderr_ratio(self) -> float:
        """The ratio's standard error from the seeds' scatter: each side's per-seed means of the
        per-flow goodput (Welch: the two loss streams are independent), relative to NS-2's mean."""
        a, b = self._per_seed()
        if self.ns2.mean <= 0 or len(a) < 2 or len(b) < 2:
            return 0.0
        return math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) / self.ns2.mean

    @property
    def significance_bound(self) -> float:
        """How far from 1 the ratio must be to differ at :data:`uncertainty.CONFIDENCE`: the
        Welch–Satterthwaite Student's t quantile times :attr:`stderr_ratio` (0 with one seed or
        no scatter: then every difference counts)."""
        a, b = self._per_seed()
        if len(a) < 2 or len(b) < 2:
            return 0.0
        va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
        if va + vb == 0:
            return 0.0
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        return float(stats.t.ppf(0.5 + uncertainty.CONFIDENCE / 2, df)) * self.stderr_ratio

    @property
    def verdict(self) -> Verdict:
        """AGREE: the ratio of the means within the tolerance. DISAGREE: beyond it, and the
        difference significant (beyond :attr:`significance_bound`). INCONCLUSIVE: beyond it but
        within the seeds' own scatter; more seeds tell."""
        off = abs(self.ratio - 1)
        if off <= self.tolerance:
            return Verdict.AGREE
        if off > self.significance_bound:
            return Verdict.DISAGREE
        return Verdict.INCONCLUSIVE

    @property
    def agrees(self) -> bool:
        return self.verdict is Verdict.AGREE

    def record(self) -> dict[str, Any]:
        return {
            "scenario": asdict(self.scenario),
            "bdp_pkts": self.scenario.bdp_pkts,
            "ratio": self.ratio,
            "tolerance": self.tolerance,
            "stderr_ratio": self.stderr_ratio,
            "significance_bound": self.significance_bound,
            "verdict": self.verdict.name.lower(),
            "ours": self.ours.summary(),
            "ns2": self.ns2.summary(),
        }


def compare(
    checks: Sequence[CrossCheck],
    seeds: int,
    jobs: int | None = None,
    simulator: Path = sim.SIMULATOR,
    ns: str | None = None,
    progress: Callable[[str], None] | None = None,
    profile: str = DEFAULT_PROFILE,
) -> list[Comparison]:
    """Every scenario under seeds 1..``seeds`` in both simulators, runs in parallel, our model
    and NS-2's agents on ``profile``."""
    ns = ns or ns_binary()
    if ns is None:
        raise NsMissing("NS-2's `ns` is not installed: `make setup` installs it (Debian package ns2)")
    if not simulator.exists():
        raise FileNotFoundError(f"{simulator} is missing: run `make build-sim` first")
    out = [Comparison(sc, Side(), Side()) for sc in checks]
    tasks = [(i, k) for i in range(len(checks)) for k in range(1, seeds + 1)]

    def one(task: tuple[int, int]) -> tuple[int, Figures, Figures]:
        i, k = task
        return i, run_ours(checks[i], k, simulator, profile), run_ns2(checks[i], k, ns, profile)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, a, b in pool.map(one, tasks):
            out[i].ours.runs.append(a)
            out[i].ns2.runs.append(b)
            if progress and len(out[i].ours.runs) == seeds:
                progress(row(out[i]))
    return out


HEADERS = (
    "scenario",
    "BDP",
    "queue",
    "ours Mb/s",
    "NS-2 Mb/s",
    "ratio",
    "aggr ours/NS-2",
    "drops ours/NS-2",
    "Jain ours/NS-2",
    "verdict",
)


def _cells(c: Comparison) -> list[str]:
    sc = c.scenario
    jain_cell = f"{c.ours.jain:.3f} / {c.ns2.jain:.3f}" if sc.flows > 1 else "—"
    return [
        sc.name,
        f"{sc.bdp_pkts:.0f}",
        str(sc.queue_pkts),
        f"{c.ours.mean:.2f} ± {c.ours.sd:.2f}",
        f"{c.ns2.mean:.2f} ± {c.ns2.sd:.2f}",
        f"{c.ratio:.3f} ± {c.stderr_ratio:.3f}",
        f"{c.ours.aggregate:.1f} / {c.ns2.aggregate:.1f}",
        f"{c.ours.drops:.0f} / {c.ns2.drops:.0f}",
        jain_cell,
        c.verdict.value,
    ]


def row(c: Comparison) -> str:
    return "  ".join(_cells(c))


def table(results: Sequence[Comparison]) -> str:
    rows = [list(HEADERS)] + [_cells(c) for c in results]
    widths = [max(len(r[j]) for r in rows) for j in range(len(HEADERS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def markdown(results: Sequence[Comparison], seeds: int, command: str) -> str:
    lines = [
        f"Per-flow mean goodput (payload, Mb/s, ± the SD over flows and {seeds} seeds), ours over NS-2; "
        f"a scenario agrees within ±{GOODPUT_TOLERANCE:.0%}. `{command}`",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(_cells(c)) + " |" for c in results]
    return "\n".join(lines) + "\n"


def write(results: Sequence[Comparison], out: Path, seeds: int, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": command,
        "seeds": seeds,
        "tolerance": GOODPUT_TOLERANCE,
        "scenarios": [c.record() for c in results],
    }
    (out / "ns2-check.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "ns2-check.md").write_text(markdown(results, seeds, command))
