"""SABUL codec written from ``docs/spec/SABUL.md`` §3 (independent of the Rust code).

Two channels:

* **UDP** carries DATA (§3.1): a 32-bit word with the 31-bit sequence number, then 1 …
  ``payload_size`` bytes. :func:`decode_data`.
* **TCP**, receiver → sender, carries the option block (§3.4, 40 bytes), then control frames
  (§3.2): ACK, ERR (with a loss list, §3.3) and SYN; sender → receiver it carries only the
  echo of the block. :class:`ControlReader` decodes the stream incrementally, the way a peer
  reads it; :func:`decode_control` decodes exactly one frame.

Every decoder raises :class:`SabulWireError`, naming the violated section, and nothing else on
any input. An ERR's attribute is checked against ``max_loss_length`` from its 8-byte header
alone, so a frame that claims a billion words costs nothing (§3.2 TC). Crafting broken frames
for the active tester goes through :func:`encode_raw_control` and ``Err(words=...)``, which do
not validate.

    >>> decode_control(bytes.fromhex("00000001" "00000400"))
    Ack(ack_no=1024)
    >>> Err.from_losses([100, 200, 201, 202, 203, 300]).encode().hex()
    '000000020000000400000064800000c8000000cb0000012c'
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from enum import IntEnum
from typing import Protocol, Self

from .. import loss_list
from ..seq import MAX

DATA_HEADER_LEN = 4
CONTROL_HEADER_LEN = 8
OPTION_BLOCK_LEN = 40
DEFAULT_PKT_SIZE = 1472  # §3.1: 1500-byte MTU − 28
MIN_PKT_SIZE = 32  # §3.4 TC: room for a 6-word ERR
MAX_PKT_SIZE = 65507  # §3.4 TC: the largest UDP payload over IPv4
DEFAULT_MAX_LOSS_LENGTH = DEFAULT_PKT_SIZE // 4 - 2  # 366
DEFAULT_FLAG_SIZE = 25600
DEFAULT_BUF_SIZE = 40_960_000
MAX_FLAG_SIZE = (1 << 30) - 1
_HDR = struct.Struct("!II")
_WORD = struct.Struct("!I")
_BLOCK = struct.Struct("!10I")


class SabulWireError(ValueError):
    """Bytes that are not valid SABUL; the message names the section of SABUL.md."""

    def __init__(self, message: str, section: str) -> None:
        super().__init__(f"{message} (SABUL.md §{section})")
        self.message = message
        self.section = section

    def __reduce__(self) -> tuple[type[SabulWireError], tuple[str, str]]:
        return (SabulWireError, (self.message, self.section))


class ControlType(IntEnum):
    """Control frame types (§3.2). EXP is the sender's internal event, never on the wire."""

    ACK = 1
    ERR = 2
    EXP = 3
    SYN = 4


# ---------------------------------------------------------------------------------------------
# DATA (§3.1)


@dataclass(frozen=True)
class Data:
    seq: int
    payload: bytes

    def encode(self) -> bytes:
        if not 0 <= self.seq <= MAX:
            raise SabulWireError(f"sequence number {self.seq:#x} outside 31 bits", "3.1")
        if not self.payload:
            raise SabulWireError("a DATA packet carries at least one payload byte", "3.1")
        return _WORD.pack(self.seq) + self.payload


def decode_data(buf: bytes, pkt_size: int | None = None) -> Data:
    """One UDP payload as DATA; ``pkt_size`` (the echoed value, §3.4) bounds its length."""
    if len(buf) <= DATA_HEADER_LEN:
        raise SabulWireError(f"DATA datagram of {len(buf)} bytes: needs the 4-byte header and a payload", "3.1")
    (seq,) = _WORD.unpack_from(buf)
    if seq & 0x80000000:
        raise SabulWireError(f"DATA header {seq:#010x} has bit 31 set", "3.1")
    if pkt_size is not None and len(buf) > pkt_size:
        raise SabulWireError(f"DATA datagram of {len(buf)} bytes exceeds the packet size {pkt_size}", "3.1")
    return Data(seq, bytes(buf[DATA_HEADER_LEN:]))


# ---------------------------------------------------------------------------------------------
# Control frames (§3.2, §3.3)


@dataclass(frozen=True)
class Ack:
    """Everything before ``ack_no`` received: the next expected sequence number."""

    ack_no: int

    ctype = ControlType.ACK

    def encode(self) -> bytes:
        if not 0 <= self.ack_no <= MAX:
            raise SabulWireError(f"ACK number {self.ack_no:#x} outside 31 bits", "3.2")
        return _HDR.pack(ControlType.ACK, self.ack_no)


@dataclass(frozen=True)
class Syn:
    """DATA datagrams received since the previous SYN (§3.2 TC: counted on arrival)."""

    received: int

    ctype = ControlType.SYN

    def encode(self) -> bytes:
        return _HDR.pack(ControlType.SYN, self.received & 0xFFFFFFFF)


@dataclass(frozen=True)
class Err:
    """A loss report; ``words`` is the loss list exactly as on the wire (§3.3)."""

    words: tuple[int, ...]

    ctype = ControlType.ERR

    @classmethod
    def from_losses(cls, lost: Iterable[int]) -> Err:
        """The compressed report of lost numbers given in increasing order (§3.3)."""
        try:
            return cls(tuple(loss_list.encode(lost)))
        except loss_list.LossListError as e:
            raise SabulWireError(str(e), "3.3") from e

    def encode(self) -> bytes:
        return _HDR.pack(ControlType.ERR, len(self.words)) + b"".join(_WORD.pack(w & 0xFFFFFFFF) for w in self.words)

    def ranges(self) -> list[tuple[int, int]]:
        try:
            return loss_list.decode(self.words)
        except loss_list.LossListError as e:
            raise SabulWireError(f"ERR: {e}", "3.3") from e

    @property
    def lost(self) -> int:
        """Lost packets the report covers: what feeds the sender's ``lost`` count (§5.2)."""
        return loss_list.count(self.ranges())

    @property
    def first(self) -> int:
        """The first (smallest) number, the one the rate decrease looks at (§5.2, §7.3)."""
        return self.ranges()[0][0]


Control = Ack | Err | Syn


def encode_raw_control(ctype: int, attr: int, words: Iterable[int] = ()) -> bytes:
    """Any frame, byte by byte, without validation (for crafted and malformed probes)."""
    return _HDR.pack(ctype & 0xFFFFFFFF, attr & 0xFFFFFFFF) + b"".join(_WORD.pack(w & 0xFFFFFFFF) for w in words)


def _check_header(ctype: int, attr: int, max_loss_length: int) -> None:
    if ctype == ControlType.ERR:
        if attr == 0:
            raise SabulWireError("ERR with no loss-list words", "3.2")
        if attr > max_loss_length:
            raise SabulWireError(f"ERR claims {attr} loss-list words; max_loss_length is {max_loss_length}", "3.2")
    elif ctype == ControlType.ACK:
        if attr & 0x80000000:
            raise SabulWireError(f"ACK number {attr:#010x} has bit 31 set", "3.2")
    elif ctype == ControlType.EXP:
        raise SabulWireError("EXP (type 3) is the sender's internal event and never on the wire", "3.2")
    elif ctype != ControlType.SYN:
        raise SabulWireError(f"unknown control type {ctype}", "3.2")


def _frame(ctype: int, attr: int, body: bytes) -> Control:
    if ctype == ControlType.ACK:
        return Ack(attr)
    if ctype == ControlType.SYN:
        return Syn(attr)
    err = Err(struct.unpack(f"!{attr}I", body))
    err.ranges()  # validates the list (§3.3)
    return err


def decode_control(buf: bytes, max_loss_length: int = DEFAULT_MAX_LOSS_LENGTH) -> Control:
    """Exactly one frame: truncated or trailing bytes are errors."""
    if len(buf) < CONTROL_HEADER_LEN:
        raise SabulWireError(f"control frame of {len(buf)} bytes is shorter than its 8-byte header", "3.2")
    ctype, attr = _HDR.unpack_from(buf)
    _check_header(ctype, attr, max_loss_length)
    want = CONTROL_HEADER_LEN + 4 * attr if ctype == ControlType.ERR else CONTROL_HEADER_LEN
    if len(buf) != want:
        raise SabulWireError(f"{ControlType(ctype).name} frame of {len(buf)} bytes; its header says {want}", "3.2")
    return _frame(ctype, attr, bytes(buf[CONTROL_HEADER_LEN:]))


class ControlReader:
    """Incremental decoder of the receiver → sender stream after the option block (§3.2).

    :meth:`feed` takes whatever bytes arrived and returns the frames they complete. An invalid
    frame raises :class:`SabulWireError` as soon as its header shows it (an ERR's length is
    checked before its body is awaited) and the reader refuses further input. :meth:`finish` is
    EOF: bytes of an incomplete frame are then a truncated frame.
    """

    def __init__(self, max_loss_length: int = DEFAULT_MAX_LOSS_LENGTH) -> None:
        self.max_loss_length = max_loss_length
        self._buf = bytearray()
        self._error: SabulWireError | None = None
        self.consumed = 0  # stream bytes of complete frames so far

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Control]:
        if self._error is not None:
            raise self._error
        self._buf += data
        out: list[Control] = []
        try:
            while len(self._buf) >= CONTROL_HEADER_LEN:
                ctype, attr = _HDR.unpack_from(self._buf)
                _check_header(ctype, attr, self.max_loss_length)
                size = CONTROL_HEADER_LEN + (4 * attr if ctype == ControlType.ERR else 0)
                if len(self._buf) < size:
                    break
                out.append(_frame(ctype, attr, bytes(self._buf[CONTROL_HEADER_LEN:size])))
                del self._buf[:size]
                self.consumed += size
        except SabulWireError as e:
            self._error = e
            raise
        return out

    def finish(self) -> None:
        """The stream ended (EOF): raises if it ended inside a frame."""
        if self._error is not None:
            raise self._error
        if self._buf:
            raise SabulWireError(f"control stream ends inside a frame ({len(self._buf)} bytes of it)", "3.2")


def decode_control_stream(buf: bytes, max_loss_length: int = DEFAULT_MAX_LOSS_LENGTH) -> list[Control]:
    """A complete control stream (after the option block) as frames."""
    reader = ControlReader(max_loss_length)
    frames = reader.feed(buf)
    reader.finish()
    return frames


# ---------------------------------------------------------------------------------------------
# Option block and echo (§3.4)


@dataclass(frozen=True)
class OptionBlock:
    """The ten-word block a receiver sends first and the sender echoes (§3.4)."""

    data_port: int
    ctrl_port: int = 7000
    pkt_size: int = DEFAULT_PKT_SIZE
    payload_size: int = DEFAULT_PKT_SIZE - DATA_HEADER_LEN
    max_loss_length: int = DEFAULT_MAX_LOSS_LENGTH
    blockable: int = 0
    send_buf_size: int = DEFAULT_BUF_SIZE
    recv_buf_size: int = DEFAULT_BUF_SIZE
    recv_flag_size: int = DEFAULT_FLAG_SIZE
    reserved: int = 0

    @classmethod
    def for_packet_size(cls, pkt_size: int, data_port: int, ctrl_port: int = 7000, **other: int) -> OptionBlock:
        """A block with words 3–4 derived from ``pkt_size`` as §3.4 requires."""
        return cls(data_port, ctrl_port, pkt_size, pkt_size - DATA_HEADER_LEN, pkt_size // 4 - 2, **other)

    def encode(self) -> bytes:
        """The 40 bytes, without validation (a probe may send an invalid block)."""
        return _BLOCK.pack(*(getattr(self, f.name) & 0xFFFFFFFF for f in fields(self)))

    def problems(self) -> list[str]:
        """Why the block is invalid (§3.4 TC), empty when it is valid."""
        out = []
        if not 1 <= self.data_port <= 0xFFFF:
            out.append(f"data_port {self.data_port} is not 1…65535")
        if not 0 <= self.ctrl_port <= 0xFFFF:
            out.append(f"ctrl_port {self.ctrl_port} is not 0…65535")
        if not MIN_PKT_SIZE <= self.pkt_size <= MAX_PKT_SIZE:
            out.append(f"pkt_size {self.pkt_size} is not {MIN_PKT_SIZE}…{MAX_PKT_SIZE}")
        if self.payload_size != self.pkt_size - DATA_HEADER_LEN:
            out.append(f"payload_size {self.payload_size} ≠ pkt_size − 4 = {self.pkt_size - DATA_HEADER_LEN}")
        if self.max_loss_length != self.pkt_size // 4 - 2:
            out.append(f"max_loss_length {self.max_loss_length} ≠ ⌊pkt_size/4⌋ − 2 = {self.pkt_size // 4 - 2}")
        if self.blockable not in (0, 1):
            out.append(f"blockable {self.blockable} is not 0 or 1")
        if not 1 <= self.recv_flag_size <= MAX_FLAG_SIZE:
            out.append(f"recv_flag_size {self.recv_flag_size} is not 1…2^30−1")
        if self.reserved != 0:
            out.append(f"reserved word {self.reserved:#x} ≠ 0")
        return out

    def validate(self) -> OptionBlock:
        bad = self.problems()
        if bad:
            raise SabulWireError("invalid option block: " + "; ".join(bad), "3.4")
        return self

    def echo(self, sender_pkt_size: int) -> OptionBlock:
        """The sender's echo: words 2–4 lowered to ``sender_pkt_size`` if that is smaller, the
        rest unchanged (§3.4 TC)."""
        pkt = min(self.pkt_size, sender_pkt_size)
        return replace(self, pkt_size=pkt, payload_size=pkt - DATA_HEADER_LEN, max_loss_length=pkt // 4 - 2)

    def echo_problems(self, echo: OptionBlock) -> list[str]:
        """Why ``echo`` is not an acceptable echo of this block (§3.4 TC), empty when it is."""
        out = echo.problems()
        for f in fields(self):
            if f.name in ("pkt_size", "payload_size", "max_loss_length"):
                continue
            if getattr(echo, f.name) != getattr(self, f.name):
                out.append(f"echo changed {f.name}: {getattr(self, f.name)} → {getattr(echo, f.name)}")
        if echo.pkt_size > self.pkt_size:
            out.append(f"echo raised pkt_size {self.pkt_size} → {echo.pkt_size}")
        return out

    @property
    def sabul(self) -> OptionBlock:
        """The ten words of §3.4: the block itself (:class:`Block`)."""
        return self

    def data_address(self, control_peer_ip: str) -> tuple[str, int]:
        """Where the sender sends DATA: the control connection's peer, ``data_port`` (§2 step 6)."""
        return (control_peer_ip, self.data_port)


class Block(Protocol):
    """An option block as a profile of SABUL defines it (:mod:`.profile`): SABUL's own
    :class:`OptionBlock`, or a longer one that begins with SABUL's ten words and extends them.
    What SABUL's peer (:mod:`.peer`), trace (:mod:`.trace`) and rules (:mod:`.checks`) need of it."""

    @property
    def sabul(self) -> OptionBlock:
        """Its first ten words, SABUL's (§3.4)."""
        ...

    def encode(self) -> bytes: ...

    def problems(self) -> list[str]:
        """Why the block is invalid, empty when it is valid."""
        ...

    def echo_problems(self, echo: Self) -> list[str]:
        """Why ``echo`` is not an acceptable echo of this block, empty when it is."""
        ...

    def data_address(self, control_peer_ip: str) -> tuple[str, int]:
        """Where the sender sends DATA, given the IP of the receiver's control connection."""
        ...


def decode_option_block(buf: bytes, validate: bool = True) -> OptionBlock:
    """Exactly 40 bytes as an option block (validated by default, §3.4)."""
    if len(buf) != OPTION_BLOCK_LEN:
        raise SabulWireError(f"option block of {len(buf)} bytes, not {OPTION_BLOCK_LEN}", "3.4")
    block = OptionBlock(*_BLOCK.unpack(buf))
    return block.validate() if validate else block


def describe(frame: Control | Data | OptionBlock) -> str:
    """One line for violation messages."""
    if isinstance(frame, Data):
        return f"DATA seq={frame.seq} len={DATA_HEADER_LEN + len(frame.payload)}"
    if isinstance(frame, Ack):
        return f"ACK {frame.ack_no}"
    if isinstance(frame, Syn):
        return f"SYN {frame.received}"
    if isinstance(frame, Err):
        return "ERR " + ",".join(f"{w:#010x}" for w in frame.words[:8]) + (" …" if len(frame.words) > 8 else "")
    return (
        f"OPTIONS data_port={frame.data_port} pkt_size={frame.pkt_size} max_loss_length={frame.max_loss_length} "
        f"flag_size={frame.recv_flag_size}"
    )


__all__ = [
    "Ack",
    "Block",
    "Control",
    "ControlReader",
    "ControlType",
    "Data",
    "Err",
    "OptionBlock",
    "SabulWireError",
    "Syn",
    "decode_control",
    "decode_control_stream",
    "decode_data",
    "decode_option_block",
    "describe",
    "encode_raw_control",
]
