"""A part's capture end to end on real namespaces: tcpdump (the harness's command line) on each
host's interface, started by the namespace runtime as a harness process, ended by the runtime's
``stop_all`` with SIGINT, read back by :func:`udtbed.emulation.capture.summarize`; nothing left running."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cleanup import ADDRESS, processes_in, two_hosts
from udtbed.emulation import capture
from udtbed.emulation.network import Network
from udtbed.emulation.runtime import NamespaceRuntime, NsProcess
from udtharness import processes
from udtharness.pcap import read_udp

pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="needs tcpdump"),
]
__all__ = ["two_hosts"]  # the fixture, from test_cleanup


def test_a_captured_part_records_each_host_interface_and_leaves_no_capture_running(
    two_hosts: Network, tmp_path: Path
) -> None:
    net = two_hosts
    inodes = {os.stat(f"/run/netns/{net.ns(h)}").st_ino for h in net.topo.hosts}
    rt = NamespaceRuntime(net)
    files = capture.start(rt, net, tmp_path, "t")
    assert sorted(files) == ["a/data", "b/data"]
    assert all(isinstance(p, NsProcess) and isinstance(p.popen, processes.StackProcess) for p in rt.procs), "harness"
    assert [p.argv for p in rt.procs] == [
        capture.command("data", files["a/data"]),
        capture.command("data", files["b/data"]),
    ]
    logs = [tmp_path / f"t-{h}-data.tcpdump.log" for h in net.topo.hosts]
    deadline = time.monotonic() + 10
    while not all(log.exists() and b"listening on" in log.read_bytes() for log in logs):
        assert time.monotonic() < deadline, [log.read_text() for log in logs if log.exists()]
        time.sleep(0.05)
    # Ten DATA packets (first word's top bit 0) from a to b, 20 ms apart.
    send = "import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    send += (
        f"for i in range(10): s.sendto(i.to_bytes(4, 'big') + bytes(200), ('{ADDRESS['b']}', 9000)); time.sleep(0.02)"
    )
    subprocess.run(["ip", "netns", "exec", net.ns("a"), sys.executable, "-c", send], check=True)
    while not all(len(read_udp(f)) >= 10 for f in files.values()):  # libpcap hands packets over in blocks
        assert time.monotonic() < deadline + 5, "the captures did not record the packets"
        time.sleep(0.05)
    procs = list(rt.procs)
    rt.stop_all()
    assert [p.poll() for p in procs] == [0, 0], "tcpdump ended by SIGINT, its files complete"
    assert processes_in(inodes) == []
    summary = capture.summarize(files, net, {"f": "a"}, None)
    assert summary["interfaces"] == {
        "a/data": {"udp_data": 10, "udp_other": 0, "tcp": 0},
        "b/data": {"udp_data": 10, "udp_other": 0, "tcp": 0},
    }
    ipt = summary["ipt"]["f"]
    assert ipt["n"] == 9 and ipt["mean_us"] == pytest.approx(20_000, rel=0.5)
    assert files["a/data"].read_bytes()[:4] == bytes.fromhex("4d3cb2a1"), "nanosecond stamps"
