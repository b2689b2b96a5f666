"""UDT4 packet codec written from ``docs/spec/UDT4.md`` §2–5 (independent of the Rust code).

:func:`decode` turns one UDP payload into a typed packet and raises :class:`WireError` —
naming the spec section that was violated — for anything a conforming stack must not put on
the wire (truncation, an ACK body that is not 4/16/24 bytes, a handshake body that is not 48
bytes, a NAK ending in a range start, ...). Every packet type has ``encode()``; crafting
deliberately broken packets for the active tester goes through :func:`encode_raw_control`
or ``Nak(words=..., ...)`` which never validate.

Example::

    >>> pkt = decode(bytes.fromhex("80010000" "00000000" "00000000" "00c0ffee" "00000000"))
    >>> type(pkt).__name__, pkt.dst_id == 0xC0FFEE, pkt.info_len
    ('KeepAlive', True, 4)
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from .. import loss_list
from ..seq import MAX, incseq, seqlen

HEADER_LEN = 16
HANDSHAKE_INFO_LEN = 48
_HDR = struct.Struct("!IIII")
_WORD = struct.Struct("!I")


class WireError(ValueError):
    """A byte string is not a valid UDT4 packet; the message names the spec section."""

    def __init__(self, message: str, section: str) -> None:
        super().__init__(f"{message} (UDT4.md §{section})")
        self.message = message
        self.section = section

    def __reduce__(self) -> tuple[type[WireError], tuple[str, str]]:
        # Keeps copy/pickle working (reports deep-copy trace entries that carry errors).
        return (WireError, (self.message, self.section))


class ControlType(IntEnum):
    """Control types of UDT4.md §3.2 (15-bit type field)."""

    HANDSHAKE = 0
    KEEPALIVE = 1
    ACK = 2
    NAK = 3
    CONGESTION_WARNING = 4
    SHUTDOWN = 5
    ACK2 = 6
    MSG_DROP_REQUEST = 7
    ERROR_SIGNAL = 8
    USER_DEFINED = 0x7FFF


class SocketType(IntEnum):
    """Handshake word 1 (§5.1, §14 row 1: 4.11 uses 1/2, not the draft's 0/1)."""

    STREAM = 1
    DGRAM = 2


class RequestType(IntEnum):
    """Handshake word 5, signed (§5.1)."""

    CLIENT = 1
    RENDEZVOUS = 0
    RESPONSE = -1
    RENDEZVOUS_FINAL = -2
    REJECTED = 1002


class Boundary(IntEnum):
    """FF bits of a data packet's word 1 (§3.1)."""

    MIDDLE = 0b00
    LAST = 0b01
    FIRST = 0b10
    SOLO = 0b11


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# Data packets (§3.1)


@dataclass(frozen=True)
class DataPacket:
    seq: int
    msg_no: int
    boundary: Boundary = Boundary.SOLO
    in_order: bool = False
    timestamp: int = 0
    dst_id: int = 0
    payload: bytes = b""

    is_control: ClassVar[bool] = False

    @property
    def msg_word(self) -> int:
        return (int(self.boundary) << 30) | (int(self.in_order) << 29) | (self.msg_no & 0x1FFFFFFF)

    def encode(self) -> bytes:
        if not 0 <= self.seq <= MAX:
            raise WireError(f"sequence number {self.seq:#x} outside 31 bits", "3.1")
        return _HDR.pack(self.seq, self.msg_word, _u32(self.timestamp), _u32(self.dst_id)) + self.payload

    @property
    def length(self) -> int:
        return HEADER_LEN + len(self.payload)


# ---------------------------------------------------------------------------------------------
# Control packets (§3.2, §5)


@dataclass(frozen=True)
class _Control:
    """Fields common to every control packet. ``info_len`` is the control-information length
    seen on the wire (0 or 4 for the info-less types: §2 allows both, 4.11 sends 4)."""

    timestamp: int = 0
    dst_id: int = 0

    is_control: ClassVar[bool] = True
    ctype: ClassVar[ControlType]

    def _header(self, addl: int, ext: int = 0) -> bytes:
        word0 = 0x80000000 | (int(self.ctype) << 16) | (ext & 0xFFFF)
        return _HDR.pack(word0, _u32(addl), _u32(self.timestamp), _u32(self.dst_id))


@dataclass(frozen=True)
class _Empty(_Control):
    """A type that carries no control information: 4 zero bytes of padding (§2)."""

    addl: int = 0
    info_len: int = 4

    def encode(self) -> bytes:
        return self._header(self.addl) + b"\x00" * self.info_len


@dataclass(frozen=True)
class KeepAlive(_Empty):
    ctype: ClassVar[ControlType] = ControlType.KEEPALIVE


@dataclass(frozen=True)
class CongestionWarning(_Empty):
    ctype: ClassVar[ControlType] = ControlType.CONGESTION_WARNING


@dataclass(frozen=True)
class Shutdown(_Empty):
    ctype: ClassVar[ControlType] = ControlType.SHUTDOWN


@dataclass(frozen=True)
class Ack2(_Empty):
    """``addl`` = the ACK sub-sequence number being acknowledged (§5.7)."""

    ctype: ClassVar[ControlType] = ControlType.ACK2

    @property
    def ack_seq_no(self) -> int:
        return self.addl


@dataclass(frozen=True)
class ErrorSignal(_Empty):
    """``addl`` = error code; 4000 = file error (§5.9)."""

    ctype: ClassVar[ControlType] = ControlType.ERROR_SIGNAL


def peer_ip_field(address: str) -> bytes:
    """The 16-byte handshake peer-IP field as 4.11 on little-endian amd64 writes it (§5.1)."""
    raw = ipaddress.ip_address(address).packed
    if len(raw) == 4:
        return raw[::-1] + b"\x00" * 12
    return b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))


def peer_ip_from_field(raw: bytes) -> str:
    """Inverse of :func:`peer_ip_field`; IPv4 when words 1–3 are zero."""
    if raw[4:] == b"\x00" * 12:
        return str(ipaddress.IPv4Address(raw[:4][::-1]))
    return str(ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))))


@dataclass(frozen=True)
class Handshake(_Control):
    """Handshake body: exactly 12 big-endian words (§5.1)."""

    version: int = 4
    sock_type: int = SocketType.STREAM
    isn: int = 0
    mss: int = 1500
    flight_flag_size: int = 8192
    req_type: int = RequestType.CLIENT
    socket_id: int = 0
    cookie: int = 0
    peer_ip: bytes = b"\x00" * 16
    addl: int = 0

    ctype: ClassVar[ControlType] = ControlType.HANDSHAKE
    info_len: ClassVar[int] = HANDSHAKE_INFO_LEN

    def encode(self) -> bytes:
        if len(self.peer_ip) != 16:
            raise WireError("handshake peer IP field must be 16 bytes", "5.1")
        body = struct.pack(
            "!IIIIIiII",
            _u32(self.version),
            _u32(self.sock_type),
            _u32(self.isn),
            _u32(self.mss),
            _u32(self.flight_flag_size),
            self.req_type,
            _u32(self.socket_id),
            _u32(self.cookie),
        )
        return self._header(self.addl) + body + self.peer_ip

    @property
    def peer_address(self) -> str:
        return peer_ip_from_field(self.peer_ip)


class AckKind(IntEnum):
    LIGHT = 4
    MEDIUM = 16
    FULL = 24


@dataclass(frozen=True)
class Ack(_Control):
    """ACK in its three forms, told apart only by length (§5.3).

    ``ack_seq_no`` (additional info) is 0 for light ACKs; fields that the form does not carry
    are ``None``.
    """

    ack_seq_no: int = 0
    ack_no: int = 0
    rtt: int | None = None
    rtt_var: int | None = None
    avail_buffer: int | None = None
    arrival_speed: int | None = None
    link_capacity: int | None = None

    ctype: ClassVar[ControlType] = ControlType.ACK

    @property
    def kind(self) -> AckKind:
        if self.rtt is None:
            return AckKind.LIGHT
        if self.arrival_speed is None:
            return AckKind.MEDIUM
        return AckKind.FULL

    @property
    def info_len(self) -> int:
        return int(self.kind)

    def encode(self) -> bytes:
        fields = [self.ack_no, self.rtt, self.rtt_var, self.avail_buffer, self.arrival_speed, self.link_capacity]
        n = {AckKind.LIGHT: 1, AckKind.MEDIUM: 4, AckKind.FULL: 6}[self.kind]
        words = [f for f in fields[:n] if f is not None]
        if len(words) != n:
            raise WireError("ACK fields must be filled for the chosen form (4, 16 or 24 bytes)", "5.3")
        return self._header(self.ack_seq_no) + b"".join(struct.pack("!i", _s32(_u32(w))) for w in words)


NAK_RANGE_FLAG = loss_list.RANGE_FLAG


@dataclass(frozen=True)
class Nak(_Control):
    """NAK: a compressed loss list (§5.4). ``words`` is exactly what is on the wire."""

    words: tuple[int, ...] = ()
    addl: int = 0

    ctype: ClassVar[ControlType] = ControlType.NAK

    @property
    def info_len(self) -> int:
        return 4 * len(self.words)

    def encode(self) -> bytes:
        return self._header(self.addl) + b"".join(_WORD.pack(_u32(w)) for w in self.words)

    def ranges(self) -> list[tuple[int, int]]:
        """Decoded ``[first, last]`` ranges; raises :class:`WireError` on a malformed list."""
        return decode_loss_list(self.words)

    def losses(self) -> list[int]:
        out: list[int] = []
        for first, last in self.ranges():
            out.extend(incseq(first, i) for i in range(seqlen(first, last)))
        return out


@dataclass(frozen=True)
class MsgDropRequest(_Control):
    """``msg_no`` in additional info, then first/last sequence words (§5.8)."""

    msg_no: int = 0
    first_seq: int = 0
    last_seq: int = 0

    ctype: ClassVar[ControlType] = ControlType.MSG_DROP_REQUEST
    info_len: ClassVar[int] = 8

    def encode(self) -> bytes:
        return self._header(self.msg_no) + struct.pack("!II", self.first_seq, self.last_seq)


@dataclass(frozen=True)
class UserDefined(_Control):
    ext_type: int = 0
    addl: int = 0
    body: bytes = b"\x00" * 4

    ctype: ClassVar[ControlType] = ControlType.USER_DEFINED

    @property
    def info_len(self) -> int:
        return len(self.body)

    def encode(self) -> bytes:
        return self._header(self.addl, self.ext_type) + self.body


ControlPacket = (
    Handshake | KeepAlive | Ack | Nak | CongestionWarning | Shutdown | Ack2 | MsgDropRequest | ErrorSignal | UserDefined
)
Packet = DataPacket | ControlPacket

_EMPTY_TYPES: dict[int, type[KeepAlive | CongestionWarning | Shutdown | Ack2 | ErrorSignal]] = {
    ControlType.KEEPALIVE: KeepAlive,
    ControlType.CONGESTION_WARNING: CongestionWarning,
    ControlType.SHUTDOWN: Shutdown,
    ControlType.ACK2: Ack2,
    ControlType.ERROR_SIGNAL: ErrorSignal,
}


# ---------------------------------------------------------------------------------------------
# Loss-list compression (§5.4): the shared codec of udtconf.loss_list, errors naming §5.4


def encode_loss_list(lost: Iterable[int]) -> list[int]:
    """Compress lost sequence numbers the way 4.11 does: a run of one → one word, any run of
    two or more (also across the 2^31 wrap) → ``first | 0x80000000, last``.

    ``lost`` must be given in increasing sequence order (wrap-aware).
    """
    try:
        return loss_list.encode(lost)
    except loss_list.LossListError as e:
        raise WireError(str(e), "5.4") from e


def decode_loss_list(words: Iterable[int]) -> list[tuple[int, int]]:
    """Decode NAK words into inclusive ranges, enforcing the decoder rules of §5.4."""
    try:
        return loss_list.decode(words)
    except loss_list.LossListError as e:
        raise WireError(f"NAK: {e}", "5.4") from e


# ---------------------------------------------------------------------------------------------
# Decoder


def decode(buf: bytes) -> Packet:
    """Decode one UDP payload. Raises :class:`WireError` naming the violated section."""
    if len(buf) < HEADER_LEN:
        raise WireError(f"packet of {len(buf)} bytes is shorter than the 16-byte header", "2")
    w0, w1, ts, dst = _HDR.unpack_from(buf)
    if not w0 & 0x80000000:
        return DataPacket(
            seq=w0,
            msg_no=w1 & 0x1FFFFFFF,
            boundary=Boundary(w1 >> 30),
            in_order=bool(w1 >> 29 & 1),
            timestamp=ts,
            dst_id=dst,
            payload=bytes(buf[HEADER_LEN:]),
        )
    ctype = (w0 >> 16) & 0x7FFF
    ext = w0 & 0xFFFF
    info = bytes(buf[HEADER_LEN:])
    if len(info) % 4:
        raise WireError(f"control information of {len(info)} bytes is not a multiple of 4", "2")
    if ctype != ControlType.USER_DEFINED and ext != 0:
        raise WireError(f"extended type {ext:#x} must be 0 for built-in type {ctype}", "3.2")
    if ctype == ControlType.HANDSHAKE:
        if len(info) != HANDSHAKE_INFO_LEN:
            raise WireError(f"handshake control information is {len(info)} bytes, not 48", "5.1")
        v, st, isn, mss, ffs, rt, sid, cookie = struct.unpack_from("!IIIIIiII", info)
        return Handshake(ts, dst, v, st, isn, mss, ffs, rt, sid, cookie, info[32:48], addl=w1)
    if ctype in _EMPTY_TYPES:
        if len(info) not in (0, 4) or any(info):
            raise WireError(
                f"{ControlType(ctype).name} must carry no information or 4 zero bytes, got {info.hex() or 'none'}",
                "2",
            )
        return _EMPTY_TYPES[ctype](ts, dst, addl=w1, info_len=len(info))
    if ctype == ControlType.ACK:
        if len(info) not in (4, 16, 24):
            raise WireError(f"ACK information is {len(info)} bytes; must be 4, 16 or 24", "5.3")
        f = struct.unpack(f"!{len(info) // 4}i", info) + (None,) * (6 - len(info) // 4)
        return Ack(ts, dst, w1, _u32(f[0]), *f[1:])
    if ctype == ControlType.NAK:
        words = struct.unpack(f"!{len(info) // 4}I", info)
        decode_loss_list(words)
        return Nak(ts, dst, words, addl=w1)
    if ctype == ControlType.MSG_DROP_REQUEST:
        if len(info) != 8:
            raise WireError(f"message drop request information is {len(info)} bytes, not 8", "5.8")
        first, last = struct.unpack("!II", info)
        return MsgDropRequest(ts, dst, w1, first, last)
    if ctype == ControlType.USER_DEFINED:
        return UserDefined(ts, dst, ext, w1, info)
    raise WireError(f"unknown control type {ctype:#x}", "3.2")


def encode_raw_control(
    ctype: int, addl: int = 0, timestamp: int = 0, dst_id: int = 0, info: bytes = b"", ext: int = 0
) -> bytes:
    """Build any control packet byte by byte, without validation (for crafted/malformed tests)."""
    word0 = 0x80000000 | ((ctype & 0x7FFF) << 16) | (ext & 0xFFFF)
    return _HDR.pack(word0, _u32(addl), _u32(timestamp), _u32(dst_id)) + info


def describe(pkt: Packet) -> str:
    """One-line human description, used in violation messages."""
    if isinstance(pkt, DataPacket):
        return f"DATA seq={pkt.seq:#x} msg={pkt.msg_word:#010x} ts={pkt.timestamp} dst={pkt.dst_id:#x} len={pkt.length}"
    name = type(pkt).__name__.upper()
    extra = ""
    if isinstance(pkt, Handshake):
        extra = (
            f" req={pkt.req_type} id={pkt.socket_id:#x} isn={pkt.isn:#x} cookie={pkt.cookie:#x}"
            f" mss={pkt.mss} ffs={pkt.flight_flag_size}"
        )
    elif isinstance(pkt, Ack):
        extra = f" {pkt.kind.name.lower()} sub={pkt.ack_seq_no} ack={pkt.ack_no:#x}"
    elif isinstance(pkt, Nak):
        extra = " words=" + ",".join(f"{w:#010x}" for w in pkt.words)
    elif isinstance(pkt, Ack2):
        extra = f" sub={pkt.addl}"
    return f"{name}{extra} dst={pkt.dst_id:#x}"


__all__ = [
    "Ack",
    "Ack2",
    "AckKind",
    "Boundary",
    "CongestionWarning",
    "ControlType",
    "DataPacket",
    "ErrorSignal",
    "Handshake",
    "KeepAlive",
    "MsgDropRequest",
    "Nak",
    "Packet",
    "RequestType",
    "Shutdown",
    "SocketType",
    "UserDefined",
    "WireError",
    "decode",
    "decode_loss_list",
    "describe",
    "encode_loss_list",
    "encode_raw_control",
    "peer_ip_field",
    "peer_ip_from_field",
]
