"""The link backends side by side on the papers' path classes (``udtbed compare-backends``).

For each path class of SC'04 Fig. 11 (Chicago local 0.04 ms, Ottawa 16 ms, Amsterdam 110 ms)
and each backend this kernel can build, one topology is built and measured as a user's run would
meet it:

- RTT: ping's median and minimum (``calibrate.ping``) against the configured one;
- rate: a paced blast at 1.1x the bottleneck (``calibrate.udp_blast``) against the configured one,
  and the share of its frames released in bunches (less than half a serialization time apart);
- queue: a back-to-back burst of three queues' worth of frames; its longest one-way delay less its
  shortest, in serialization times, is how many frames the queue held (a full queue of Q reads
  about Q - 1.5: the last frame let in found Q - 1 ahead of it, the first one none);
- a UDT transfer (our ``udt``, 4.11's congestion control) for ``seconds``: goodput over the second
  half, its share of the bottleneck, the sender's capacity estimate (``bandwidth_pps``, median over
  the second half) over the link's frames per second, its retransmissions per packet sent, and the frames
  the link's queue dropped meanwhile (``Network.link_counters``).

Where both backends exist, this is what decides ``BACKEND=auto`` (docs/testbed.md, "Which backend ``auto`` picks").
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from udtharness.cli import stats_json

from .. import REPO
from .calibrate import ping, train, udp_blast
from .network import Network, probe_netem
from .runtime import NamespaceRuntime
from .topology import FRAME_BYTES, load

UDT = Path(os.environ.get("UDT_BIN", REPO / "impl/target/release/udt"))
PATHS = (
    ("chicago-local", "chicago", "local"),
    ("chicago-ottawa", "chicago", "ottawa"),
    ("chicago-amsterdam", "chicago", "amsterdam"),
)


@dataclass
class PathRow:
    path: str
    backend: str
    rtt_want_ms: float
    rtt_ms: float | None
    rtt_min_ms: float | None
    rate_want_mbps: float
    rate_mbps: float | None
    bunched_pct: float | None  # of the blast's frames (calibrate)
    queue_frames: int
    queue_held_frames: float | None  # from the burst's longest wait
    burst_dropped: int  # of the burst's frames
    udt_mbps: float | None
    udt_share: float | None  # of the bottleneck
    udt_capacity_x: float | None  # the sender's capacity estimate / the link's frame rate
    udt_retrans_pct: float | None
    udt_queue_drops: int | None  # frames the forward queue dropped during the transfer


def _udt(net: Network, src: str, dst: str, seconds: float) -> tuple[float | None, float | None, float | None]:
    """(goodput Mb/s over the second half, retransmissions per data packet sent, the sender's
    median capacity estimate in packets/s over the second half) of one flow."""
    rt = NamespaceRuntime(net)
    wd = net.workdir
    rx_stats, tx_stats = wd / "udt-recv.jsonl", wd / "udt-send.jsonl"
    addr = f"{net.address(dst)}:7000"
    rx = rt.spawn(dst, [str(UDT), "recv", "--listen", addr, "--output", "/dev/null", "--stats", str(rx_stats)])
    time.sleep(0.5)
    tx = rt.spawn(src, [str(UDT), "send", "--connect", addr, "--input", "/dev/zero", "--stats", str(tx_stats)])
    time.sleep(seconds)
    for p in (tx, rx):
        p.stop()

    def lines(f: Path) -> list[dict[str, Any]]:
        text = f.read_text() if f.exists() else ""
        return [d for d in map(stats_json, text.splitlines()) if d is not None and "mbps" in d]

    rxl, txl = lines(rx_stats), lines(tx_stats)
    second_half = [d["mbps"] for d in rxl if d["t"] >= seconds / 2]
    goodput = statistics.fmean(second_half) if second_half else None
    retrans = txl[-1]["retrans"] / txl[-1]["pkts_sent"] if txl and txl[-1].get("pkts_sent") else None
    capacity = [d["bandwidth_pps"] for d in txl if d["t"] >= seconds / 2 and d.get("bandwidth_pps")]
    return goodput, retrans, statistics.median(capacity) if capacity else None


def measure(topology: str, src: str, dst: str, backend: str, scale: float, seconds: float, workdir: Path) -> PathRow:
    topo = load(REPO / "topologies" / f"{topology}.toml")
    link = topo.links[0]
    with Network(topo, scale=scale, backend=backend, workdir=workdir / f"{topology}-{backend}") as net:
        want_rate = topo.bottleneck_bps(src, dst, scale=scale)
        assert want_rate is not None
        rtt, rtt_min = ping(net, src, dst)
        blast = udp_blast(net, src, dst, want_rate, 2.0)
        queue, _ = topo.queue_limit(link, link.forward, scale)
        assert queue is not None
        burst = train(net, src, dst, 3 * queue, port=6200)
        owd = burst["owd_ms"]
        ptime_ms = FRAME_BYTES * 8 / want_rate * 1e3
        # The longest wait beyond the fastest frame's (the path's own latency, the VM's included).
        held = (max(owd) - min(owd)) / ptime_ms if owd else None
        before = net.link_counters()[link.index]["a_to_b"]["dropped_queue"]
        goodput, retrans, capacity = _udt(net, src, dst, seconds)
        time.sleep(1.2)  # udt-linkem writes its counters once a second
        drops = net.link_counters()[link.index]["a_to_b"]["dropped_queue"] - before
        received = burst["received"]
        return PathRow(
            topology,
            backend,
            topo.expected_rtt_s(src, dst) * 1e3,
            rtt,
            rtt_min,
            want_rate / 1e6,
            blast[0] if blast else None,
            blast[1] if blast else None,
            queue,
            held,
            3 * queue - received,
            goodput,
            goodput / (want_rate / 1e6) if goodput is not None else None,
            capacity / (want_rate / (FRAME_BYTES * 8)) if capacity is not None else None,
            retrans * 100 if retrans is not None else None,
            drops,
        )


def compare(
    backends: list[str], scale: float, seconds: float, workdir: Path, log: Callable[[str], object] = print
) -> list[PathRow]:
    rows = []
    for topology, src, dst in PATHS:
        for backend in backends:
            row = measure(topology, src, dst, backend, scale, seconds, workdir)
            log(json.dumps(asdict(row)))
            rows.append(row)
    return rows


def available_backends() -> list[str]:
    return ["netem", "linkem"] if probe_netem()[0] else ["linkem"]


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def markdown(rows: list[PathRow]) -> str:
    head = (
        "| path | backend | RTT want / median (min), ms | rate want / measured, Mb/s | bunched | queue / held, "
        "frames | burst dropped | UDT goodput, Mb/s (share) | UDT capacity read | UDT retrans % | queue drops "
        "during UDT |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        cells = [
            r.path,
            r.backend,
            f"{r.rtt_want_ms:.2f} / {_f(r.rtt_ms, '.2f')} ({_f(r.rtt_min_ms, '.2f')})",
            f"{r.rate_want_mbps:.2f} / {_f(r.rate_mbps, '.2f')}",
            f"{_f(r.bunched_pct, '.1f')} %",
            f"{r.queue_frames} / {_f(r.queue_held_frames, '.1f')}",
            str(r.burst_dropped),
            f"{_f(r.udt_mbps, '.2f')} ({_f(r.udt_share, '.0%')})",
            f"{_f(r.udt_capacity_x, '.2f')}x",
            _f(r.udt_retrans_pct, ".2f"),
            str(r.udt_queue_drops),
        ]
        lines.append("| " + " | ".join(cells) + " |\n")
    return head + "".join(lines)
