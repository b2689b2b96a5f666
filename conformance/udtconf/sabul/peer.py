"""A small, independent SABUL sender and receiver written from ``docs/spec/SABUL.md``: sans-IO
state machines (no socket, no clock, no thread; every input takes ``now`` in seconds), driven
over real sockets by :mod:`.driver` and by a virtual clock in the tests.

**Sender** (§5, §7, §8), call order::

    echo = s.handle_block(block_bytes, now)      # once: validate, answer with the echo (§3.4)
    loop:
        s.handle_control(frame, now)             # every frame the ControlReader produced
        s.handle_timeout(now)                    # EXP (§5.3, §5.5)
        datagram = s.poll_transmit(now)          # at most one DATA packet when it is due
        s.finished                               # all input sent and acknowledged: teardown (§10)
        s.next_deadline(now)                     # when to call again at the latest

**Receiver** (§6), call order::

    block = r.option_block(now)                  # send it; starts R0 (§2)
    r.handle_echo(echo_bytes, now)               # validate, RTT, start the timers
    loop:
        r.handle_data(datagram, now)             # every datagram from the sender's IP (§2 step 7)
        r.handle_timeout(now)                    # ACK / ERR / SYN timers
        r.poll_control()                         # frames to write on TCP, in order
        r.take_output()                          # bytes now contiguous, in order
        r.next_deadline()
    r.handle_eof()                               # FIN: end of stream, or the gap it leaves (§10.1)

Sequence numbers are unwrapped internally (plain growing integers) and masked to 31 bits on
the wire; incoming numbers are unwrapped against the ACK point, so the 2^31 wrap is handled.
Either side raises :class:`ProtocolError` for what §3.2, §3.4, §5.5 and §10 call an abort.

**Extension interface.** A protocol built on SABUL (same channels, frames and roles, another
block or other timers) subclasses :class:`SabulSender` / :class:`SabulReceiver` and overrides
only these, never the underscore state:

* sender — class attributes :attr:`~SabulSender.block_len`, :attr:`~SabulSender.stack`,
  :attr:`~SabulSender.burst_slack`, :attr:`~SabulSender.restart_after_idle`; hooks
  :meth:`~SabulSender.accept_block` (decode, check and echo the block), :meth:`~SabulSender.flow_window`
  (§8), :meth:`~SabulSender.start_rate_control` (§7, any :class:`~.rate.RateController`) and
  :meth:`~SabulSender.data_dest` (§2 step 6);
* receiver — class attributes :attr:`~SabulReceiver.block_len`, :attr:`~SabulReceiver.stack`,
  :attr:`~SabulReceiver.echo_rule`, the timers :attr:`~SabulReceiver.ack_interval`,
  :attr:`~SabulReceiver.err_interval`, :attr:`~SabulReceiver.syn_interval` (None: no SYN) and
  :attr:`~SabulReceiver.rtt_from_setup` (§2 step 5); hooks :meth:`~SabulReceiver.own_block`,
  :meth:`~SabulReceiver.decode_echo`, :meth:`~SabulReceiver.window_full`,
  :meth:`~SabulReceiver.periodic_errs` and :meth:`~SabulReceiver.data_source_ok`; for the hooks'
  use :meth:`~SabulReceiver.send_ack` and :meth:`~SabulReceiver.loss_list`.

The blocks are :class:`~.wire.Block` objects: SABUL's :class:`~.wire.OptionBlock` or a longer one
that begins with SABUL's ten words (``block.sabul``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import ClassVar

from ..seq import MAX, seqlen, seqoff
from . import rate
from .wire import (
    DEFAULT_FLAG_SIZE,
    DEFAULT_PKT_SIZE,
    OPTION_BLOCK_LEN,
    Ack,
    Block,
    Control,
    Data,
    Err,
    OptionBlock,
    SabulWireError,
    Syn,
    decode_data,
    decode_option_block,
)

SYN = 0.010  # §7, §9: SYN timer and rate-control period (s)
ACK_INTERVAL = 0.010  # §6 TC
ERR_INTERVAL = 0.020  # §6
EXP_INTERVAL = 1.0  # §5.3
EXP_GIVE_UP = 10  # §5.5 TC: consecutive EXP events
MIN_RTT = 0.020  # §2 step 5
BURST_SLACK = 0.002  # how far the pacer may fall behind and catch up (s): bounded bursts


class ProtocolError(Exception):
    """The session must be aborted (§10.2); the message says why, citing SABUL.md."""


def split_by_words(numbers: list[int], limit: int) -> list[list[int]]:
    """Increasing numbers cut, in order, into groups whose compressed loss lists (§3.3) take at
    most ``limit`` words each."""
    out: list[list[int]] = []
    chosen: list[int] = []
    words = 0
    for s in numbers:
        extends = bool(chosen) and s == chosen[-1] + 1
        # a lone number is 1 word; extending a lone number into a range costs 1 more, a range 0
        cost = 0 if extends and len(chosen) >= 2 and chosen[-2] == chosen[-1] - 1 else 1
        if words + cost > limit:
            out.append(chosen)
            chosen, words, cost = [], 0, 1
        words += cost
        chosen.append(s)
    if chosen:
        out.append(chosen)
    return out


def _unwrap(base: int, wire_seq: int) -> int:
    """The unwrapped number nearest to ``base`` whose low 31 bits are ``wire_seq`` (§4)."""
    return base + seqoff(base & MAX, wire_seq)


# ---------------------------------------------------------------------------------------------
# Sender


@dataclass
class SenderConfig:
    pkt_size: int = DEFAULT_PKT_SIZE  # the sender's own packet size; the echo takes the min (§3.4)
    interval_us: float = rate.DEFAULT_INTERVAL  # initial inter-packet interval (§7.1)
    slow_start: bool = True  # §8; False reproduces the 2003 code
    i_min: float = rate.I_MIN  # §7.1: the interval limits an increase clamps to, µs
    i_max: float = rate.I_MAX
    max_window: int | None = None  # application limit on the flow window (§8)
    # Test hook: drop(seq, transmission) → True loses that transmission of a packet before it
    # reaches the socket (transmission 0 = the first). None in real use.
    drop: Callable[[int, int], bool] | None = None


@dataclass
class Counters:
    """What an endpoint counts for the adapter contract's stats line (the other side's counters
    stay 0: a sender sends no ACK, a receiver no DATA)."""

    losses: int = 0  # sequence numbers entered into the loss list
    retrans: int = 0
    pkts_sent: int = 0
    pkts_recv: int = 0
    acks_sent: int = 0
    acks_recv: int = 0
    naks_sent: int = 0
    naks_recv: int = 0

    def line(self) -> dict[str, int]:
        """The counters as the stats line names them, in its order."""
        return {f.name: getattr(self, f.name) for f in fields(Counters)}


@dataclass
class SenderStats(Counters):
    syns_recv: int = 0
    exp_events: int = 0
    dropped_by_hook: int = 0


class SabulSender:
    block_len = OPTION_BLOCK_LEN  # what the receiver sends first and the sender echoes (§3.4)
    stack = "sabul-py"  # the stats line's name
    burst_slack = BURST_SLACK  # how far the pacer may fall behind and catch up (s)
    # False: the schedule runs on through idle spells (a late packet may catch up, within
    # burst_slack); True: the first packet after idle restarts it, the next waits a full gap
    restart_after_idle = False

    def __init__(self, read: Callable[[int], bytes], config: SenderConfig | None = None) -> None:
        self.config = config or SenderConfig()
        self._read = read  # read(n): up to n bytes of input, b"" at its end
        self.block: OptionBlock | None = None  # the echo's SABUL words, once the block is accepted
        c = self.config
        self.rc: rate.RateController = rate.RateControl(
            interval=c.interval_us, slow_start=c.slow_start, i_min=c.i_min, i_max=c.i_max
        )
        self.next_seq = 0  # NextSeq, unwrapped
        self.last_ack = 0  # LastAck, unwrapped
        self._unacked: dict[int, bytes] = {}
        self._transmissions: dict[int, int] = {}
        self._loss: list[int] = []  # heap of the loss list
        self._in_loss: set[int] = set()
        self._input_done = False
        self._next_send = 0.0
        self._exp_deadline: float | None = None
        self._exp_count = 0
        self._idle = False
        self.stats = SenderStats()
        self.bytes_acked = 0

    # --- set-up (§2, §3.4) -------------------------------------------------------------------

    def handle_block(self, raw: bytes, now: float) -> bytes:
        """Validates the receiver's option block and returns the echo to send (§3.4)."""
        try:
            echo = self.accept_block(raw)
        except SabulWireError as e:
            raise ProtocolError(f"option block rejected: {e}") from e
        self.block = echo.sabul
        window = self.flow_window()
        if self.config.max_window:
            window = min(window, self.config.max_window)
        self.rc = self.start_rate_control(window)
        self._next_send = now
        self._idle = True  # nothing sent yet (restart_after_idle: the schedule starts at the first packet)
        self._exp_deadline = now + EXP_INTERVAL
        return echo.encode()

    # --- hooks of the set-up (see the module's extension interface) ----------------------------

    def accept_block(self, raw: bytes) -> Block:
        """Hook: the receiver's :attr:`block_len` bytes decoded and validated (SabulWireError if
        invalid), checked against what this sender honours (ProtocolError to refuse), and the echo
        to send back: §3.4, words 2–4 lowered to this sender's packet size."""
        return decode_option_block(raw).echo(self.config.pkt_size)

    def flow_window(self) -> int:
        """Hook: the flow window's maximum once the echo is known (§8: ``recv_flag_size``),
        before the application's limit (``SenderConfig.max_window``)."""
        assert self.block is not None, "handle_block first"
        return self.block.recv_flag_size

    def start_rate_control(self, window: int) -> rate.RateController:
        """Hook: the rate control the session runs under (§7), given the flow window's maximum
        (§8): SABUL's, with ``window`` as its maximum, and as its window from the start unless
        it begins in slow start."""
        self.rc.max_window = window
        if not self.rc.slow_start:
            self.rc.window = window
        return self.rc

    @property
    def payload_size(self) -> int:
        assert self.block is not None, "handle_block first"
        return self.block.payload_size

    def data_dest(self, control_peer_ip: str) -> tuple[str, int]:
        """Hook: where DATA goes: the receiver's IP on the control connection, the block's port
        (§2 step 6)."""
        assert self.block is not None, "handle_block first"
        return self.block.data_address(control_peer_ip)

    # --- feedback (§5.1–5.5) -----------------------------------------------------------------

    def handle_control(self, frame: Control, now: float) -> None:
        if isinstance(frame, Ack):
            self._on_ack(frame, now)
        elif isinstance(frame, Err):
            self._on_err(frame, now)
        else:
            self.stats.syns_recv += 1
            self.rc.on_syn()

    def _on_ack(self, ack: Ack, now: float) -> None:
        self.stats.acks_recv += 1
        a = _unwrap(self.last_ack, ack.ack_no)
        if a > self.next_seq:
            raise ProtocolError(
                f"ACK {ack.ack_no} is beyond the data sent (next sequence number {self.next_seq & MAX}) (SABUL.md §5.5)"
            )
        self._feedback(now)
        if a <= self.last_ack:
            return  # not new (a correct receiver's ACKs only grow)
        for s in range(self.last_ack, a):
            payload = self._unacked.pop(s, b"")
            self.bytes_acked += len(payload)
            self._transmissions.pop(s, None)
        newly = a - self.last_ack
        self.last_ack = a
        while self._loss and self._loss[0] < a:
            self._in_loss.discard(heapq.heappop(self._loss))
        self.rc.on_ack(newly)

    def _on_err(self, err: Err, now: float) -> None:
        self.stats.naks_recv += 1
        ranges = []
        for first, last in err.ranges():
            lo = _unwrap(self.last_ack, first)
            hi = lo + seqlen(first, last) - 1
            if hi >= self.next_seq:
                raise ProtocolError(
                    f"ERR reports {last} as lost, beyond the data sent (largest {(self.next_seq - 1) & MAX}; "
                    f"{'nothing sent' if self.next_seq == 0 else 'SABUL.md §5.5'})"
                )
            ranges.append((lo, hi))
        self._feedback(now)
        lost = sum(hi - lo + 1 for lo, hi in ranges)
        self.stats.losses += lost
        self.rc.on_err(ranges[0][0], lost, self.next_seq - 1)
        for lo, hi in ranges:
            self._queue_loss(max(lo, self.last_ack), hi)

    def _feedback(self, now: float) -> None:
        """ACK and ERR reset the EXP timer (§5 step 3)."""
        self._exp_deadline = now + EXP_INTERVAL
        self._exp_count = 0

    def _queue_loss(self, lo: int, hi: int) -> None:
        for s in range(lo, hi + 1):
            if s not in self._in_loss:
                self._in_loss.add(s)
                heapq.heappush(self._loss, s)

    # --- EXP (§5.3, §5.5) ---------------------------------------------------------------------

    def handle_timeout(self, now: float) -> None:
        if self._exp_deadline is None or now < self._exp_deadline:
            return
        self._exp_deadline = now + EXP_INTERVAL
        if self.next_seq == self.last_ack:
            return  # nothing outstanding: no EXP event
        self.stats.exp_events += 1
        self._exp_count += 1
        if self._exp_count >= EXP_GIVE_UP:
            raise ProtocolError(
                f"receiver silent: {EXP_GIVE_UP} EXP events ({EXP_GIVE_UP * EXP_INTERVAL:.0f} s) without ACK or ERR "
                f"at ACK {self.last_ack & MAX} of {self.next_seq & MAX} (SABUL.md §5.5)"
            )
        self._queue_loss(self.last_ack, self.next_seq - 1)

    # --- sending (§5 steps 4–6) ---------------------------------------------------------------

    def poll_transmit(self, now: float) -> bytes | None:
        """The next DATA datagram if one is due now (pacing, loss list first, window), else None."""
        while self.block is not None and now >= self._next_send:
            seq, payload = self._next_packet()
            if payload is None:
                self._idle = True
                return None
            n = self._transmissions.get(seq, 0)
            self._transmissions[seq] = n + 1
            self.rc.on_sent()
            self.stats.pkts_sent += 1
            self.stats.retrans += n > 0
            gap = self.rc.interval / 1e6
            base = now if self._idle and self.restart_after_idle else self._next_send
            self._idle = False
            if self.rc.take_freeze():
                self._next_send = now + SYN + gap
            else:
                self._next_send = max(base + gap, now - self.burst_slack)
            if self.config.drop is not None and self.config.drop(seq & MAX, n):
                self.stats.dropped_by_hook += 1  # lost on the way: it counts as sent (§7.2)
                continue
            return Data(seq & MAX, payload).encode()
        return None

    def _next_packet(self) -> tuple[int, bytes | None]:
        while self._loss:
            s = heapq.heappop(self._loss)
            self._in_loss.discard(s)
            if s >= self.last_ack and s in self._unacked:
                return s, self._unacked[s]
        if self.next_seq - self.last_ack >= self.rc.window or self._input_done:
            return 0, None
        payload = self._read(self.payload_size)
        if not payload:
            self._input_done = True
            return 0, None
        s = self.next_seq
        self.next_seq += 1
        self._unacked[s] = payload
        return s, payload

    def input_exhausted(self) -> bool:
        """Whether the input has ended (reading ahead once if the window allowed no read yet)."""
        return self._input_done

    @property
    def finished(self) -> bool:
        """All input sent and acknowledged (§10.1: the sender may half-close now)."""
        return self._input_done and self.last_ack == self.next_seq

    def next_deadline(self, now: float) -> float:
        """When something may be due at the latest: the next send slot if a packet could go,
        else the EXP deadline."""
        exp = self._exp_deadline if self._exp_deadline is not None else now + EXP_INTERVAL
        can_send = self._loss or (not self._input_done and self.next_seq - self.last_ack < self.rc.window)
        return min(self._next_send, exp) if can_send else exp

    @property
    def outstanding(self) -> int:
        return self.next_seq - self.last_ack


# ---------------------------------------------------------------------------------------------
# Receiver


@dataclass
class ReceiverConfig:
    pkt_size: int = DEFAULT_PKT_SIZE
    flag_size: int = DEFAULT_FLAG_SIZE  # recv_flag_size: reorder window = the sender's max window


@dataclass
class ReceiverStats(Counters):
    malformed: int = 0
    duplicates: int = 0
    out_of_window: int = 0
    syns_sent: int = 0


@dataclass
class _Loss:
    last_report: float
    k: int = 2


@dataclass
class SabulReceiver:
    block_len: ClassVar[int] = OPTION_BLOCK_LEN  # the block it sends, and the echo (§3.4)
    stack: ClassVar[str] = "sabul-py"  # the stats line's name
    echo_rule: ClassVar[str] = "SABUL.md §3.4"  # cited when the echo is rejected
    # The timers (§6): ACK and ERR periods, the SYN period (§3.2, §7; None: the receiver sends no
    # SYN), and whether the RTT comes from the set-up (§2 step 5; False: it stays MIN_RTT).
    ack_interval: ClassVar[float] = ACK_INTERVAL
    err_interval: ClassVar[float] = ERR_INTERVAL
    syn_interval: ClassVar[float | None] = SYN
    rtt_from_setup: ClassVar[bool] = True

    data_port: int
    ctrl_port: int
    config: ReceiverConfig = field(default_factory=ReceiverConfig)

    def __post_init__(self) -> None:
        self.block = OptionBlock.for_packet_size(
            self.config.pkt_size, self.data_port, self.ctrl_port, recv_flag_size=self.config.flag_size
        )
        self.echo: OptionBlock | None = None
        self.rtt = MIN_RTT
        self._block_sent: float | None = None
        self.last_ack = 0  # LastAck: the last ACK number sent (unwrapped)
        self.lrsn = -1  # largest received sequence number (unwrapped)
        self._loss: dict[int, _Loss] = {}
        self._store: dict[int, bytes] = {}  # received, not yet delivered
        self._deliver = 0  # next sequence number to deliver
        self._out = bytearray()
        self._ctrl: list[bytes] = []
        self._syn_count = 0
        self._next_ack = self._next_err = self._next_syn = float("inf")
        self.closed = False
        self.stats = ReceiverStats()
        self.bytes_delivered = 0

    # --- set-up -------------------------------------------------------------------------------

    def option_block(self, now: float) -> bytes:
        self._block_sent = now
        return self.own_block().encode()

    def handle_echo(self, raw: bytes, now: float) -> None:
        try:
            echo = self.decode_echo(raw)
        except SabulWireError as e:
            raise ProtocolError(f"echo rejected: {e}") from e
        bad = self.own_block().echo_problems(echo)
        if bad:
            raise ProtocolError("echo rejected: " + "; ".join(bad) + f" ({self.echo_rule})")
        self._start(echo.sabul, now)

    # --- hooks of the set-up (see the module's extension interface) ----------------------------

    def own_block(self) -> Block:
        """Hook: the block the receiver sends first and judges the echo against (§2 step 3, §3.4)."""
        return self.block

    def decode_echo(self, raw: bytes) -> Block:
        """Hook: the sender's :attr:`block_len` bytes, unvalidated (``own_block().echo_problems``
        judges them, §3.4)."""
        return decode_option_block(raw, validate=False)

    def _start(self, echo: OptionBlock, now: float) -> None:
        """The echo was accepted: R0 and the timers (§2 step 5, §6)."""
        self.echo = echo
        if self.rtt_from_setup:
            r0 = now - (self._block_sent if self._block_sent is not None else now)
            self.rtt = 1.5 * r0 if r0 > MIN_RTT else MIN_RTT
        self._next_ack = now + self.ack_interval
        self._next_err = now + self.err_interval
        self._next_syn = now + self.syn_interval if self.syn_interval is not None else float("inf")

    # --- data (§6) ----------------------------------------------------------------------------

    def handle_data(self, raw: bytes, now: float) -> None:
        if self.closed:
            return
        try:
            pkt = decode_data(raw, self.echo.pkt_size if self.echo else self.block.pkt_size)
        except SabulWireError:
            self.stats.malformed += 1
            return
        self._syn_count += 1  # step 0: on arrival (§3.2 TC)
        self.stats.pkts_recv += 1
        off = seqoff(self.last_ack & MAX, pkt.seq)
        if off >= self.config.flag_size:
            self.stats.out_of_window += 1
            self.window_full()
            return
        if off < 0:
            self.stats.duplicates += 1
            return
        s = self.last_ack + off
        if s > self.lrsn + 1:
            for g in range(self.lrsn + 1, s):
                self._loss[g] = _Loss(now)
            self.stats.losses += s - self.lrsn - 1
            self._ctrl.append(Err.from_losses([g & MAX for g in range(self.lrsn + 1, s)]).encode())
            self.stats.naks_sent += 1
        if s > self.lrsn:
            self.lrsn = s
        elif self._loss.pop(s, None) is None:
            self.stats.duplicates += 1
            return
        if s >= self._deliver and s not in self._store:
            self._store[s] = pkt.payload
            while self._deliver in self._store:
                payload = self._store.pop(self._deliver)
                self._out += payload
                self.bytes_delivered += len(payload)
                self._deliver += 1

    def _ack_number(self) -> int:
        return min(self._loss) if self._loss else self.lrsn + 1

    def window_full(self) -> None:
        """Hook: a packet beyond the reorder window arrived (and is dropped): an ACK now, if the
        ACK point advanced (§6)."""
        self.send_ack()

    def data_source_ok(self, src_ip: str, control_peer_ip: str) -> bool:
        """Hook: whether a datagram from ``src_ip`` is taken: only the sender's IP (§2 step 7)."""
        return src_ip == control_peer_ip

    def send_ack(self, force: bool = False) -> None:
        """Queues an ACK of the ACK point (§3.2: the smallest number in the loss list, else the
        largest received + 1) if it advanced since the last ACK, or in any case with ``force``
        (then it may repeat the last number)."""
        a = self._ack_number()
        if a > self.last_ack or force:
            self.last_ack = max(self.last_ack, a)
            self._ctrl.append(Ack(self.last_ack & MAX).encode())
            self.stats.acks_sent += 1

    def loss_list(self) -> list[int]:
        """The sequence numbers found missing and not yet received, increasing (unwrapped: mask
        with :data:`~udtconf.seq.MAX` for the wire)."""
        return sorted(self._loss)

    # --- timers (§6) --------------------------------------------------------------------------

    def handle_timeout(self, now: float) -> None:
        if self.closed:
            return
        if now >= self._next_ack:
            self.send_ack()
            self._next_ack = now + self.ack_interval
        if now >= self._next_err:
            for err in self.periodic_errs(now):
                self._ctrl.append(err.encode())
                self.stats.naks_sent += 1
            self._next_err = now + self.err_interval
        if now >= self._next_syn and self.syn_interval is not None:
            self._ctrl.append(Syn(self._syn_count).encode())
            self.stats.syns_sent += 1
            self._syn_count = 0
            self._next_syn = now + self.syn_interval

    def periodic_errs(self, now: float) -> list[Err]:
        """Hook: what the ERR timer sends (§6): the entries not reported for k·RTT, k = 2, 3, …,
        in one ERR of at most max_loss_length words (none if none is due)."""
        assert self.echo is not None
        due = sorted(s for s, e in self._loss.items() if now - e.last_report >= e.k * self.rtt)
        if not due:
            return []
        chosen = split_by_words(due, self.echo.max_loss_length)[0]
        for s in chosen:
            e = self._loss[s]
            e.last_report, e.k = now, e.k + 1
        return [Err.from_losses([s & MAX for s in chosen])]

    def next_deadline(self) -> float:
        return min(self._next_ack, self._next_err, self._next_syn)

    # --- output and the end (§10) -------------------------------------------------------------

    def poll_control(self) -> list[bytes]:
        out, self._ctrl = self._ctrl, []
        return out

    def take_output(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def handle_eof(self) -> None:
        """The sender's FIN: the stream ends at the delivery point; a hole before what arrived is
        an error (§10.1)."""
        self.closed = True
        if self._loss or self._store:
            missing = len(self._loss)
            raise ProtocolError(
                f"the sender closed with {missing} packet(s) missing from sequence number "
                f"{self._deliver & MAX} on ({len(self._store)} received after the hole are discarded) (SABUL.md §10.1)"
            )

    @property
    def ack_point(self) -> int:
        return self._deliver
