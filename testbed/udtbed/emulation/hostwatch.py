"""What the machine did while a part ran, and whether the emulated links kept their timing.

The stacks, the link emulators and whatever else runs on the machine share its cores. When
they are short of CPU, two things happen that the protocols then measure as if they were the
network: ``udt-linkem`` releases frames late and then in bursts (``bunched`` in its stats:
frames that left less than half their scheduled spacing after the previous one), and a
receiver that timestamps arrivals in user space (libudt 4.11) reads packets in bursts. UDT
4.11 sets its sending rate from the receiver's packet arrival speed (spec §10.1, §12.4), so
either one makes each sender pace faster than the bottleneck can carry; with several flows
that ends in congestion collapse (docs/testbed/timing.md, "CPU and emulation timing").

:class:`HostWatch` takes one snapshot when a measurement starts and one before its processes
stop: CPU time of every process in the topology's namespaces (stacks, probes, emulators), the
machine's busy time and load average, and each emulator's frames and ``bunched`` counts in
between; and the user-space processes outside the run that took a share of a core meanwhile
(another run, a process left behind by one, a build), by PID and name, so that a part measured
on a machine busy with something else says what it was. :func:`sender_pacing` reads the UDT
senders' stats for the fastest pacing after slow start, and their link-capacity estimate,
against the bottleneck. :func:`flags` turns all of it into the warnings a result carries.

Two of a host's counters are read in its namespace: what its NIC's queue dropped
(:func:`nic_dropped`) and what its UDP sockets dropped for a full receive buffer
(:func:`udp_rcvbuf_errors`), each taken before and after a measurement.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections.abc import Collection
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from .network import PREFIX, LinkemDirectionStats, LinkemStats, Network
from .topology import FRAME_BYTES

# A measurement is flagged when more than this share of an emulated direction's frames left
# bunched. Measured with 10 udt-rs flows on chicago-amsterdam at scale 0.1 on the shared
# 2-core machine: 18-21 % with udt-linkem's defaults (also 18 % with a single flow), 1.1 %
# with `--realtime --spin-us 20`.
BUNCHED_MAX = 0.05
# ... or more than this share in any one second with at least MIN_FRAMES frames: slow start
# ends on the arrival speed of a few RTTs, so a burst of lateness then is enough (20 % in the
# second 10 udt-rs flows left slow start made two of them pace at 3.5x the bottleneck, with
# 2 % over the whole run; parts that kept the link's timing stayed under 11 %).
BUNCHED_MAX_1S = 0.15
# ... or when a UDT sender paced faster than this many times the bottleneck's packet rate:
# on a path that keeps its timing the arrival speed it is given cannot exceed the bottleneck.
PACING_MAX = 1.5
# A direction is judged when it carried at least this many frames and, on a rate-limited link,
# this share of the link rate: the data directions. An ACK direction's timing error does not
# distort arrival speeds, and its frames are not spaced by the link.
MIN_FRAMES = 500
MIN_UTILISATION = 0.1
# A user-space process outside the run (not in its namespaces, not the runner or what it
# started, and allowed on one of the run's CPUs) that took more than this share of one core
# during a measurement is flagged: the stacks and emulators shared the machine with it. A
# process confined to other CPUs (another run on a CPU set of its own, as the full-scale plans'
# lanes) did not share the run's. A leaked udt-linkem spinning with
# `--spin-us` takes a whole core; the runner's own helpers stay far below this.
OUTSIDE_PROCESS_MAX = 25.0  # % of one core
# A measurement is flagged when the hypervisor ran other guests' work on the machine's CPUs for
# more than this share of the window (``steal`` in /proc/stat): the emulators' and the stacks'
# timers then fire late however idle the guest looks. A clean-clone CI run on our 2-core machine
# that failed five quick profiles, their emulators' frames flagged bunched, read 25 % steal over
# the run; the machine idle reads 0.
STEAL_MAX = 0.10
# Kernel threads (PF_KTHREAD in /proc/<pid>/stat's flags) are not processes outside the run:
# their time (softirq for the veths among it) is the emulation's own.
_PF_KTHREAD = 0x00200000

_HZ = os.sysconf("SC_CLK_TCK")

# An emulated direction: udt-linkem's name for it, and the LinkSpec key of its spec.
DirectionName = Literal["a_to_b", "b_to_a"]
_DIRECTIONS: tuple[tuple[DirectionName, Literal["forward", "reverse"]], ...] = (
    ("a_to_b", "forward"),
    ("b_to_a", "reverse"),
)


class ProcessCpu(TypedDict):
    ns: str  # the namespace's name without the run's prefix: h-<host>, s-<switch>, l<i>
    comm: str
    pid: int
    cpu_pct: float  # of one core, over the window


class CpuGroup(TypedDict):
    n: int  # processes of that name in that namespace
    cpu_pct: float


class DirectionTiming(TypedDict):
    """One emulated direction over the window (:func:`_direction`)."""

    frames_out: int
    bunched: int
    bunched_pct: float
    bunched_pct_max_1s: float
    dropped_queue: int
    mbps: float
    judged: bool  # carried enough to be flagged (MIN_FRAMES, MIN_UTILISATION)
    before_bottleneck: NotRequired[bool]  # set by mark_before_bottleneck


class SenderPacing(TypedDict):
    min_period_us: float
    bottleneck_packet_us: float
    times_bottleneck: float
    # Of the stats lines after slow start, how many paced faster than PACING_MAX times the
    # bottleneck: 1 is the slow-start exit's period alone (set from the receiver's arrival
    # speed, and kept until the first NAK), more is a sender that kept an over-read rate.
    lines: NotRequired[int]
    lines_faster: NotRequired[int]
    # The sender's link-capacity estimate (``bandwidth_pps``, UDT4.md §10.2) after slow start:
    # its median in 1 500-byte frames per second, over the bottleneck's (where the stack has one).
    capacity_median_pps: NotRequired[int]
    capacity_times_bottleneck: NotRequired[float]


class OutsideCpu(TypedDict):
    pid: int
    comm: str
    cpu_pct: float  # of one core, over the window


class HostReport(TypedDict):
    """What :meth:`HostWatch.finish` saw; the experiment adds the senders' pacing and the flags."""

    seconds: float
    cores: int
    machine_busy_pct: float
    # of the machine's CPU time in the window, taken by the hypervisor for other guests
    steal_pct: NotRequired[float]
    outside_cpu_pct: float  # % of one core
    loadavg_1m: list[float]  # at the start and at the end
    cpu_by_process: dict[str, CpuGroup]  # "<ns>/<comm>"
    processes: list[ProcessCpu]
    # user-space processes outside the run that took at least 1 % of a core, busiest first
    outside_processes: NotRequired[list[OutsideCpu]]
    emulators: dict[str, dict[DirectionName, DirectionTiming]]  # "l<i>" -> direction
    sender_pacing: NotRequired[dict[str, SenderPacing]]
    flags: NotRequired[list[str]]


class _SenderStatsLine(TypedDict, total=False):
    """The fields :func:`sender_pacing` reads of a UDT sender's ``--stats`` line."""

    summary: bool
    period_us: float
    bandwidth_pps: int


# The baseline of an emulator that started within the window.
_ZERO_DIRECTION: LinkemDirectionStats = {
    "frames_in": 0,
    "frames_out": 0,
    "bytes_in": 0,
    "bytes_out": 0,
    "dropped_queue": 0,
    "dropped_loss": 0,
    "dropped_oversize": 0,
    "send_errors": 0,
    "duplicated": 0,
    "reordered": 0,
    "in_flight": 0,
    "queue_frames": 0,
    "queue_delay_avg_us": 0.0,
    "queue_delay_max_us": 0.0,
    "bunched": 0,
    "late_avg_us": 0.0,
    "late_max_us": 0.0,
}


def _ns_inode(name: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def _machine() -> tuple[int, int, int]:
    """(total, idle+iowait, steal) jiffies of all cores (steal: time the hypervisor gave to
    another guest while this one had work; guest time is already in user, so it is left out)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]), v[3] + v[4], v[7] if len(v) > 7 else 0


def _stat(pid: str) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of ``/proc/<pid>/stat``; None for a process gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    return s[s.index("(") + 1 : s.rindex(")")], s[s.rindex(")") + 2 :].split()


def _outside(run_netns: set[int], cpus: frozenset[int] | None = None) -> dict[int, tuple[str, int]]:
    """pid -> (comm, CPU ticks) of the user-space processes outside the run: not in the run's
    namespaces, not this process and not a descendant of it, and (``cpus``: the run's CPUs)
    allowed to run on one of the run's CPUs."""
    me = os.getpid()
    procs: dict[int, tuple[str, int, int]] = {}  # pid -> (comm, ppid, ticks)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _stat(d)
        if st is None:
            continue
        comm, fields = st
        if int(fields[6]) & _PF_KTHREAD:
            continue
        try:
            if os.stat(f"/proc/{d}/ns/net").st_ino in run_netns:
                continue
        except OSError:
            continue
        procs[int(d)] = (comm, int(fields[1]), int(fields[11]) + int(fields[12]))

    def ours(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 64:  # the chain of parents up to init
            if pid == me:
                return True
            pid = procs[pid][1] if pid in procs else 0
            seen += 1
        return False

    def shares(pid: int) -> bool:
        try:
            return cpus is None or bool(cpus & os.sched_getaffinity(pid))
        except OSError:
            return False  # gone

    return {pid: (comm, ticks) for pid, (comm, _, ticks) in procs.items() if not ours(pid) and shares(pid)}


def _json_lines(path: Path) -> list[LinkemStats]:
    """The complete JSON lines of an emulator's stats file (the last one may be being written)."""
    out: list[LinkemStats] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class HostWatch:
    """Start of a measured window on ``net``; :meth:`finish` before its processes stop."""

    def __init__(self, net: Network, cpus: Collection[int] | None = None):
        """``cpus``: the run's CPUs (``udtbed run --cpuset``); a process outside the run that
        may not run on any of them is not counted as sharing the run's CPUs."""
        self.net = net
        self.cpus = frozenset(cpus) if cpus is not None else None
        self.prefix = f"{PREFIX}{net.tag}-"
        self.skip = {n.pid for n in net.nodes.values()}  # Mininet node shells
        self.t0 = time.monotonic()
        self.load0 = os.getloadavg()[0]
        self.m0 = _machine()
        # The run's namespaces by inode, each labelled without the run's prefix (h-<host>, l<i>).
        self.label = {
            ino: ns[len(self.prefix) :] if ns.startswith(self.prefix) else ns
            for ns in net.namespaces
            if (ino := _ns_inode(ns)) is not None
        }
        self.p0 = self._processes()
        # A cluster run's processes are on its servers: what else runs on the head does not
        # share their CPUs, and the head's own view of them (the lab's) is not the run's.
        self.remote = net.cluster is not None
        self.o0 = {} if self.remote else _outside(set(self.label), self.cpus)
        # Per emulator: its lines so far (the last one is the window's baseline).
        self.e0 = {i: len(_json_lines(Path(s["stats"]))) for i, s in net.link_specs.items() if s.get("stats")}

    def _processes(self) -> dict[int, tuple[str, str, int]]:
        """pid -> (namespace label, comm, CPU ticks) of every process in the run's namespaces."""
        out: dict[int, tuple[str, str, int]] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) in self.skip:
                continue
            try:
                ns = self.label.get(os.stat(f"/proc/{d}/ns/net").st_ino)
            except OSError:
                continue
            if ns is None or (st := _stat(d)) is None:
                continue
            comm, fields = st
            out[int(d)] = (ns, comm, int(fields[11]) + int(fields[12]))  # utime + stime
        return out

    def finish(self) -> HostReport:
        wall = max(1e-6, time.monotonic() - self.t0)
        m1, p1 = _machine(), self._processes()
        o1 = {} if self.remote else _outside(set(self.label), self.cpus)
        outside: list[OutsideCpu] = []
        for pid, (comm, ticks) in o1.items():
            pct = round((ticks - self.o0.get(pid, (comm, 0))[1]) / _HZ / wall * 100, 1)
            if pct >= 1:
                outside.append({"pid": pid, "comm": comm, "cpu_pct": pct})
        outside.sort(key=lambda p: -p["cpu_pct"])
        procs: list[ProcessCpu] = []
        for pid, (ns, comm, ticks) in sorted(p1.items()):
            before = self.p0.get(pid, (ns, comm, 0))[2]
            procs.append({"ns": ns, "comm": comm, "pid": pid, "cpu_pct": round((ticks - before) / _HZ / wall * 100, 1)})
        groups: dict[str, CpuGroup] = {}
        for p in procs:
            g = groups.setdefault(f"{p['ns']}/{p['comm']}", {"n": 0, "cpu_pct": 0.0})
            g["n"] += 1
            g["cpu_pct"] = round(g["cpu_pct"] + p["cpu_pct"], 1)
        cores = os.cpu_count() or 1
        total, idle, steal = m1[0] - self.m0[0], m1[1] - self.m0[1], m1[2] - self.m0[2]
        busy_cores = (total - idle - steal) / total * cores if total else 0.0
        ours = sum(p["cpu_pct"] for p in procs) / 100
        emulators: dict[str, dict[DirectionName, DirectionTiming]] = {}
        for i, spec in self.net.link_specs.items():
            if not spec.get("stats"):
                continue
            lines = _json_lines(Path(spec["stats"]))
            window = lines[max(0, self.e0.get(i, 0) - 1) :]  # from the baseline on
            if not window:
                continue
            emulators[f"l{i}"] = {d: _direction(window, d, _rate(spec.get(key, ""))) for d, key in _DIRECTIONS}
        return {
            "seconds": round(wall, 1),
            "cores": cores,
            "machine_busy_pct": round(busy_cores / cores * 100, 1),
            "steal_pct": round(steal / total * 100, 1) if total else 0.0,
            # busy CPU not charged to the run's processes: other work, interrupts (% of one core)
            "outside_cpu_pct": round(max(0.0, busy_cores - ours) * 100, 1),
            "loadavg_1m": [round(self.load0, 2), round(os.getloadavg()[0], 2)],
            "cpu_by_process": groups,
            "processes": procs,
            "outside_processes": outside,
            "emulators": emulators,
        }


def _rate(spec: str) -> float | None:
    """Bits/s of a udt-linkem direction spec (``...,rate=100000000bit,...``), None if unlimited."""
    m = re.search(r"rate=(\d+)bit", spec)
    return float(m.group(1)) if m else None


def _direction(lines: list[LinkemStats], d: DirectionName, rate_bps: float | None) -> DirectionTiming:
    """One direction over the window: ``lines[0]`` is the baseline (none if the emulator started
    in the window: then it counts from zero)."""
    zero: LinkemStats = {
        "t_s": 0.0,
        "final": False,
        "cpu_user_s": 0.0,
        "cpu_sys_s": 0.0,
        "a_to_b": _ZERO_DIRECTION,
        "b_to_a": _ZERO_DIRECTION,
    }
    if len(lines) == 1:
        lines = [zero] + lines
    a, b = lines[-1][d], lines[0][d]
    frames = a["frames_out"] - b.get("frames_out", 0)
    bunched = a.get("bunched", 0) - b.get("bunched", 0)
    seconds = lines[-1]["t_s"] - lines[0]["t_s"]  # the emulator's own clock
    mbps = (a["bytes_out"] - b.get("bytes_out", 0)) * 8 / seconds / 1e6 if seconds > 0 else 0.0
    per_s = [
        (y[d].get("bunched", 0) - x[d].get("bunched", 0)) / n
        for x, y in itertools.pairwise(lines)
        if (n := y[d]["frames_out"] - x[d].get("frames_out", 0)) >= MIN_FRAMES
    ]
    return {
        "frames_out": frames,
        "bunched": bunched,
        "bunched_pct": round(100 * bunched / frames, 1) if frames else 0.0,
        "bunched_pct_max_1s": round(100 * max(per_s), 1) if per_s else 0.0,
        "dropped_queue": a["dropped_queue"] - b.get("dropped_queue", 0),
        "mbps": round(mbps, 1),
        "judged": frames >= MIN_FRAMES and (rate_bps is None or mbps * 1e6 >= MIN_UTILISATION * rate_bps),
    }


def sender_pacing(stats: dict[str, Path], bottleneck_bps: dict[str, float | None]) -> dict[str, SenderPacing]:
    """Per flow: the shortest packet sending period after slow start (UDT ``--stats`` lines of
    the sender) and how many times the bottleneck's packet rate that is."""
    out: dict[str, SenderPacing] = {}
    for name, path in stats.items():
        try:
            lines: list[_SenderStatsLine] = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        except (OSError, json.JSONDecodeError):
            continue
        periods = [x["period_us"] for x in lines if not x.get("summary") and x.get("period_us", 0) > 1.0]
        bps = bottleneck_bps.get(name)
        if not periods or not bps:
            continue
        pkt_us = FRAME_BYTES * 8 / bps * 1e6
        out[name] = {
            "min_period_us": min(periods),
            "bottleneck_packet_us": round(pkt_us, 1),
            "times_bottleneck": round(pkt_us / min(periods), 2),
            "lines": len(periods),
            "lines_faster": sum(1 for x in periods if pkt_us / x > PACING_MAX),
        }
        after = [x for x in lines if not x.get("summary") and x.get("period_us", 0) > 1.0]
        if capacity := sorted(x["bandwidth_pps"] for x in after if x.get("bandwidth_pps", 0) > 0):
            median = capacity[len(capacity) // 2]
            out[name] |= {
                "capacity_median_pps": median,
                "capacity_times_bottleneck": round(median * pkt_us / 1e6, 2),
            }
    return out


def mark_before_bottleneck(host: HostReport, seen_by_receivers: set[tuple[str, str]]) -> None:
    """Marks every emulated direction not in ``seen_by_receivers`` (the (``l<i>``, direction)
    pairs from a flow's bottleneck on, :meth:`Topology.timing_hops`) ``before_bottleneck`` and
    not judged: the bottleneck spaces their frames again."""
    for link, dirs in host.get("emulators", {}).items():
        for d, s in dirs.items():
            if (link, d) not in seen_by_receivers:
                s["judged"] = False
                s["before_bottleneck"] = True


def flags(host: HostReport, pacing: dict[str, SenderPacing] | None = None) -> list[str]:
    """Why a measurement is not the protocols' alone (empty: nothing seen): the machine's
    (:func:`machine_flags`), then the UDT senders' pacing faster than the bottleneck."""
    return machine_flags(host) + pacing_flags(pacing)


def machine_flags(host: HostReport) -> list[str]:
    """What the machine did to the emulation, whatever the stacks did: emulators that released
    frames late and bunched, the hypervisor's steal, busy processes outside the run. A result
    with one of these measured the machine as well as the stacks; a sender pacing faster than
    the bottleneck alone (:func:`pacing_flags`) may be the stack's own doing."""
    out: list[str] = []
    for link, dirs in host.get("emulators", {}).items():
        for d, s in dirs.items():
            if not s.get("judged"):
                continue
            if s["bunched_pct"] > BUNCHED_MAX * 100:
                out.append(
                    f"emulator {link} {d}: {s['bunched_pct']:.0f} % of {s['frames_out']} frames left bunched "
                    f"(released late, limit {BUNCHED_MAX * 100:.0f} %)"
                )
            elif s.get("bunched_pct_max_1s", 0) > BUNCHED_MAX_1S * 100:
                out.append(
                    f"emulator {link} {d}: {s['bunched_pct_max_1s']:.0f} % of the frames of one second left "
                    f"bunched (released late, limit {BUNCHED_MAX_1S * 100:.0f} % in any second, "
                    f"{BUNCHED_MAX * 100:.0f} % overall)"
                )
    busy = [p for p in host.get("outside_processes", []) if p["cpu_pct"] > OUTSIDE_PROCESS_MAX]
    if busy:
        named = ", ".join(f"{p['comm']} (pid {p['pid']}) {p['cpu_pct']:.0f} %" for p in busy[:3])
        out.append(
            f"{len(busy)} process(es) outside this run took more than {OUTSIDE_PROCESS_MAX:.0f} % of a core "
            f"meanwhile: {named}: the stacks and emulators shared the CPUs with them"
        )
    steal = host.get("steal_pct")
    if steal is not None and steal > STEAL_MAX * 100:
        out.append(
            f"the hypervisor took {steal:.0f} % of the machine's CPU time for other guests (steal, limit "
            f"{STEAL_MAX * 100:.0f} %): the emulators' and the stacks' timers fired late"
        )
    return out


def pacing_flags(pacing: dict[str, SenderPacing] | None) -> list[str]:
    """A UDT sender that paced faster than the bottleneck after slow start: the arrival timing it
    was given was compressed (by the machine, or by a stack that misreads it)."""
    out: list[str] = []
    fast = {n: p for n, p in (pacing or {}).items() if p["times_bottleneck"] > PACING_MAX}
    if fast:
        worst = max(fast.values(), key=lambda p: p["times_bottleneck"])
        n, of = worst.get("lines_faster", 0), worst.get("lines", 0)
        # Slow start ends on the receiver's arrival speed; a period faster than the bottleneck
        # in one stats line is that exit alone, which the warm-up leaves out of the summaries.
        when = (
            "in the slow-start exit's stats line only"
            if n == 1
            else f"in {n} of {of} stats lines after slow start"
            if of
            else "after slow start"
        )
        out.append(
            f"{len(fast)} UDT sender(s) paced faster than the bottleneck, up to {worst['times_bottleneck']:.1f}x "
            f"(period {worst['min_period_us']:.0f} us, a packet takes {worst['bottleneck_packet_us']:.0f} us) "
            f"{when}: arrival timing was compressed (limit {PACING_MAX}x)"
        )
    return out


def nic_dropped(net: Network, host: str) -> int | None:
    """Packets ``host``'s NIC (a topology ``nic``: the tbf on its data interface) has dropped
    so far, or None where the host has none or its counters cannot be read."""
    if host not in net.nic_specs:
        return None
    p = net.sh(net.ns(host), "tc", "-s", "qdisc", "show", "dev", "data", check=False)
    m = re.search(r"\(dropped (\d+),", p.stdout)
    return int(m.group(1)) if m else None


def udp_rcvbuf_errors(net: Network, host: str) -> int | None:
    """The host's UDP datagrams dropped for a full socket receive buffer so far (``/proc/net/snmp``
    of its namespace, ``Udp: RcvbufErrors``), or None where that cannot be read."""
    p = net.sh(net.ns(host), "cat", "/proc/net/snmp", check=False)
    rows = [line.split()[1:] for line in p.stdout.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2 or "RcvbufErrors" not in rows[0]:
        return None
    return int(rows[1][rows[0].index("RcvbufErrors")])
