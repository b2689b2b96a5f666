"""A sender and a receiver of :mod:`.peer` joined by a virtual network with a virtual clock
(quinn's ``Pair``, smoltcp's ``netsim``): a one-way delay on both channels, an optional data
loss function, a TCP control channel that delivers in order. Fast and deterministic — for
behaviour tests of the peer, not of any socket.

    >>> pair = Pair(b"x" * 5000)
    >>> pair.run() == b"x" * 5000
    True
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .peer import ReceiverConfig, SabulReceiver, SabulSender, SenderConfig
from .wire import Control, ControlReader, decode_control, decode_data


@dataclass
class Sent:
    """One event on the virtual wire."""

    time: float
    kind: str  # "data" (sender → receiver, UDP) | "ctrl" (receiver → sender, TCP)
    raw: bytes
    lost: bool = False

    @property
    def seq(self) -> int:
        return decode_data(self.raw).seq

    @property
    def frame(self) -> Control:
        return decode_control(self.raw, max_loss_length=1 << 16)


@dataclass
class Pair:
    data: bytes
    sender_config: SenderConfig = field(default_factory=SenderConfig)
    receiver_config: ReceiverConfig = field(default_factory=ReceiverConfig)
    one_way: float = 0.001  # s, both channels
    # lose(seq, transmission): True drops that DATA datagram in the network
    lose: Callable[[int, int], bool] | None = None
    # silent(now): True while the receiver is gone (it neither receives nor sends anything)
    silent: Callable[[float], bool] | None = None

    def __post_init__(self) -> None:
        self.now = 0.0
        self.sender = SabulSender(io.BytesIO(self.data).read, self.sender_config)
        self.receiver = SabulReceiver(5000, 7000, self.receiver_config)
        self.log: list[Sent] = []
        self._data: deque[tuple[float, bytes]] = deque()
        self._ctrl: deque[tuple[float, bytes]] = deque()
        self._reader: ControlReader | None = None
        self._tx: dict[int, int] = {}
        self.output = bytearray()
        self.eof_at: float | None = None

    def handshake(self) -> None:
        block = self.receiver.option_block(self.now)
        self.now += self.one_way
        echo = self.sender.handle_block(block, self.now)
        self.now += self.one_way
        self.receiver.handle_echo(echo, self.now)
        assert self.sender.block is not None
        self._reader = ControlReader(self.sender.block.max_loss_length)

    def run(self, until: float = 120.0) -> bytes:
        """Runs until the receiver has seen the sender's FIN (or ``until``); the bytes delivered."""
        while self.now < until and self.eof_at is None:
            self.step()
        return bytes(self.output)

    def step(self) -> None:
        """Everything due at ``now``, then the clock moves to the next event."""
        if self._reader is None:
            self.handshake()
        s, r = self.sender, self.receiver
        gone = self.silent is not None and self.silent(self.now)
        while self._data and self._data[0][0] <= self.now:
            _, raw = self._data.popleft()
            if not gone:
                r.handle_data(raw, self.now)
        while self._ctrl and self._ctrl[0][0] <= self.now:
            _, raw = self._ctrl.popleft()
            assert self._reader is not None
            for frame in self._reader.feed(raw):
                s.handle_control(frame, self.now)
        if not gone:
            r.handle_timeout(self.now)
            for raw in r.poll_control():
                self.log.append(Sent(self.now, "ctrl", raw))
                self._ctrl.append((self.now + self.one_way, raw))
        self.output += r.take_output()
        s.handle_timeout(self.now)
        while (datagram := s.poll_transmit(self.now)) is not None:
            seq = decode_data(datagram).seq
            n = self._tx.get(seq, 0)
            self._tx[seq] = n + 1
            lost = self.lose is not None and self.lose(seq, n)
            self.log.append(Sent(self.now, "data", datagram, lost))
            if not lost:
                self._data.append((self.now + self.one_way, datagram))
        if s.finished:
            # §10.1: the FIN reaches the receiver after everything sent before it
            self.now = max(self.now + self.one_way, self._data[-1][0] if self._data else 0.0)
            self.step_until_data_arrived()
            self.receiver.handle_eof()
            self.output += r.take_output()
            self.eof_at = self.now
            return
        times = [s.next_deadline(self.now)] + ([] if gone else [r.next_deadline()])
        times += [q[0][0] for q in (self._data, self._ctrl) if q]
        self.now = max(min(times), self.now + 1e-7)

    def step_until_data_arrived(self) -> None:
        while self._data:
            _, raw = self._data.popleft()
            self.receiver.handle_data(raw, self.now)

    # --- what happened ------------------------------------------------------------------------

    def frames(self, kind: type | None = None) -> list[tuple[float, Control]]:
        out = [(e.time, e.frame) for e in self.log if e.kind == "ctrl"]
        return [(t, f) for t, f in out if kind is None or isinstance(f, kind)]

    def data_sent(self) -> list[Sent]:
        return [e for e in self.log if e.kind == "data"]
