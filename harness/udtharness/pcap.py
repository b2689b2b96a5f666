"""A small reader/writer for pcap and pcapng captures of UDP (and TCP) over IPv4/IPv6.

Own code on purpose (no tshark dissector in the loop): the captured UDP payloads go straight
to :mod:`udtconf.udt.wire`, so the suite's decoder — not Wireshark's UDT dissector — judges the
bytes. :func:`read_frames` also returns TCP segments, for SABUL's control stream
(:mod:`udtconf.sabul.trace` reassembles it). Supported link types: Ethernet (Linux loopback),
BSD null/loop, raw IP, Linux cooked v1/v2. Fragmented IP datagrams are skipped and counted (UDT
never needs fragmentation at the default MSS).
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, overload

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
_PCAPNG_SHB = 0x0A0D0D0A


class PcapError(ValueError):
    """The capture file is not a pcap/pcapng this reader understands."""


@dataclass(frozen=True)
class Captured:
    """When a captured packet passed, and from where to where."""

    time: float
    src: tuple[str, int]
    dst: tuple[str, int]


@dataclass(frozen=True)
class UdpDatagram(Captured):
    payload: bytes


@dataclass(frozen=True)
class TcpSegment(Captured):
    seq: int
    ack: int
    flags: int  # TCP_FIN | TCP_SYN | TCP_RST | …
    payload: bytes


TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def read_udp(path: str | Path) -> list[UdpDatagram]:
    """All UDP datagrams of a capture, in file order."""
    with open(path, "rb") as f:
        return list(iter_udp(f))


def iter_udp(f: BinaryIO) -> Iterator[UdpDatagram]:
    for t, linktype, frame in _frames(f):
        dg = parse_frame(t, linktype, frame)
        if dg is not None:
            yield dg


def read_frames(path: str | Path) -> list[tuple[int, UdpDatagram | TcpSegment]]:
    """Every UDP datagram and TCP segment of a capture with its 1-based frame number in the file
    (frames of anything else are counted, not returned)."""
    out: list[tuple[int, UdpDatagram | TcpSegment]] = []
    with open(path, "rb") as f:
        for n, (t, linktype, frame) in enumerate(_frames(f), start=1):
            pkt = parse_frame(t, linktype, frame, tcp=True)
            if pkt is not None:
                out.append((n, pkt))
    return out


def _frames(f: BinaryIO) -> Iterator[tuple[float, int, bytes]]:
    magic = f.read(4)
    if len(magic) < 4:
        return iter(())
    if magic in _PCAP_MAGICS:
        return _pcap_frames(f, magic)
    if struct.unpack("<I", magic)[0] == _PCAPNG_SHB:
        return _pcapng_frames(f, magic)
    raise PcapError(f"unknown capture magic {magic.hex()}")


def _pcap_frames(f: BinaryIO, magic: bytes) -> Iterator[tuple[float, int, bytes]]:
    endian, unit = _PCAP_MAGICS[magic]
    rest = f.read(20)
    if len(rest) < 20:
        raise PcapError("truncated pcap global header")
    _vmaj, _vmin, _tz, _sig, _snap, linktype = struct.unpack(endian + "HHiIII", rest)
    linktype &= 0x0FFFFFFF
    rec = struct.Struct(endian + "IIII")
    while True:
        hdr = f.read(16)
        if len(hdr) < 16:
            return
        sec, frac, incl, _orig = rec.unpack(hdr)
        data = f.read(incl)
        if len(data) < incl:
            return  # capture still being written: ignore the partial tail
        yield sec + frac * unit, linktype, data


def _pcapng_frames(f: BinaryIO, first4: bytes) -> Iterator[tuple[float, int, bytes]]:
    endian = "<"
    ifaces: list[tuple[int, float]] = []
    head: bytes = first4
    while True:
        if not head:
            head = f.read(4)
        lenraw = f.read(4)
        if len(head) < 4 or len(lenraw) < 4:
            return
        if head == b"\x0a\x0d\x0d\x0a":  # section header: byte order comes after the length
            bom = f.read(4)
            endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack(endian + "I", lenraw)[0]
            body = bom + f.read(blen - 12)
            btype = _PCAPNG_SHB
            ifaces = []
        else:
            btype = struct.unpack(endian + "I", head)[0]
            blen = struct.unpack(endian + "I", lenraw)[0]
            body = f.read(blen - 8)
        head = b""
        if blen < 12 or len(body) < blen - 8:
            return  # truncated tail (capture still being written)
        body = body[:-4]  # trailing block length
        if btype == 1:  # interface description
            linktype = struct.unpack_from(endian + "H", body)[0]
            ifaces.append((linktype, _if_tsresol(body[8:], endian)))
        elif btype == 6:  # enhanced packet
            iface, th, tl, incl, _orig = struct.unpack_from(endian + "IIIII", body)
            if iface >= len(ifaces):
                raise PcapError(f"pcapng packet on undeclared interface {iface}")
            linktype, res = ifaces[iface]
            yield ((th << 32) | tl) * res, linktype, body[20 : 20 + incl]
        elif btype == 3:  # simple packet
            if not ifaces:
                raise PcapError("pcapng simple packet before any interface")
            orig = struct.unpack_from(endian + "I", body)[0]
            yield 0.0, ifaces[0][0], body[4 : 4 + orig]


def _if_tsresol(options: bytes, endian: str) -> float:
    i = 0
    while i + 4 <= len(options):
        code, length = struct.unpack_from(endian + "HH", options, i)
        if code == 0:
            break
        if code == 9 and length >= 1:
            v = options[i + 4]
            return 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0**-v
        i += 4 + ((length + 3) & ~3)
    return 1e-6


@overload
def parse_frame(t: float, linktype: int, frame: bytes) -> UdpDatagram | None: ...
@overload
def parse_frame(t: float, linktype: int, frame: bytes, tcp: bool) -> UdpDatagram | TcpSegment | None: ...


def parse_frame(t: float, linktype: int, frame: bytes, tcp: bool = False) -> UdpDatagram | TcpSegment | None:
    """The UDP datagram (with ``tcp``: or TCP segment) inside one link-layer frame, or None."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        etype, off = struct.unpack_from("!H", frame, 12)[0], 14
        while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
            etype, off = struct.unpack_from("!H", frame, off + 2)[0], off + 4
        if etype not in (0x0800, 0x86DD):
            return None
        ip = frame[off:]
    elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        ip = frame[4:]
    elif linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        ip = frame
    elif linktype == LINKTYPE_LINUX_SLL:
        ip = frame[16:]
    elif linktype == LINKTYPE_LINUX_SLL2:
        ip = frame[20:]
    else:
        raise PcapError(f"unsupported link type {linktype}")
    parsed = _parse_ip(ip)
    if parsed is None:
        return None
    proto, src, dst, l4 = parsed
    if proto == 17 and len(l4) >= 8:
        sport, dport, ulen = struct.unpack_from("!HHH", l4)
        return UdpDatagram(t, (src, sport), (dst, dport), bytes(l4[8:ulen] if ulen >= 8 else l4[8:]))
    if proto == 6 and tcp and len(l4) >= 20:
        sport, dport, seq, ack, off_flags = struct.unpack_from("!HHIIH", l4)
        hlen = (off_flags >> 12) * 4
        return TcpSegment(t, (src, sport), (dst, dport), seq, ack, off_flags & 0x3F, bytes(l4[hlen:]))
    return None


def _parse_ip(pkt: bytes) -> tuple[int, str, str, bytes] | None:
    """(protocol, source, destination, transport bytes) of an unfragmented IP packet."""
    if not pkt:
        return None
    version = pkt[0] >> 4
    if version == 4:
        if len(pkt) < 20:
            return None
        ihl = (pkt[0] & 0x0F) * 4
        total = struct.unpack_from("!H", pkt, 2)[0]
        flags_frag = struct.unpack_from("!H", pkt, 6)[0]
        if flags_frag & 0x3FFF:  # MF set or non-zero offset: a fragment
            return None
        src = str(ipaddress.IPv4Address(pkt[12:16]))
        dst = str(ipaddress.IPv4Address(pkt[16:20]))
        return pkt[9], src, dst, pkt[ihl:total] if total >= ihl else pkt[ihl:]
    if version == 6:
        if len(pkt) < 40:
            return None  # extension headers are not expected on a test link
        plen = struct.unpack_from("!H", pkt, 4)[0]
        src = str(ipaddress.IPv6Address(pkt[8:24]))
        dst = str(ipaddress.IPv6Address(pkt[24:40]))
        return pkt[6], src, dst, pkt[40 : 40 + plen]
    return None


# ---------------------------------------------------------------------------------------------
# Writer: classic pcap, raw IPv4 link type. Used by the loss relay (a capture without root)
# and by tests.


class PcapWriter:
    """Append UDP/IPv4 datagrams (and TCP segments, :meth:`write_tcp`) to a classic pcap file
    (LINKTYPE_RAW, µs timestamps)."""

    def __init__(self, path: str | Path) -> None:
        self._f = open(path, "wb")
        self._f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_RAW))
        self._ident = 0

    def write(self, t: float, src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> None:
        udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
        self._ip(t, 17, src, dst, udp)

    def write_tcp(
        self,
        t: float,
        src: tuple[str, int],
        dst: tuple[str, int],
        seq: int,
        flags: int,
        payload: bytes = b"",
        ack: int = 0,
    ) -> None:
        """One TCP segment (no options, checksum 0: readers here do not check it)."""
        tcp = struct.pack("!HHIIHHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack, (5 << 12) | flags, 65535, 0, 0) + payload
        self._ip(t, 6, src, dst, tcp)

    def _ip(self, t: float, proto: int, src: tuple[str, int], dst: tuple[str, int], l4: bytes) -> None:
        udp = l4
        self._ident = (self._ident + 1) & 0xFFFF
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(udp),
            self._ident,
            0x4000,
            64,
            proto,
            0,
            ipaddress.IPv4Address(src[0]).packed,
            ipaddress.IPv4Address(dst[0]).packed,
        )
        ip = ip[:10] + struct.pack("!H", _ip_checksum(ip)) + ip[12:]
        frame = ip + udp
        sec = int(t)
        self._f.write(struct.pack("<IIII", sec, int(round((t - sec) * 1e6)) % 1_000_000, len(frame), len(frame)))
        self._f.write(frame)
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ip_checksum(hdr: bytes) -> int:
    words: tuple[int, ...] = struct.unpack("!10H", hdr)
    s = sum(words)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
