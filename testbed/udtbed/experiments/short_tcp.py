"""A ``short_tcp`` part (SC'04 Fig. 13, SABUL Table 2): short 1 MB TCP flows beside each count
of bulk flows of the stack under test.

For every count :func:`run_part` starts the bulk flows (:func:`short_tcp_bulk`: their settings
at the run's scale), lets them run for :meth:`Run.short_warmup`, then the short flows' sink and
driver (:mod:`udtbed.emulation.probe`) for the duration; a point keeps the short flows' aggregate, the bulk
flows' means and what the senders' NIC dropped. :func:`short_tcp_ratio` is the figure comparable
across scales.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..emulation import hostwatch
from ..emulation.network import Network
from ..results.results import ShortTcpPoint, StackResult
from .experiment import Experiment, Flow, Part, ShortTcp
from .flows import host_check, live_watch, results_of, start_bulk, tags, transfer_for, watch_until
from .run import Run
from .stacks import BulkStack, Transfer


def run_part(run: Run, exp: Experiment, part: Part, net: Network, stack: BulkStack, work: Path) -> StackResult:
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
        nic0 = hostwatch.nic_dropped(net, spec.src)
        t_wall0, t_mono0 = time.time(), time.monotonic()
        try:
            bulk_stacks = {f.name: stack for f in flows}
            started = start_bulk(
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
            live = live_watch(run, exp, part, stack.name, net, started, t_wall0, {"bulk_flows": str(n)})
            watch = hostwatch.HostWatch(net, run.cpus)
            watch_until(run, live, warm, t_mono0)
            py = [sys.executable, "-m", "udtbed.emulation.probe"]
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
            watch_until(run, live, run.duration, time.monotonic())
            short.wait(timeout=60)
            host = watch.finish()
        finally:
            rt.stop_all()
        live.close()
        try:
            r = json.loads(short_out.read_text().splitlines()[-1])
        except (OSError, IndexError, json.JSONDecodeError):
            r = {"aggregate_mbps": 0.0, "flows": []}
        bulk = results_of(run, live, started, run.duration + warm)
        nic1 = hostwatch.nic_dropped(net, spec.src)
        nic = nic1 - nic0 if nic0 is not None and nic1 is not None else None
        run.influx.write(
            "short_tcp",
            tags(run, exp, part, stack.name, "short") | {"bulk_flows": str(n)},
            {"aggregate_mbps": r["aggregate_mbps"], "flows": len(r["flows"])},
        )
        res.points.append(
            ShortTcpPoint(
                bulk_flows=n,
                short_aggregate_mbps=float(r["aggregate_mbps"]),
                short_flows=len(r["flows"]),
                bulk_mean_mbps=[f.mean_mbps for f in bulk],
                bulk_series_1s={f.name: f.series_1s for f in bulk},
                host=host_check(run, net, stack.name, host, started),
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
    stack: BulkStack,
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
