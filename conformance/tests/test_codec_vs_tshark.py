"""Our codec against Wireshark's UDT dissector on every interop capture.

Two independent decoders must agree on the header fields of every frame (type, sequence
number, destination socket ID, ACK number, handshake ISN and request type). A disagreement is
either a bug in ``udtconf.udt.wire`` or a packet only one of them accepts.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from udtconf.runner import InteropRunner, RunStatus
from udtconf.udt.wire import Ack, DataPacket, Handshake, WireError, decode
from udtharness.pcap import read_udp
from udtharness.stacks import Stack

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.protocols("udt")]

# Wireshark's naming is the other way round from ours: udt.ackno is the ACK's sub-sequence number
# (additional info), udt.ack_seqno the acknowledged sequence number.
FIELDS = [
    "frame.number",
    "udt.iscontrol",
    "udt.type",
    "udt.seqno",
    "udt.id",
    "udt.ackno",
    "udt.ack_seqno",
    "udt.hs.isn",
    "udt.hs.reqtype",
]


def _tshark(pcap: str, ports: set[int]) -> list[list[str]]:
    argv = ["tshark", "-r", pcap, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for p in sorted(ports):
        argv += ["-d", f"udp.port=={p},udt"]
    for f in FIELDS:
        argv += ["-e", f]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_codec_agrees_with_wireshark(matrix_cell: tuple[Stack, Stack, str], runner: InteropRunner) -> None:
    server, client, case = matrix_cell
    res = runner.run(server, client, case)
    if res.status in (RunStatus.SKIPPED, RunStatus.UNSUPPORTED) or not res.pcap or not res.pcap.exists():
        pytest.skip(f"no capture for this run ({res.status}: {res.reason})")
    datagrams = read_udp(res.pcap)  # frame-by-frame comparison works on incomplete captures too
    ports = {min(d.src[1], d.dst[1]) for d in datagrams} | {d.dst[1] for d in datagrams[:1]}
    rows = _tshark(str(res.pcap), ports)
    assert len(rows) == len(datagrams)
    mismatches = []
    for dg, row in zip(datagrams, rows, strict=True):
        frame = int(row[0])
        iscontrol, ttype, seqno, dst, ack_sub, ackno, isn, reqtype = (row + [""] * 9)[1:9]
        try:
            p = decode(dg.payload)
        except WireError:
            continue  # reported by the wire rules
        want = {"iscontrol": "0" if isinstance(p, DataPacket) else "1", "id": f"0x{p.dst_id:08x}"}
        got = {"iscontrol": iscontrol, "id": dst}
        if isinstance(p, DataPacket):
            want["seqno"], got["seqno"] = str(p.seq), seqno
        else:
            want["type"], got["type"] = f"0x{int(p.ctype):08x}" if int(p.ctype) != 0x7FFF else ttype, ttype
        if isinstance(p, Ack):
            want["ackno"], got["ackno"] = str(p.ack_no), ackno
            want["ack_sub"], got["ack_sub"] = str(p.ack_seq_no), ack_sub
        if isinstance(p, Handshake):
            want["isn"], got["isn"] = str(p.isn), isn
            want["reqtype"], got["reqtype"] = str(p.req_type), reqtype
        if want != got:
            mismatches.append(f"frame {frame}: ours {want} vs tshark {got}")
    assert not mismatches, f"{len(mismatches)} frames decoded differently, e.g. " + "; ".join(mismatches[:5])
