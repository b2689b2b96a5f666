"""Calibration: measure RTT and bottleneck rate through the built topology before a run.

RTT: ``ping`` between the flow's hosts, compared (median) with the sum of the configured
one-way delays. Rate: a paced UDP blast of 1514-byte frames offered at 1.1x the bottleneck;
with the bottleneck busy from the first frame, frames arrive exactly one serialization time
apart, so ``(n - 1) * 1514 * 8 / arrival span`` is the link rate the path really delivers.
A path off by more than the tolerance (default RTT 1 ms, rate 2 %) fails the calibration.
The same blast tells how many frames arrived less than half a serialization time after the
previous one ("bunched"): released together by a late timer in the emulation, which receivers
timing arrivals (UDT's arrival speed and packet pairs) read as a faster link. Shown, not judged.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .network import Network
from .probe import TrainSinkResult, UdpSinkResult
from .runtime import NamespaceRuntime


@dataclass
class PathCalibration:
    src: str
    dst: str
    expected_rtt_ms: float
    rtt_ms: float | None
    rtt_min_ms: float | None
    expected_rate_mbps: float | None
    rate_mbps: float | None
    rtt_ok: bool
    rate_ok: bool
    bunched_pct: float | None = None

    @property
    def ok(self) -> bool:
        return self.rtt_ok and self.rate_ok

    def line(self) -> str:
        rate = (
            f"rate {self.rate_mbps:.1f} Mb/s (want {self.expected_rate_mbps:.1f}, "
            f"{(self.rate_mbps / self.expected_rate_mbps - 1) * 100:+.2f}%)"
            if self.rate_mbps and self.expected_rate_mbps
            else "rate unlimited (not measured)"
        )
        rtt = (
            f"RTT {self.rtt_ms:.3f} ms (want {self.expected_rtt_ms:.3f})"
            if self.rtt_ms is not None
            else "RTT: no reply"
        )
        bunched = f"; {self.bunched_pct:.1f}% of frames bunched" if self.bunched_pct is not None else ""
        return f"{self.src}->{self.dst}: {rtt}; {rate}{bunched} [{'ok' if self.ok else 'OFF'}]"


def ping(net: Network, src: str, dst: str, count: int = 20) -> tuple[float | None, float | None]:
    """(median, min) RTT in ms of ``count`` pings: the median, so that one probe delayed by a
    preempted thread on a loaded machine does not move the figure."""
    p = net.sh(net.ns(src), "ping", "-c", str(count), "-i", "0.05", "-W", "3", net.address(dst), check=False)
    rtts = sorted(float(x) for x in re.findall(r"time=([\d.]+) ms", p.stdout))
    if not rtts:
        return None, None
    return statistics.median(rtts), rtts[0]


def udp_blast(
    net: Network, src: str, dst: str, rate_bps: float, seconds: float, port: int = 5999
) -> tuple[float, float] | None:
    """(Mb/s the path delivered, % of frames bunched) of a blast at 1.1x ``rate_bps``."""
    rt = NamespaceRuntime(net)
    wd = net.workdir
    py = [sys.executable, "-m", "udtbed.emulation.probe"]
    ptime_us = 1514 * 8 / rate_bps * 1e6
    sink = rt.spawn(
        dst,
        py + ["udp-sink", "--port", str(port), "--seconds", str(seconds + 5), "--ptime-us", f"{ptime_us:.3f}"],
        stdout=wd / f"cal-sink-{dst}.json",
    )
    time.sleep(0.3)
    src_p = rt.spawn(
        src,
        py
        + [
            "udp-source",
            "--dst",
            net.address(dst),
            "--port",
            str(port),
            "--rate",
            str(rate_bps * 1.1),
            "--seconds",
            str(seconds),
        ],
    )
    src_p.wait(seconds + 10)
    sink.wait(seconds + 10)
    lines = (wd / f"cal-sink-{dst}.json").read_text().splitlines()
    r: UdpSinkResult = json.loads(lines[-1])
    if r["packets"] < 10 or r["span_s"] <= 0:
        return None
    return (r["packets"] - 1) * 1514 * 8 / r["span_s"] / 1e6, r["bunched"] / (r["packets"] - 1) * 100


def train(
    net: Network, src: str, dst: str, count: int, *, rate_bps: float = 0.0, gso: int = 1, port: int = 6100
) -> TrainSinkResult:
    """A numbered train of ``count`` frames from ``src`` to ``dst`` (``udtbed.emulation.probe train``, back to
    back where ``rate_bps`` is 0) and what arrived (``train-sink``): losses, order, one-way delays.

    The sender stays on one CPU: a veth hands each frame to the backlog of the CPU that sent it,
    so a sender that migrates mid-train can have its later frames forwarded before earlier ones
    still queued on the other CPU (seen: 4 of 4 000 frames reordered, no emulator involved)."""
    rt = NamespaceRuntime(net)
    py = [sys.executable, "-m", "udtbed.emulation.probe"]
    out = net.workdir / f"train-{port}.json"
    sink = rt.spawn(dst, py + ["train-sink", "--port", str(port), "--seconds", "60", "--quiet", "3"], stdout=out)
    deadline = time.monotonic() + 30
    while '"ready"' not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    argv = py + ["train", "--dst", net.address(dst), "--port", str(port), "--count", str(count)]
    argv += ["--rate", str(rate_bps), "--gso", str(gso)]
    src_p = rt.spawn(src, argv, cpus=frozenset({min(os.sched_getaffinity(0))}))
    if src_p.wait(120) != 0 or sink.wait(120) != 0:
        raise RuntimeError(f"the train {src} -> {dst} failed (see {out})")
    result: TrainSinkResult = json.loads(out.read_text().splitlines()[-1])
    return result


def calibrate(
    net: Network,
    pairs: list[tuple[str, str]],
    rtt_tol_ms: float = 1.0,
    rate_tol: float = 0.02,
    seconds: float = 2.0,
    log: Callable[[str], object] = print,
    attempts: int = 2,
) -> list[PathCalibration]:
    """Each path once, and again (up to ``attempts`` in all) while it is off: a moment of CPU
    contention on a shared machine (another VM, a burst of other work) can put one blast or
    ping series off; an emulation that is really off stays off."""
    out: list[PathCalibration] = []
    for src, dst in dict.fromkeys(pairs):
        want_rtt = net.topo.expected_rtt_s(src, dst) * 1e3
        want_rate = net.topo.bottleneck_bps(src, dst, scale=net.scale)
        for attempt in range(1, attempts + 1):
            rtt, rtt_min = ping(net, src, dst)
            blast = udp_blast(net, src, dst, want_rate, seconds) if want_rate else None
            rate = blast[0] if blast else None
            c = PathCalibration(
                src,
                dst,
                want_rtt,
                rtt,
                rtt_min,
                want_rate / 1e6 if want_rate else None,
                rate,
                rtt is not None and abs(rtt - want_rtt) <= rtt_tol_ms,
                want_rate is None or (rate is not None and abs(rate / (want_rate / 1e6) - 1) <= rate_tol),
                blast[1] if blast else None,
            )
            log(f"  calibration {c.line()}" + (f" (attempt {attempt} of {attempts})" if attempt > 1 else ""))
            if c.ok:
                break
        out.append(c)
    return out


def as_json(cals: list[PathCalibration]) -> list[dict[str, str | float | bool | None]]:
    """Each calibration's fields and ``ok``, for the results file."""
    return [asdict(c) | {"ok": c.ok} for c in cals]
