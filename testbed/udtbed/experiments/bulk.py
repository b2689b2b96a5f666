"""A part of bulk flows: each stack in turn runs every flow of the part.

:func:`run_part` starts the listening end of every flow (the receiver; SABUL's sender), then the
other ends (each at its flow's ``start``), streams the files they write to InfluxDB while it runs
(:mod:`udtbed.experiments.live`), stops everything after the duration (or once every finite transfer ended)
and keeps per-flow series and the part's metrics (:mod:`udtharness.metrics`), each sender's
counters and each end's CPU, what the receiving hosts' sockets dropped
(:mod:`udtbed.emulation.hostwatch`) and, for a captured part, what each net carried
(:mod:`udtbed.emulation.capture`). A flow that names its stack runs that one beside the stack under test.
"""

from __future__ import annotations

import filecmp
import json
import time
from pathlib import Path

from udtharness import metrics

from ..emulation import capture, hostwatch
from ..emulation.network import Network
from ..emulation.topology import Topology
from ..results.results import FlowResult, StackResult
from .experiment import Experiment, Flow, Part
from .flows import Started, host_check, last_int, live_watch, results_of, start_bulk, transfer_for, watch_until
from .run import Lineup, Run


def run_part(
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
    rcvbuf0 = {f.dst: hostwatch.udp_rcvbuf_errors(net, f.dst) for f in flows}
    t_wall0, t_mono0 = time.time(), time.monotonic()
    finite = all(f.options.size is not None for f in flows)
    try:
        # A captured part's stacks send without UDP GSO (docs/cli.md, UDT_OFFLOAD): the sending
        # host's capture then holds the packets the wire carries, not super-datagrams.
        env = {"UDT_OFFLOAD": "0"} if pcaps else None
        started = start_bulk(
            rt, net, lineup.flow_stacks, flows, work, seconds, 7000, tag, run.scale, transfers, env, pins=run.pins
        )
        live = live_watch(run, exp, part, lineup.name, net, started, t_wall0, extra_tags)

        def done() -> bool:
            return finite and all(p is not None and p.poll() is not None for s in started for p in s.procs)

        watch = hostwatch.HostWatch(net, run.cpus)
        watch_until(run, live, seconds, t_mono0, done)
        host = watch.finish()
    finally:
        rt.stop_all()
    live.close()
    flow_results = results_of(run, live, started, seconds, run.warmup_of(seconds))
    res = StackResult(stack=lineup.name, protocol=lineup.protocol, flows=flow_results)
    _flow_extras(res, started, host)
    for f in flow_results:  # what the receiving host's sockets dropped (all of its flows')
        before, after = rcvbuf0.get(f.dst), hostwatch.udp_rcvbuf_errors(net, f.dst)
        f.rcvbuf_drops = after - before if before is not None and after is not None else None
    if pcaps:
        control = lineup.under_test.control_net if lineup.under_test else None
        res.capture = capture.summarize(pcaps, net, {s.flow.name: s.flow.src for s in started}, control)
        if "separated" in res.capture:
            res.metrics["paths_separated"] = float(res.capture["separated"])
        run.log(f"     capture: {_capture_line(res.capture)}")
    res.host = host_check(run, net, lineup.name, host, started)
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


def _flow_extras(res: StackResult, started: list[Started], host: hostwatch.HostReport | None) -> None:
    """Per flow: the sender's retransmissions and packets sent, each end's CPU (over the
    measured window, % of one core, by process id), and for a finite transfer whether the
    receiver wrote exactly the input. The files of a disk transfer are removed."""
    cpu = {p["pid"]: p["cpu_pct"] for p in host["processes"]} if host else {}
    for s, f in zip(started, res.flows, strict=True):
        d = _sender_counters(s.send_stats)
        f.pkts_sent, f.retrans = last_int(d, "pkts_sent"), last_int(d, "retrans")
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


def _capture_line(c: dict[str, object]) -> str:
    ifaces = c.get("interfaces", {})
    assert isinstance(ifaces, dict)
    line = ", ".join(f"{k}: {v['udp_data']} DATA, {v['udp_other']} UDP ctl, {v['tcp']} TCP" for k, v in ifaces.items())
    if "separated" in c:
        line += f"; paths separated: {c['separated']}"
    return line


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
