"""The suite's Python UDT4 peer: a small endpoint that speaks the wire format of UDT4.md exactly
(through :mod:`udtconf.udt.wire`) and is deliberately simple — no congestion control, a fixed
window, ACKs every 10 ms.

* :class:`Wire` — a UDP socket that sends and receives UDT packets, logging what it saw and
  writing every datagram to a pcap when given a recorder; given a ``deadline`` it waits for
  nothing past it (:class:`DeadlinePassed`), so no loop of the tester's on it can outlive a probe;
* :func:`connect` and :class:`ClientSession` — the peer as a client: the cookie round, then a
  STREAM transfer with retransmission on NAK;
* :class:`ListenerSession` — the peer as a listener and receiver: it accepts one connection,
  receives, and ACKs every 10 ms unless told to hold.

The active tester (:mod:`udtconf.udt.tester`) drives it to misbehave on purpose; the zoo of
defective stacks, the third-party test stacks and the listener-memory bench
(``impl/bench/listener_memory.py``) use it as a plain peer.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from udtharness.pcap import PcapWriter

from ..seq import MAX, incseq, seqcmp, seqoff
from .wire import (
    Ack,
    Ack2,
    AckKind,
    Boundary,
    DataPacket,
    Handshake,
    KeepAlive,
    Nak,
    Packet,
    Shutdown,
    WireError,
    decode,
    peer_ip_field,
)

Addr = tuple[str, int]
PAYLOAD = 1456


class DeadlinePassed(Exception):
    """A wait asked for past its deadline (a receive on a :class:`Wire`): raised instead of
    waiting, so that whatever loop waited ends there, however the peer behaves. Not a
    TimeoutError: code that takes a timeout as the peer's answer must not swallow it."""


class Wire:
    """A UDP socket that sends and receives UDT packets, keeping a log of what it saw and, with
    a ``recorder``, writing every datagram it sends and receives to a pcap. ``deadline``
    (``time.monotonic()``): no receive waits past it, and one asked for after it raises
    :class:`DeadlinePassed`."""

    def __init__(
        self, bind: Addr = ("127.0.0.1", 0), recorder: PcapWriter | None = None, deadline: float | None = None
    ) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(bind)
        self.addr: Addr = self.sock.getsockname()
        self.log: list[tuple[float, Addr, Packet | WireError]] = []
        self.recorder = recorder
        self.deadline = deadline

    def send(self, pkt: Packet | bytes, to: Addr) -> None:
        raw = bytes(pkt) if isinstance(pkt, (bytes, bytearray)) else pkt.encode()
        self.sock.sendto(raw, to)
        if self.recorder:
            self.recorder.write(time.time(), self.addr, to, raw)

    def recv(self, timeout: float) -> tuple[Packet, Addr] | None:
        """Next decodable packet within ``timeout`` (undecodable ones are logged and skipped)."""
        deadline = time.monotonic() + timeout
        if self.deadline is not None:
            if time.monotonic() >= self.deadline:
                raise DeadlinePassed(f"a receive on {self.addr[0]}:{self.addr[1]} past the wire's deadline")
            deadline = min(deadline, self.deadline)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                raw, src = self.sock.recvfrom(65535)
            except (TimeoutError, BlockingIOError):
                return None
            except ConnectionRefusedError:
                continue
            if self.recorder:
                self.recorder.write(time.time(), src, self.addr, raw)
            try:
                pkt = decode(raw)
            except WireError as e:
                self.log.append((time.monotonic(), src, e))
                continue
            self.log.append((time.monotonic(), src, pkt))
            return pkt, src

    def close(self) -> None:
        self.sock.close()


def new_socket_id() -> int:
    """A fresh socket ID for a tester socket (1 … 2^30)."""
    return random.randint(1, 1 << 30)


# ---------------------------------------------------------------------------------------------
# Tester as client (the stack is the listener / receiver)


@dataclass
class ClientSession:
    wire: Wire
    server: Addr
    my_id: int
    peer_id: int
    isn: int
    mss: int
    request: Handshake
    response: Handshake
    next_seq: int = 0
    last_ack: int = 0
    keepalives: list[float] = field(default_factory=list)
    # numbers a TTL sender has given up on (§5.8): neither sent nor re-sent until ``withhold_until``
    withheld: set[int] = field(default_factory=set)
    withhold_until: float = 0.0
    framing: dict[int, tuple[int, Boundary]] = field(default_factory=dict)  # DGRAM: seq → message, FF bits

    def __post_init__(self) -> None:
        self.next_seq = self.isn
        self.last_ack = self.isn

    def held(self, seq: int) -> bool:
        return seq in self.withheld and time.monotonic() < self.withhold_until

    def data(self, seq: int, payload: bytes, msg: int = 1) -> DataPacket:
        msg, boundary = self.framing.get(seq, (msg, Boundary.SOLO))
        return DataPacket(seq=seq, msg_no=msg, boundary=boundary, timestamp=0, dst_id=self.peer_id, payload=payload)

    def pump(self, timeout: float, sent: dict[int, bytes] | None = None) -> None:
        """Handle incoming control packets for ``timeout`` seconds (ACK2s, retransmissions)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            got = self.wire.recv(left)
            if got is None:
                return
            self.handle(got[0], sent or {})

    def handle(self, p: Packet, sent: dict[int, bytes]) -> None:
        if isinstance(p, Ack):
            if p.kind is not AckKind.LIGHT:
                self.wire.send(Ack2(dst_id=self.peer_id, addl=p.ack_seq_no), self.server)
            # an ACK beyond what was sent (after a drop request naming unsent numbers) is ignored
            if seqcmp(p.ack_no, self.last_ack) > 0 and seqcmp(p.ack_no, self.next_seq) <= 0:
                self.last_ack = p.ack_no
        elif isinstance(p, Nak):
            try:
                lost = p.losses()
            except WireError:
                return
            for s in lost:
                if s in sent and not self.held(s):
                    self.wire.send(self.data(s, sent[s]), self.server)
        elif isinstance(p, KeepAlive):
            self.keepalives.append(time.monotonic())

    def send_stream(
        self,
        payload: bytes,
        window: int = 32,
        timeout: float = 20.0,
        before_send: Callable[[int, bytes], None] | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> bool:
        """Send ``payload`` reliably; True once everything is acknowledged (False at ``timeout``,
        or as soon as ``alive`` says the stack's process is gone)."""
        chunks = [payload[i : i + PAYLOAD] for i in range(0, len(payload), PAYLOAD)]
        sent: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        i = 0
        last_progress = time.monotonic()
        while time.monotonic() < deadline:
            while i < len(chunks) and seqoff(self.last_ack, self.next_seq) < window:
                s = self.next_seq
                if before_send:
                    before_send(s, chunks[i])
                sent[s] = chunks[i]
                if not self.held(s):
                    self.wire.send(self.data(s, chunks[i]), self.server)
                self.next_seq = incseq(s)
                i += 1
            before = self.last_ack
            self.pump(0.01, sent)
            if self.last_ack != before:
                last_progress = time.monotonic()
            if i == len(chunks) and self.last_ack == self.next_seq:
                return True
            if alive is not None and not alive():
                return False
            if time.monotonic() - last_progress > 0.5:  # our own EXP: resend the unacknowledged
                s = self.last_ack
                while s != self.next_seq:
                    if not self.held(s):
                        self.wire.send(self.data(s, sent[s]), self.server)
                    s = incseq(s)
                last_progress = time.monotonic()
        return False

    def shutdown(self) -> None:
        self.wire.send(Shutdown(dst_id=self.peer_id), self.server)


def connect(
    wire: Wire,
    server: Addr,
    timeout: float = 3.0,
    sock_type: int = 1,
    mss: int = 1500,
    ffs: int = 8192,
    alive: Callable[[], bool] | None = None,
) -> ClientSession:
    """Complete the cookie round with ``server``; ConnectionError on a rejection (1002),
    TimeoutError without an answer (at once when ``alive`` says the stack's process is gone)."""
    my_id, isn = new_socket_id(), random.randint(0, MAX)
    req = Handshake(
        isn=isn,
        socket_id=my_id,
        req_type=1,
        sock_type=sock_type,
        mss=mss,
        flight_flag_size=ffs,
        peer_ip=peer_ip_field(server[0]),
    )
    deadline = time.monotonic() + timeout
    resend = 0.0
    while time.monotonic() < deadline and (alive is None or alive()):
        if time.monotonic() >= resend:
            wire.send(req, server)
            resend = time.monotonic() + 0.25
        got = wire.recv(min(0.25, max(0.01, deadline - time.monotonic())))
        if got is None or not isinstance(got[0], Handshake) or got[1] != server:
            continue
        h = got[0]
        if h.req_type == 1:
            req = replace(req, req_type=-1, cookie=h.cookie)
            resend = 0.0
        elif h.req_type == -1 and h.dst_id == my_id:
            return ClientSession(wire, server, my_id, h.socket_id, isn, min(h.mss, 1500), req, h)
        elif h.req_type == 1002:
            raise ConnectionError("connection rejected (1002)")
    raise TimeoutError(f"no handshake response from {server} within {timeout} s")


# ---------------------------------------------------------------------------------------------
# Tester as listener / receiver (the stack is the client / sender)


class ListenerSession:
    """Accepts one connection, receives data, ACKs every 10 ms unless told to hold."""

    def __init__(self, wire: Wire, resp_mss: int | None = None, resp_ffs: int = 8192) -> None:
        self.wire = wire
        self.resp_mss = resp_mss  # the response's MSS word; None: min(request, 1500) as §6.1 asks
        self.resp_ffs = resp_ffs
        self.my_id = new_socket_id()
        self.cookie = random.randint(1, 0xFFFFFFFF)
        self.peer: Addr | None = None
        self.peer_id = 0
        self.isn = 0
        self.received: dict[int, bytes] = {}
        self.top: int | None = None
        self.ack_sub = 0
        self.last_ack_time = 0.0
        self.hold_acks = False
        self.medium_acks = False  # send 16-byte (medium) ACKs instead of full ones (§5.3)
        self.keepalive_every: float | None = None  # keep the peer's EXP quiet while holding ACKs
        self._last_ka = 0.0
        self.accepted_at = 0.0
        self.shutdown_seen = False
        self.arrivals: list[tuple[float, int]] = []

    def accept(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.wire.recv(deadline - time.monotonic())
            if got is None:
                break
            p, src = got
            if not isinstance(p, Handshake):
                continue
            if p.req_type == 1:
                self.wire.send(replace(p, cookie=self.cookie, dst_id=p.socket_id), src)
            elif p.req_type == -1 and p.cookie == self.cookie:
                self.peer, self.peer_id, self.isn = src, p.socket_id, p.isn
                resp = replace(
                    p,
                    socket_id=self.my_id,
                    dst_id=p.socket_id,
                    mss=min(p.mss, 1500) if self.resp_mss is None else self.resp_mss,
                    flight_flag_size=self.resp_ffs,
                    peer_ip=peer_ip_field(src[0]),
                )
                self.wire.send(resp, src)
                self.top = None
                self.accepted_at = time.monotonic()
                return
        raise TimeoutError("the stack did not connect")

    @property
    def ack_no(self) -> int:
        s = self.isn
        while s in self.received:
            s = incseq(s)
        return s

    def send_ack(self) -> None:
        assert self.peer
        self.ack_sub = 0 if self.ack_sub == MAX else self.ack_sub + 1
        self.wire.send(
            Ack(
                dst_id=self.peer_id,
                ack_seq_no=self.ack_sub,
                ack_no=self.ack_no,
                rtt=10_000,
                rtt_var=5_000,
                avail_buffer=8192,
                arrival_speed=None if self.medium_acks else 5000,
                link_capacity=None if self.medium_acks else 50_000,
            ),
            self.peer,
        )
        self.last_ack_time = time.monotonic()

    def hold_first_window(self, settle: float = 0.2) -> None:
        """Accept, then let the first window (16 packets) arrive unacknowledged, keeping the
        sender's EXP timer quiet with keep-alives, for at least ``settle`` s after the accept:
        4.11 drops control packets that reach a socket in its first milliseconds (UDT4.md §16),
        so a crafted packet is sent only after that."""
        self.accept()
        self.hold_acks = True  # data unacknowledged, so that it stays retransmittable
        self.keepalive_every = 0.1  # … and the sender's EXP timer from retransmitting on its own
        self.run(2.0, until=lambda: len(self.received) >= 16 and time.monotonic() - self.accepted_at > settle)

    def run(self, duration: float, until: Callable[[], bool] | None = None) -> None:
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline and not (until and until()):
            got = self.wire.recv(0.005)
            if got is not None and got[1] == self.peer:
                p = got[0]
                if isinstance(p, DataPacket):
                    self.arrivals.append((time.monotonic(), p.seq))
                    self.received.setdefault(p.seq, p.payload)
                    if self.top is None or seqcmp(p.seq, self.top) > 0:
                        self.top = p.seq
                elif isinstance(p, Shutdown):
                    self.shutdown_seen = True
                elif isinstance(p, Handshake) and p.req_type == -1 and self.peer:
                    self.wire.send(replace(p, socket_id=self.my_id, dst_id=p.socket_id), self.peer)
            if not self.hold_acks and self.peer and time.monotonic() - self.last_ack_time >= 0.01 and self.received:
                self.send_ack()
            if self.keepalive_every and self.peer and time.monotonic() - self._last_ka >= self.keepalive_every:
                self.wire.send(KeepAlive(dst_id=self.peer_id), self.peer)
                self._last_ka = time.monotonic()

    def nak(self, words: list[int]) -> None:
        assert self.peer
        self.wire.send(Nak(dst_id=self.peer_id, words=tuple(w & 0xFFFFFFFF for w in words)), self.peer)

    def stream(self) -> bytes:
        out, s = [], self.isn
        while s in self.received:
            out.append(self.received[s])
            s = incseq(s)
        return b"".join(out)
