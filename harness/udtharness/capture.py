"""Packet capture of a test's UDP ports (or any BPF filter: SABUL adds its TCP control port) with
dumpcap (or tcpdump) into a classic pcap file.

Capturing needs CAP_NET_RAW (root here). Without it :func:`can_capture` is False and the
wire checks that need a capture are skipped — tests marked ``needs_root`` say so.

:func:`command` is the capture tool's command line for any interface, filter and file (the
testbed's captures of every host interface use it too); :class:`Capture` runs it as a process of
:mod:`udtharness.processes` (its own group, no caps, SIGINT to stop, so that the tool writes out
what it has) and makes sure it records before the test's packets flow.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import time
from pathlib import Path

from . import processes

SENTINEL = b"udtc-capture-sentinel"  # not a UDT packet (21 bytes, not a multiple of 4 after the header)
TOOLS = ("dumpcap", "tcpdump")


def can_capture() -> bool:
    return (shutil.which("dumpcap") is not None or shutil.which("tcpdump") is not None) and os.geteuid() == 0


def default_tool() -> str:
    """dumpcap where installed, else tcpdump."""
    return "dumpcap" if shutil.which("dumpcap") else "tcpdump"


def command(
    interface: str,
    path: Path,
    bpf: str,
    *,
    tool: str | None = None,
    snaplen: int | None = None,
    nano: bool = False,
    immediate: bool = True,
    buffer_mib: int | None = 32,
) -> list[str]:
    """The command line that captures what ``bpf`` matches on ``interface`` into the classic pcap
    file ``path``, written packet by packet (what the file holds at any moment is whole).

    ``tool``: ``dumpcap`` or ``tcpdump`` (default :func:`default_tool`). ``snaplen``: the bytes
    kept of each frame (default: the tool's, all of it). ``nano``: nanosecond time stamps
    (tcpdump only; dumpcap's classic pcap has microseconds). ``immediate``: tcpdump hands each
    packet over at once (``--immediate-mode``) rather than in libpcap's batches, of which those
    still in its ring at SIGINT are lost. ``buffer_mib``: the kernel capture buffer (None: the
    tool's default). tcpdump also runs with ``-Z root`` (the output file stays writable) and
    ``-n`` (no name look-ups)."""
    tool = tool or default_tool()
    if tool == "dumpcap":
        if nano:
            raise ValueError("dumpcap writes microsecond stamps to a classic pcap: capture with tcpdump for nano")
        argv = ["dumpcap"] + (["-B", str(buffer_mib)] if buffer_mib is not None else []) + ["-P", "-i", interface]
        argv += ["-s", str(snaplen)] if snaplen is not None else []
        return [*argv, "-f", bpf, "-w", str(path)]
    if tool != "tcpdump":
        raise ValueError(f"capture tool {tool!r}: one of {', '.join(TOOLS)}")
    argv = ["tcpdump"] + (["--immediate-mode"] if immediate else [])
    argv += ["-B", str(buffer_mib * 1024)] if buffer_mib is not None else []
    argv += ["-Z", "root", "-U", "-n", "-i", interface]
    argv += ["-s", str(snaplen)] if snaplen is not None else []
    argv += ["--time-stamp-precision", "nano"] if nano else []
    return [*argv, "-w", str(path), bpf]


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
        self.tool = tool or default_tool()
        self.path = path
        self.ports = ports
        self.interface = interface
        self.netns = netns
        self.bpf = bpf
        self._proc: processes.StackProcess | None = None

    def _argv(self) -> list[str]:
        # command()'s defaults: a 32 MiB buffer, and tcpdump in immediate mode (otherwise packets
        # wait in libpcap's ring for up to 1 s and those still there at SIGINT are lost).
        bpf = self.bpf or " or ".join(f"udp port {p}" for p in self.ports)
        return command(self.interface, self.path, bpf, tool=self.tool)

    def __enter__(self) -> Capture:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.path.unlink()
        logpath = self.path.with_suffix(".capture.log")
        self._proc = processes.start(
            self._argv(), os.environ, limits=processes.UNCAPPED, stdout=logpath, stderr=logpath, netns=self.netns
        )
        deadline = time.monotonic() + 5.0
        # dumpcap writes the pcap header once the filter is installed; then it captures.
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
        processes.stop(p, grace=5.0, signals=(signal.SIGINT,))  # SIGINT: the tool writes what it has

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
