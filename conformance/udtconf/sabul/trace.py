"""Decoded captures of SABUL sessions: both channels of one session, from one pcap.

A session is a TCP control connection to the sender's port plus the UDP datagrams sent to the
data port its option block announced (``docs/spec/SABUL.md`` §2). The control stream is
reassembled from the TCP segments in each direction — loopback captures are in order, so
plain in-order reassembly is enough, and a hole (a segment the capture missed) is reported
rather than guessed over — and decoded by the suite's codec (:mod:`.wire`): the option block
and the echo (40 bytes each), then the receiver's ACK / ERR / SYN frames, each with the capture
frame that completed it. FIN and RST of each side are kept: §10 is about them.

A protocol built on SABUL with a longer block is decoded under its profile
(:class:`~udtconf.sabul.profile.SabulProfile`, the ``profile`` of :func:`sessions`): the
streams begin with its block and echo, and DATA is looked for at the data address its block
announces.

Behind the ``loss`` case's relay a capture holds two sessions (receiver ↔ relay and relay ↔
sender); ``judges`` says which side's rules a session's leg can judge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from udtharness.capture import SENTINEL
from udtharness.pcap import TCP_FIN, TCP_RST, TCP_SYN, TcpSegment, UdpDatagram

from .profile import SABUL, SabulProfile
from .wire import (
    DEFAULT_MAX_LOSS_LENGTH,
    OPTION_BLOCK_LEN,
    Block,
    Control,
    ControlReader,
    Data,
    OptionBlock,
    SabulWireError,
    decode_data,
)

Endpoint = tuple[str, int]
BOTH = frozenset({"sender", "receiver"})


@dataclass(frozen=True)
class Mark:
    """Where something shows in the capture."""

    frame: int
    time: float


@dataclass
class Stream:
    """One direction of a TCP connection, reassembled."""

    data: bytearray = field(default_factory=bytearray)
    segments: list[tuple[int, Mark]] = field(default_factory=list)  # (start offset, mark) per payload segment
    fin: Mark | None = None
    rst: Mark | None = None
    hole: str | None = None  # bytes the capture missed: the stream stops there

    def mark_of(self, offset: int) -> Mark | None:
        """The segment that carried byte ``offset``."""
        found = None
        for start, mark in self.segments:
            if start > offset:
                break
            found = mark
        return found


@dataclass(frozen=True)
class DataRecord:
    mark: Mark
    raw: bytes
    packet: Data | None
    error: SabulWireError | None

    @property
    def seq(self) -> int | None:
        return self.packet.seq if self.packet else None


@dataclass(frozen=True)
class ControlRecord:
    mark: Mark
    control: Control


@dataclass
class SabulSession:
    sender: Endpoint  # the TCP listener
    receiver: Endpoint  # the TCP connector
    to_sender: Stream
    to_receiver: Stream
    judges: frozenset[str] = BOTH
    block: OptionBlock | None = None
    block_mark: Mark | None = None
    block_error: SabulWireError | None = None
    echo: OptionBlock | None = None
    echo_mark: Mark | None = None
    echo_error: SabulWireError | None = None
    controls: list[ControlRecord] = field(default_factory=list)
    control_error: tuple[Mark | None, SabulWireError] | None = None
    after_echo: Mark | None = None  # the sender wrote more than the echo
    data: list[DataRecord] = field(default_factory=list)
    # The block and echo as the session's profile decodes them (udtconf.sabul.profile): SABUL's
    # own are ``block`` / ``echo`` themselves; a longer block begins with the words of those two.
    head_len: int = OPTION_BLOCK_LEN
    profile_block: Block | None = None
    profile_echo: Block | None = None
    data_addr: Endpoint | None = None  # where DATA is addressed: the data address the block announces
    # DATA to (control peer, data_port) where the block announced another address
    misaddressed: list[DataRecord] = field(default_factory=list)

    @property
    def max_loss_length(self) -> int:
        for b in (self.echo, self.block):
            if b is not None and not b.problems():
                return b.max_loss_length
        return DEFAULT_MAX_LOSS_LENGTH

    @property
    def pkt_size(self) -> int | None:
        return self.echo.pkt_size if self.echo else self.block.pkt_size if self.block else None

    def of_type(self, kind: type) -> list[ControlRecord]:
        return [c for c in self.controls if isinstance(c.control, kind)]

    def first_sends(self) -> list[DataRecord]:
        """The first transmission of each sequence number, in capture order."""
        seen: set[int] = set()
        out = []
        for d in self.data:
            if d.seq is not None and d.seq not in seen:
                seen.add(d.seq)
                out.append(d)
        return out

    def summary(self) -> str:
        """One line on what the capture shows, for a failed run's diagnosis."""
        parts = []
        if self.block is None:
            parts.append("no option block")
        elif self.echo is None:
            parts.append("option block without an echo")
        sent = {d.seq for d in self.data if d.seq is not None}
        parts.append(f"{len(self.data)} DATA datagrams ({len(sent)} sequence numbers)")
        acks = [c.control.ack_no for c in self.controls if c.control.ctype == 1]  # type: ignore[union-attr]
        parts.append(f"last ACK {acks[-1]}" if acks else "no ACK")
        errs = sum(1 for c in self.controls if c.control.ctype == 2)
        if errs:
            parts.append(f"{errs} ERR")
        for who, stream in (("receiver", self.to_sender), ("sender", self.to_receiver)):
            if stream.rst:
                parts.append(f"the {who} reset the control connection (frame {stream.rst.frame})")
            elif stream.fin:
                parts.append(f"the {who} closed (FIN, frame {stream.fin.frame})")
        if self.control_error:
            parts.append(f"control stream error: {self.control_error[1]}")
        return "; ".join(parts)


def _reassemble(segments: list[tuple[int, TcpSegment]]) -> Stream:
    s = Stream()
    base: int | None = None
    for frame, seg in segments:
        mark = Mark(frame, seg.time)
        if seg.flags & TCP_SYN:
            base = (seg.seq + 1) & 0xFFFFFFFF
            continue
        if seg.flags & TCP_RST and s.rst is None:
            s.rst = mark
        if base is None:
            base = seg.seq  # the capture began after the SYN
        if seg.payload and s.hole is None:
            rel = (seg.seq - base) & 0xFFFFFFFF
            have = len(s.data)
            if rel > have:
                s.hole = f"{rel - have} bytes of the stream missing from the capture before frame {frame}"
            elif rel + len(seg.payload) > have:
                s.segments.append((have, mark))
                s.data += seg.payload[have - rel :]
        if seg.flags & TCP_FIN and s.fin is None:
            s.fin = mark
    return s


def sessions(
    frames: Iterable[tuple[int, UdpDatagram | TcpSegment]],
    sender_port: int,
    judges: frozenset[str] = BOTH,
    profile: SabulProfile = SABUL,
) -> list[SabulSession]:
    """Every session whose control connection goes to TCP port ``sender_port``; the streams
    begin with ``profile``'s block and echo, and DATA goes to the data address the block
    announces (SABUL's: the control peer's IP, §2 step 6)."""
    frames = list(frames)
    conns: dict[tuple[Endpoint, Endpoint], dict[str, list[tuple[int, TcpSegment]]]] = {}
    for n, pkt in frames:
        if not isinstance(pkt, TcpSegment):
            continue
        if pkt.dst[1] == sender_port:
            key, way = (pkt.dst, pkt.src), "to_sender"
        elif pkt.src[1] == sender_port:
            key, way = (pkt.src, pkt.dst), "to_receiver"
        else:
            continue
        conns.setdefault(key, {"to_sender": [], "to_receiver": []})[way].append((n, pkt))
    out = []
    for (sender, receiver), ways in conns.items():
        s = SabulSession(sender, receiver, _reassemble(ways["to_sender"]), _reassemble(ways["to_receiver"]), judges)
        s.head_len = profile.head_len
        _decode_streams(s, profile)
        if s.block is not None and s.profile_block is not None:
            s.data_addr = s.profile_block.data_address(receiver[0])
            wrong = (receiver[0], s.block.data_port)  # SABUL's own address: never "wrong" under SABUL
            for n, pkt in frames:
                if not isinstance(pkt, UdpDatagram) or pkt.payload == SENTINEL:
                    continue
                if pkt.dst == s.data_addr:
                    s.data.append(_data_record(n, pkt, s.pkt_size))
                elif pkt.dst == wrong:
                    s.misaddressed.append(_data_record(n, pkt, s.pkt_size))
        out.append(s)
    return out


def _data_record(frame: int, dg: UdpDatagram, pkt_size: int | None) -> DataRecord:
    try:
        return DataRecord(Mark(frame, dg.time), dg.payload, decode_data(dg.payload, pkt_size), None)
    except SabulWireError as e:
        return DataRecord(Mark(frame, dg.time), dg.payload, None, e)


def _decode_head(raw: bytes, profile: SabulProfile) -> tuple[OptionBlock, Block]:
    """A block or echo, unvalidated: its SABUL words and the whole block as ``profile`` decodes it."""
    whole = profile.decode_block(raw)
    return whole.sabul, whole


def _decode_streams(s: SabulSession, profile: SabulProfile) -> None:
    up, down, head = s.to_sender, s.to_receiver, s.head_len
    if len(up.data) >= head:
        s.block_mark = up.mark_of(head - 1)
        s.block, s.profile_block = _decode_head(bytes(up.data[:head]), profile)
        if s.block.problems():
            s.block_error = SabulWireError("invalid option block: " + "; ".join(s.block.problems()), "3.4")
    if len(down.data) >= head:
        s.echo_mark = down.mark_of(head - 1)
        s.echo, s.profile_echo = _decode_head(bytes(down.data[:head]), profile)
        if s.echo.problems():
            s.echo_error = SabulWireError("invalid echo: " + "; ".join(s.echo.problems()), "3.4")
        if len(down.data) > head:
            s.after_echo = down.mark_of(head)
    reader = ControlReader(s.max_loss_length)
    for i, (start, mark) in enumerate(up.segments):
        end = up.segments[i + 1][0] if i + 1 < len(up.segments) else len(up.data)
        lo = max(start, head)
        if end <= lo:
            continue
        try:
            s.controls += [ControlRecord(mark, c) for c in reader.feed(bytes(up.data[lo:end]))]
        except SabulWireError as e:
            s.control_error = (mark, e)
            return
    if reader.pending and (up.fin or up.rst):
        s.control_error = (
            up.fin or up.rst,
            SabulWireError(f"control stream ends inside a frame ({reader.pending} bytes)", "3.2"),
        )
