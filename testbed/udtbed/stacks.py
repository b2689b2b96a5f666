"""Transport stacks under test, behind one interface: start a bulk receiver and sender, and
read the receiver's progress as ``(t, cumulative bytes)`` samples.

- :class:`UdtCli`: any stack with the shared ``udt`` CLI contract (our Rust ``udt``, the
  libudt 4.11 peer): ``recv --listen --output /dev/null --stats``, ``send --connect --input
  /dev/zero --stats`` (an endless stream the runner stops at the end of the run).
- :class:`Iperf3Tcp`: kernel TCP with a chosen congestion control (cubic, bbr) via iperf3; the
  server's per-interval report (``--forceflush``) is the receiver's series.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .network import REPO


@dataclass
class Sample:
    t: float  # seconds since the receiver's start of measurement
    bytes: int  # cumulative bytes received


class Stack:
    name: str
    kind: str  # "udt" or "tcp"

    def available(self) -> tuple[bool, str]:
        raise NotImplementedError

    def receiver(self, port: int, stats: Path) -> tuple[list[str], Path | None]:
        """(argv, path the process's stdout goes to, or None)."""
        raise NotImplementedError

    def sender(self, dst: str, port: int, seconds: float, stats: Path | None = None) -> list[str]:
        """argv of a bulk sender; ``stats``: where a stack that has them writes its sender stats."""
        raise NotImplementedError

    def parse(self, text: str) -> list[Sample]:
        raise NotImplementedError


class UdtCli(Stack):
    kind = "udt"

    def __init__(self, name: str, binary: Path):
        self.name, self.binary = name, binary

    def available(self) -> tuple[bool, str]:
        if not os.access(self.binary, os.X_OK):
            return False, f"{self.binary} is not built"
        p = subprocess.run([str(self.binary), "--help"], capture_output=True, text=True)
        if "recv" not in p.stdout + p.stderr:
            return False, f"{self.binary} --help does not show the udt CLI contract"
        return True, str(self.binary)

    def receiver(self, port, stats):
        return [
            str(self.binary),
            "recv",
            "--listen",
            f"0.0.0.0:{port}",
            "--output",
            "/dev/null",
            "--stats",
            str(stats),
            "--stats-interval",
            "200",
        ], None

    def sender(self, dst, port, seconds, stats=None):
        argv = [str(self.binary), "send", "--connect", f"{dst}:{port}", "--input", "/dev/zero"]
        # The sender's pacing (period_us) shows whether timing artifacts made it faster than the path.
        return argv + (["--stats", str(stats), "--stats-interval", "200"] if stats else [])

    def parse(self, text):
        out = []
        for line in text.splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            if not d.get("summary"):
                out.append(Sample(float(d["t"]), int(d["bytes"])))
        return out


_IPERF_LINE = re.compile(
    r"\[\s*\d+\]\s+([\d.]+)-\s*([\d.]+)\s+sec\s+([\d.]+)\s+([KMGT]?)Bytes\s+[\d.]+\s+[KMGT]?bits/sec\s*$"
)
_UNIT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


class Iperf3Tcp(Stack):
    kind = "tcp"

    def __init__(self, cc: str):
        self.cc = cc
        self.name = f"tcp-{cc}"

    def available(self) -> tuple[bool, str]:
        if not shutil.which("iperf3"):
            return False, "iperf3 is not installed"
        avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        if self.cc not in avail:
            subprocess.run(["modprobe", f"tcp_{self.cc}"], capture_output=True)
            avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        if self.cc not in avail:
            return False, f"congestion control {self.cc} is not available (have {' '.join(avail)})"
        return True, f"kernel TCP {self.cc} via iperf3"

    def receiver(self, port, stats):
        return ["iperf3", "-s", "-1", "-p", str(port), "-i", "0.2", "--forceflush", "-f", "k"], stats

    def sender(self, dst, port, seconds, stats=None):
        return ["iperf3", "-c", dst, "-p", str(port), "-t", str(int(seconds) + 30), "-C", self.cc, "-i", "0"]

    def parse(self, text):
        out, total = [], 0
        for line in text.splitlines():
            m = _IPERF_LINE.search(line)
            if m:  # interval lines only: the final summary ends in 'sender'/'receiver'
                total += int(float(m.group(3)) * _UNIT[m.group(4)])
                out.append(Sample(float(m.group(2)), total))
        return out


def all_stacks() -> dict[str, Stack]:
    return {
        "udt": UdtCli("udt", Path(os.environ.get("UDT_BIN", REPO / "impl/target/release/udt"))),
        "libudt": UdtCli("libudt", Path(os.environ.get("LIBUDT_PEER", REPO / "build/libudt-peer"))),
        "tcp-cubic": Iperf3Tcp("cubic"),
        "tcp-bbr": Iperf3Tcp("bbr"),
    }


def resample(samples: list[Sample], offset: float, step: float, end: float) -> list[tuple[float, float]]:
    """Throughput (Mb/s) per ``step`` seconds on a common time axis (run time = offset + t)."""
    pts = [(offset + s.t, s.bytes) for s in samples]
    if len(pts) < 2:
        return []

    def at(x: float) -> float:
        if x <= pts[0][0]:
            return 0.0 if x < pts[0][0] else pts[0][1]
        for (t0, b0), (t1, b1) in zip(pts, pts[1:]):
            if t0 <= x <= t1:
                return b0 + (b1 - b0) * (x - t0) / (t1 - t0) if t1 > t0 else b1
        return pts[-1][1]

    end = min(end, pts[-1][0])  # no bin past the last sample
    out, x = [], 0.0
    while x + step <= end + 1e-9:
        out.append((round(x + step, 6), (at(x + step) - at(x)) * 8 / step / 1e6))
        x += step
    return out
