"""Packet capture of a test's UDP ports with dumpcap (or tcpdump) into a classic pcap file.

Capturing needs CAP_NET_RAW (root here). Without it :func:`can_capture` is False and the
wire checks that need a capture are skipped — tests marked ``needs_root`` say so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


def can_capture() -> bool:
    return (shutil.which("dumpcap") is not None or shutil.which("tcpdump") is not None) and os.geteuid() == 0


class Capture:
    """Capture UDP traffic on ``ports`` of ``interface`` while the context is open."""

    def __init__(self, path: Path, ports: list[int], interface: str = "lo", netns: str | None = None,
                 tool: str | None = None) -> None:
        self.tool = tool or ("dumpcap" if shutil.which("dumpcap") else "tcpdump")
        self.path = path
        self.ports = ports
        self.interface = interface
        self.netns = netns
        self._proc: subprocess.Popen[bytes] | None = None

    def _argv(self) -> list[str]:
        bpf = " or ".join(f"udp port {p}" for p in self.ports)
        if self.tool == "dumpcap":
            argv = ["dumpcap", "-P", "-i", self.interface, "-f", bpf, "-w", str(self.path)]
        else:
            # --immediate-mode: otherwise packets wait in libpcap's ring for up to 1 s and those
            # still there at SIGINT are lost; -Z root keeps the output file writable.
            argv = ["tcpdump", "--immediate-mode", "-Z", "root", "-U", "-i", self.interface, "-w", str(self.path), bpf]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        return argv

    def __enter__(self) -> "Capture":
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
                raise RuntimeError(f"capture exited early: {self.path.with_suffix('.capture.log').read_text(errors='replace')}")
            time.sleep(0.02)
        else:
            self.stop()
            raise RuntimeError("capture did not start within 5 s")
        time.sleep(0.1)
        return self

    def stop(self) -> None:
        p = self._proc
        if p is None or p.poll() is not None:
            return
        time.sleep(0.15)  # let the last packets reach the ring buffer
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
