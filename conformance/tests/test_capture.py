"""Capturing a port on loopback with each installed capture tool (needs root)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from udtconf.udt.wire import KeepAlive, decode
from udtharness.capture import SENTINEL, Capture, can_capture
from udtharness.pcap import read_udp
from udtharness.ports import free_udp_port


@pytest.mark.needs_root
@pytest.mark.parametrize("tool", ["dumpcap", "tcpdump"])
def test_capture_tool_records_only_the_port(tool: str, tmp_path: Path) -> None:
    if not can_capture() or shutil.which(tool) is None:
        pytest.skip(f"{tool} unavailable or not root")
    port, other = free_udp_port(), free_udp_port()
    ka = KeepAlive(dst_id=5).encode()
    with Capture(tmp_path / "c.pcap", [port], tool=tool), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(3):
            s.sendto(ka, ("127.0.0.1", port))
            s.sendto(b"other", ("127.0.0.1", other))
    got = [d for d in read_udp(tmp_path / "c.pcap") if d.payload != SENTINEL]
    assert [d.dst[1] for d in got] == [port] * 3
    assert all(decode(d.payload) == KeepAlive(dst_id=5) for d in got)


@pytest.mark.parametrize(
    "log,lost",
    [
        (
            "tcpdump: listening on lo\n10 packets captured\n12 packets received by filter\n"
            "7 packets dropped by kernel\n",
            7,
        ),
        (
            "Capturing on 'Loopback: lo'\n"
            "Packets received/dropped on interface 'Loopback: lo': 1513/3 (pcap:0/dumpcap:0)\n",
            3,
        ),
        ("Capturing on 'Loopback: lo'\nPackets received/dropped on interface 'Loopback: lo': 1513/0 (pcap:0)\n", 0),
    ],
)
def test_capture_reports_its_own_losses(log: str, lost: int, tmp_path: Path) -> None:
    c = Capture(tmp_path / "x.pcap", [1])
    (tmp_path / "x.capture.log").write_text(log)
    assert c.dropped() == lost
