"""Packet capture of a test's UDP ports (or any BPF filter: SABUL adds its TCP control port) with
dumpcap (or tcpdump) into a classic pcap file.

Capturing needs CAP_NET_RAW (root here). Without it :func:`can_capture` is False and the
wire checks that need a capture are skipped — tests marked ``needs_root`` say so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SENTINEL = b"udtc-capture-sentinel"  # not a UDT packet (21 bytes, not a multiple of 4 after the header)


def can_capture() -> bool:
    return (shutil.which("dumpcap") is not None or shutil.which("tcpdump") is not None) and os.geteuid() == 0


class Capture:
    """Capture UDP traffic on ``ports`` of ``interface`` while the context is open; ``bpf``
    replaces the filter (it must match UDP to ``ports[0]``, where the start/stop sentinels go)."""

    def __init__(
        self,
        path: Path,
        ports: list[int],
        interface: str = "lo",
        netns: str | None = None,
        tool: str | None = None,
        bpf: str | None = None,
    ) -> None:
        # dumpcap first: it batches and keeps up with loopback bulk transfers (tcpdump in
        # immediate mode drops hundreds of packets per run on a loaded 2-core host), at the price
        # of ~0.7 s until its first packet reaches the file — the sentinels take care of that.
        self.tool = tool or ("dumpcap" if shutil.which("dumpcap") else "tcpdump")
        self.path = path
        self.ports = ports
        self.interface = interface
        self.netns = netns
        self.bpf = bpf
        self._proc: subprocess.Popen[bytes] | None = None

    def _argv(self) -> list[str]:
        bpf = self.bpf or " or ".join(f"udp port {p}" for p in self.ports)
        if self.tool == "dumpcap":
            argv = ["dumpcap", "-B", "32", "-P", "-i", self.interface, "-f", bpf, "-w", str(self.path)]
        else:
            # --immediate-mode: otherwise packets wait in libpcap's ring for up to 1 s and those
            # still there at SIGINT are lost; -Z root keeps the output file writable.
            argv = [
                "tcpdump",
                "--immediate-mode",
                "-B",
                "32768",
                "-Z",
                "root",
                "-U",
                "-i",
                self.interface,
                "-w",
                str(self.path),
                bpf,
            ]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        return argv

    def __enter__(self) -> Capture:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.path.unlink()
        log = open(self.path.with_suffix(".capture.log"), "wb")
        self._proc = subprocess.Popen(self._argv(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 5.0
        # dumpcap writes the pcap header once the filter is installed; then it captures.
        logpath = self.path.with_suffix(".capture.log")
        while time.monotonic() < deadline:
            # Both tools say so on stderr once the filter is attached and packets are captured.
            started = b"listening on" in logpath.read_bytes() or b"Capturing on" in logpath.read_bytes()
            if started and self.path.exists() and self.path.stat().st_size >= 24:
                break
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"capture exited early: {self.path.with_suffix('.capture.log').read_text(errors='replace')}"
                )
            time.sleep(0.02)
        else:
            self.stop()
            raise RuntimeError("capture did not start within 5 s")
        self._await_sentinel(deadline)
        return self

    def _await_sentinel(self, deadline: float) -> None:
        """The tools announce themselves before packets really flow: send sentinel datagrams to a
        captured port until one shows up in the file (readers skip them, see ``SENTINEL``)."""
        if self._sentinel_recorded(deadline + 3.0):
            return
        self.stop()
        raise RuntimeError("capture started but recorded no sentinel packet")

    def _sentinel_recorded(self, until: float) -> bool:
        """Sends sentinel datagrams until the capture file grows (True) or `until` passes."""
        base = self.path.stat().st_size
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while time.monotonic() < until:
                try:
                    s.sendto(SENTINEL, ("127.0.0.1", self.ports[0]))
                except OSError:
                    pass
                time.sleep(0.03)
                if self.path.stat().st_size > base:
                    return True
        return False

    def stop(self) -> None:
        p = self._proc
        if p is None or p.poll() is not None:
            return
        # A closing sentinel: once it is in the file, everything sent before it is too
        # (dumpcap otherwise loses what is still in libpcap's ring at SIGINT).
        if self.path.exists():
            self._sentinel_recorded(time.monotonic() + 2.0)
        try:
            os.killpg(p.pid, signal.SIGINT)
            p.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=5)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def dropped(self) -> int:
        """Packets the capture tool itself lost (kernel ring overflow); 0 if none or unknown."""
        try:
            log = self.path.with_suffix(".capture.log").read_text(errors="replace")
        except OSError:
            return 0
        m = re.search(r"(\d+) packets? dropped by kernel", log)  # tcpdump
        if m:
            return int(m.group(1))
        m = re.search(r"received/dropped on interface '.*?': *\d+/(\d+)", log)  # dumpcap (names contain ':')
        return int(m.group(1)) if m else 0
