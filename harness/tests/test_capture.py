"""udtharness.capture: the tools' command lines, a capture tool run as a process of
udtharness.processes in a named namespace (as the testbed runs one per host interface), and
:class:`Capture` on loopback with each installed tool."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from udtharness import processes
from udtharness.capture import SENTINEL, Capture, can_capture, command
from udtharness.pcap import read_udp
from udtharness.ports import free_udp_port


def test_tcpdump_s_command_line() -> None:
    assert command("lo", Path("/x/c.pcap"), "udp port 9", tool="tcpdump") == [
        *("tcpdump", "--immediate-mode", "-B", "32768", "-Z", "root", "-U", "-n", "-i", "lo"),
        *("-w", "/x/c.pcap", "udp port 9"),
    ]
    testbed = command(
        "data", Path("/x/d.pcap"), "ip", tool="tcpdump", snaplen=96, nano=True, immediate=False, buffer_mib=None
    )
    assert testbed == [
        *("tcpdump", "-Z", "root", "-U", "-n", "-i", "data", "-s", "96", "--time-stamp-precision", "nano"),
        *("-w", "/x/d.pcap", "ip"),
    ]


def test_dumpcap_s_command_line() -> None:
    assert command("lo", Path("/x/c.pcap"), "udp port 9", tool="dumpcap") == [
        *("dumpcap", "-B", "32", "-P", "-i", "lo", "-f", "udp port 9", "-w", "/x/c.pcap"),
    ]
    assert command("lo", Path("/x/c.pcap"), "ip", tool="dumpcap", snaplen=96, buffer_mib=None) == [
        *("dumpcap", "-P", "-i", "lo", "-s", "96", "-f", "ip", "-w", "/x/c.pcap"),
    ]
    with pytest.raises(ValueError, match="tcpdump for nano"):
        command("lo", Path("c.pcap"), "ip", tool="dumpcap", nano=True)
    with pytest.raises(ValueError, match="one of dumpcap, tcpdump"):
        command("lo", Path("c.pcap"), "ip", tool="wireshark")


needs_tcpdump = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("tcpdump") is None or shutil.which("ip") is None,
    reason="needs root, tcpdump and iproute2",
)


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = f"udth-cap-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_tcpdump
def test_a_capture_process_in_a_namespace_writes_each_frame_cut_at_its_snaplen_and_stops_on_sigint(
    namespace: str, tmp_path: Path
) -> None:
    pcap, log = tmp_path / "lo.pcap", tmp_path / "lo.tcpdump.log"
    argv = command("lo", pcap, "udp port 9", tool="tcpdump", snaplen=96, nano=True, immediate=False, buffer_mib=None)
    p = processes.start(argv, os.environ, limits=processes.UNCAPPED, stderr=log, netns=namespace)
    try:
        deadline = time.monotonic() + 10
        while b"listening on" not in log.read_bytes():
            assert p.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "tcpdump did not start"
            time.sleep(0.02)
        send = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        send += "for i in range(5): s.sendto(bytes([i]) * 200, ('127.0.0.1', 9))"
        subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", send], check=True)
        # Not in immediate mode: libpcap hands packets over in blocks, within a second or so.
        while len(read_udp(pcap)) < 5 and time.monotonic() < deadline + 5:
            time.sleep(0.05)
    finally:
        rc = processes.stop(p, grace=5.0, signals=(signal.SIGINT,))
    assert rc == 0, log.read_text()
    assert pcap.read_bytes()[:4] == bytes.fromhex("4d3cb2a1"), "nanosecond stamps"
    got = read_udp(pcap)
    assert [d.payload[:1] for d in got] == [bytes([i]) for i in range(5)], "every packet, in order"
    assert all(len(d.payload) < 96 for d in got), "96 bytes a frame"


@pytest.mark.parametrize("tool", ["dumpcap", "tcpdump"])
def test_capture_records_only_its_port_and_leaves_no_process(tool: str, tmp_path: Path) -> None:
    if not can_capture() or shutil.which(tool) is None:
        pytest.skip(f"{tool} unavailable or not root")
    port, other = free_udp_port(), free_udp_port()
    cap = Capture(tmp_path / "c.pcap", [port], tool=tool)
    with cap, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(3):
            s.sendto(b"mine", ("127.0.0.1", port))
            s.sendto(b"other", ("127.0.0.1", other))
        pid = cap._proc.pid if cap._proc else 0
    got = [d for d in read_udp(tmp_path / "c.pcap") if d.payload != SENTINEL]
    assert [(d.dst[1], d.payload) for d in got] == [(port, b"mine")] * 3
    assert cap._proc is not None and cap._proc.returncode == 0, "stopped by SIGINT, the file complete"
    assert not Path(f"/proc/{pid}").exists()
