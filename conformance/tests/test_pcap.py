"""The capture reader on files it wrote, on a hand-built pcapng, and cross-checked by tshark."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from udtconf.udt.wire import KeepAlive, decode
from udtharness.pcap import LINKTYPE_ETHERNET, PcapError, PcapWriter, read_udp

KA = KeepAlive(dst_id=0xC0FFEE).encode()


def test_roundtrip_classic_pcap(tmp_path: Path) -> None:
    p = tmp_path / "a.pcap"
    with PcapWriter(p) as w:
        w.write(1.25, ("127.0.0.1", 9000), ("127.0.0.2", 9001), KA)
        w.write(2.5, ("127.0.0.2", 9001), ("127.0.0.1", 9000), b"x" * 1472)
    d = read_udp(p)
    assert [x.src for x in d] == [("127.0.0.1", 9000), ("127.0.0.2", 9001)]
    assert d[0].time == pytest.approx(1.25) and d[1].time == pytest.approx(2.5)
    assert decode(d[0].payload) == KeepAlive(dst_id=0xC0FFEE)
    assert len(d[1].payload) == 1472


def _eth_ipv4_udp(payload: bytes, sport: int, dport: int) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0, bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1])
    )
    return bytes(12) + b"\x08\x00" + ip + udp


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def test_pcapng_ethernet_with_nanosecond_resolution(tmp_path: Path) -> None:
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)  # if_tsresol = 10^-9
    idb = _block(1, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, 65535) + opts)
    frame = _eth_ipv4_udp(KA, 1234, 5678)
    ts = 3_000_000_000  # 3 s in ns
    epb = _block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(frame), len(frame)) + frame)
    p = tmp_path / "b.pcapng"
    p.write_bytes(shb + idb + epb)
    (d,) = read_udp(p)
    assert d.time == pytest.approx(3.0)
    assert d.src == ("127.0.0.1", 1234) and d.dst == ("127.0.0.1", 5678)
    assert d.payload == KA


def test_truncated_tail_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "c.pcap"
    with PcapWriter(p) as w:
        w.write(0.0, ("127.0.0.1", 1), ("127.0.0.1", 2), KA)
        w.write(0.1, ("127.0.0.1", 1), ("127.0.0.1", 2), KA)
    p.write_bytes(p.read_bytes()[:-5])
    assert len(read_udp(p)) == 1


def test_unknown_magic_raises(tmp_path: Path) -> None:
    p = tmp_path / "d.pcap"
    p.write_bytes(b"NOPE" + bytes(40))
    with pytest.raises(PcapError):
        read_udp(p)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_writer_output_is_read_identically_by_tshark(tmp_path: Path) -> None:
    p = tmp_path / "e.pcap"
    with PcapWriter(p) as w:
        for i in range(3):
            w.write(float(i), ("10.1.0.1", 4000 + i), ("10.1.0.2", 9000), KA + bytes(4 * i))
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(p),
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "udp.srcport",
            "-e",
            "udp.length",
            "-e",
            "ip.checksum.status",
            "-o",
            "ip.check_checksum:TRUE",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    rows = [r.split("\t") for r in out if r]
    assert [r[1] for r in rows] == ["4000", "4001", "4002"]
    assert [int(r[2]) for r in rows] == [8 + len(x.payload) for x in read_udp(p)]
    assert all(r[3] == "1" for r in rows)  # Wireshark: 1 = good checksum
