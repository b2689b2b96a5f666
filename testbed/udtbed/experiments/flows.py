"""A part's bulk flows, from their settings to their results: what every part kind shares.

:func:`transfer_for` gives a flow its settings at the run's scale (rates and buffers as the
links scale, a UDT flow's window, :func:`udt_window`; a disk transfer's input file).
:func:`start_bulk` starts every flow's listening end (the receiver; SABUL's sender), then the
other ends, each at its flow's ``start``. :func:`live_watch` streams the files they write to
InfluxDB (:mod:`udtbed.experiments.live`) while :func:`watch_until` waits; :func:`results_of` reads each
flow's series and mean, and :func:`host_check` the part's CPU and emulator timing with the UDT
senders' pacing (:mod:`udtbed.emulation.hostwatch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..emulation import cores, hostwatch
from ..emulation.hostwatch import HostReport
from ..emulation.network import Network
from ..emulation.runtime import HostRuntime, Process
from ..emulation.topology import Topology
from ..results.results import FlowResult
from .experiment import Experiment, Flow, Part
from .live import LiveWatch, WatchedFlow
from .run import Run
from .stacks import BulkStack, Role, Transfer, resample

UDT_PAYLOAD = 1456  # UDT4.md §3: a 1500-byte packet's payload
UDT_DEFAULT_WINDOW = 8192  # 4.11's flow window and receive buffer, packets (UDT4.md §13.4)


def tags(run: Run, exp: Experiment, part: Part, stack: str, flow: str) -> dict[str, str]:
    """The InfluxDB tags of ``flow``'s series in the current part and repeat."""
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
    stack: BulkStack
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
    flow: Flow, stack: BulkStack, net: Network, scale: float, seconds: float, base: Path, buffers: str = "path"
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


def start_bulk(
    rt: HostRuntime,
    net: Network,
    stacks: Mapping[str, BulkStack],
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
    """Every flow's listening end first (:attr:`BulkStack.listener`: the receiver, or SABUL's
    sender), then each flow's other end at its ``start`` (seconds after the listeners had half a
    second to bind), connecting to the listener's host; ``offset_s`` is when that was, on that
    clock. ``stacks``: each flow's stack, by flow name; ``transfers``: each flow's settings at
    the run's scale (:func:`transfer_for`; default: memory to memory, the stack's own). A stack
    with a control path (:attr:`BulkStack.control_net`) is met at the listener's address on that net,
    and its receiver is given its own data-net address (FRTP.md §1-2). ``pins``: each end's CPUs
    (:mod:`udtbed.emulation.cores`)."""
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


def host_check(run: Run, net: Network, name: str, host: HostReport | None, started: list[Started]) -> HostReport | None:
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


def watch_until(
    run: Run, live: LiveWatch, seconds: float, t_mono0: float, done: Callable[[], bool] = lambda: False
) -> None:
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


def live_watch(
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
    return LiveWatch(run.influx, lambda fl: tags(run, exp, part, name, fl) | (extra_tags or {}), net, flows, t_wall0)


def results_of(
    run: Run, live: LiveWatch, started: list[Started], seconds: float, warmup: float | None = None
) -> list[FlowResult]:
    """Each started flow's result: its series (1 s and raw), its mean after ``warmup`` (default:
    the run's), bytes, fixed rate, the receiver's losses and the UDT window it had."""
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
                losses_recv=last_int(samples[-1].stats, "losses") if samples else None,
                window_pkts=s.transfer.udt_window,
            )
        )
    return out


def last_int(d: Mapping[str, object] | None, key: str) -> int | None:
    v = (d or {}).get(key)
    return v if isinstance(v, int) else None
