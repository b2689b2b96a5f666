"""UDT4's relay (on :class:`udtconf.relay.Relay`): a UDP relay between a client and a server
that drops chosen data packets and can move the sequence space (to put a transfer across the
2^31 wrap without the stacks' cooperation).

Runs in a thread on loopback, needs no root. Every client endpoint gets its own upstream
socket, so several connections through one relay stay apart.

* ``drop`` — offsets from the client's ISN (``0`` = the first data packet); each listed packet
  is dropped the first ``drop_times`` times it passes (so retransmissions get through).
* ``drop_rexmit`` — offsets whose original *and first retransmission* are dropped (a copy is a
  retransmission when the relay has already seen its sequence number): a lost retransmission,
  which 4.11 recovers only by the sender's EXP timer (UDT4.md §8.4, §9.4), so the second
  retransmission is the one that gets through.
* ``isn_target`` — if set, the relay rewrites sequence numbers so that the client's ISN appears
  to the server as ``isn_target``: handshake ISNs and data sequence numbers on the way in; ACK
  numbers, NAK words and the response ISN on the way out (the client gets its own ISN word
  back, all 32 bits). Both stacks see a consistent connection. The relay moves numbers only once
  it has read the ISN from a UDT4 handshake (64 bytes); :meth:`LossRelay.wrap_missed` says
  afterwards whether the server saw a number past the 2^31 wrap, and if not, why — a case that
  never crossed it has not tested it.

Without ``isn_target`` the relay is transparent: it changes no byte of what it passes on, so a
client whose handshake carries an ISN or socket ID outside the 31-bit range (UDT4.md §3.3, §4)
meets the server exactly as it would directly, and the server's verdict on it is its own.

* ``rate_pps`` — if set, client → server traffic leaves through a drop-tail bottleneck of
  that many packets per second with a ``queue``-packet buffer, so a sender's rate control
  (and its packet pairs, §7) becomes visible on a loopback link. Tail drops of data packets are
  counted in ``dropped`` like chosen drops.

``dropped`` collects the dropped numbers *as the server would have seen them*; the relay can
also record both legs to a pcap (``capture=``) for runs without root.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from udtharness.pcap import PcapWriter

from ..relay import Relay
from ..seq import MAX

_W = struct.Struct("!I")


def _udp_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Large buffers: the relay must not add losses of its own to the ones it was asked for.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    return s


def _shift(seq: int, delta: int) -> int:
    return (seq + delta) & MAX


@dataclass
class _Flow:
    client: tuple[str, int]
    upstream: socket.socket
    isn: int | None = None  # the client's ISN word, as its first handshake carried it
    delta: int = 0  # the shift; 0: numbers pass untouched
    isn_sent: int | None = None  # that ISN as the relay passed it on (shifted)
    seen: dict[int, int] = field(default_factory=dict)
    short_handshakes: list[int] = field(default_factory=list)  # sizes of those too short for an ISN word
    data_passed: int = 0  # data packets passed on to the server
    wrapped: bool = False  # one of them was numbered past the wrap of the shifted ISN


class LossRelay(Relay):
    def __init__(
        self,
        server: tuple[str, int],
        listen: tuple[str, int] = ("127.0.0.1", 0),
        drop: list[int] | None = None,
        drop_times: int = 1,
        drop_rexmit: list[int] | None = None,
        isn_target: int | None = None,
        capture: Path | None = None,
        lifetime: float = 120.0,
        rate_pps: float | None = None,
        queue: int = 100,
    ) -> None:
        super().__init__("udtc-relay", drop_times, lifetime)
        self.rate_pps = rate_pps
        self.queue_limit = queue
        self._queue: deque[tuple[float, _Flow, bytes]] = deque()
        self._next_release = 0.0
        self.tail_drops = 0
        self.server = server
        self.drop_offsets = set(drop or [])
        self.rexmit_offsets = set(drop_rexmit or [])
        self.isn_target = isn_target
        self._sock = _udp_socket()
        self._sock.bind(listen)
        self.address: tuple[str, int] = self._sock.getsockname()
        self._flows: dict[tuple[str, int], _Flow] = {}
        self._by_upstream: dict[socket.socket, _Flow] = {}
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._sock, selectors.EVENT_READ)
        self._pcap = PcapWriter(capture) if capture else None
        self._lock = threading.Lock()

    def _free(self) -> None:
        for f in self._flows.values():
            f.upstream.close()
        self._sock.close()
        if self._pcap:
            self._pcap.close()

    # -----------------------------------------------------------------------------------------

    def _poll(self) -> None:
        self._release()
        wait = 0.05
        if self._queue:
            wait = max(0.0, min(wait, self._queue[0][0] - time.monotonic()))
        for key, _ in self._sel.select(timeout=wait):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)  # only sockets are registered
            try:
                data, src = sock.recvfrom(65535)
            except OSError:
                continue
            if sock is self._sock:
                self._from_client(bytearray(data), src)
            else:
                self._from_server(bytearray(data), self._by_upstream[sock])

    def _record(self, src: tuple[str, int], dst: tuple[str, int], data: bytes) -> None:
        if self._pcap:
            self._pcap.write(time.time(), src, dst, data)

    def _from_client(self, pkt: bytearray, src: tuple[str, int]) -> None:
        flow = self._flows.get(src)
        if flow is None:
            up = _udp_socket()
            up.bind((self.address[0], 0))
            flow = _Flow(src, up)
            self._flows[src] = flow
            self._by_upstream[up] = flow
            self._sel.register(up, selectors.EVENT_READ)
        self._record(src, self.address, bytes(pkt))
        if len(pkt) >= 16:
            w0 = _W.unpack_from(pkt, 0)[0]
            if w0 & 0x80000000 == 0:  # data
                if flow.isn is None:
                    flow.isn = w0  # first data seen before any handshake (should not happen)
                off = (w0 - flow.isn) & MAX
                n = flow.seen.get(w0, 0)
                flow.seen[w0] = n + 1
                new_seq = _shift(w0, flow.delta)
                if n < self._drops(off):
                    with self._lock:
                        self.dropped.append(new_seq)
                    return
                _W.pack_into(pkt, 0, new_seq)
                flow.data_passed += 1
                if flow.isn_sent is not None and new_seq < flow.isn_sent:
                    flow.wrapped = True  # past 0x7fffffff, as the server numbers them
            elif (w0 >> 16) & 0x7FFF == 0 and len(pkt) < 64:  # not UDT4's 48-byte body: no ISN to read
                flow.short_handshakes.append(len(pkt))
            elif (w0 >> 16) & 0x7FFF == 0:  # handshake: word 2 of the body = ISN
                isn = _W.unpack_from(pkt, 24)[0]
                if flow.isn is None:
                    flow.isn = isn
                    if self.isn_target is not None:
                        flow.delta = (self.isn_target - isn) & MAX
                        flow.isn_sent = _shift(isn, flow.delta)
                if self.isn_target is not None:
                    _W.pack_into(pkt, 24, _shift(isn, flow.delta))
        if self.rate_pps:
            if len(self._queue) >= self.queue_limit:
                self.tail_drops += 1
                if not _W.unpack_from(pkt, 0)[0] & 0x80000000:
                    with self._lock:
                        self.dropped.append(_W.unpack_from(pkt, 0)[0])
                return
            now = time.monotonic()
            self._next_release = max(now, self._next_release) + 1.0 / self.rate_pps
            self._queue.append((self._next_release, flow, bytes(pkt)))
            return
        self._forward(flow, bytes(pkt))

    def wrap_missed(self) -> str | None:
        """Why no data packet numbered past the 2^31 wrap reached the server, in words; None when
        one did (or when no shift was asked for). Read once the relay is closed."""
        flows = list(self._flows.values())
        if self.isn_target is None or any(f.wrapped for f in flows):
            return None
        if not any(f.isn_sent is not None for f in flows):
            short = sorted({n for f in flows for n in f.short_handshakes})
            if short:
                sizes = ", ".join(str(n) for n in short)
                return (
                    f"the relay saw only handshakes of {sizes} bytes from the client, not UDT4's 64 "
                    "(§5.1): with no ISN to read it moved no sequence number, so the server never saw "
                    "the 2^31 wrap"
                )
            return "the relay saw no handshake from the client: it moved no sequence number"
        passed = sum(f.data_passed for f in flows)
        return f"no data packet numbered past the 2^31 wrap reached the server ({passed} passed on)"

    def _drops(self, off: int) -> int:
        """How many copies of the packet at offset ``off`` are dropped."""
        if off in self.rexmit_offsets:
            return 2  # the original and its first retransmission
        return self.drop_times if off in self.drop_offsets else 0

    def _release(self) -> None:
        now = time.monotonic()
        while self._queue and self._queue[0][0] <= now:
            _, flow, pkt = self._queue.popleft()
            self._forward(flow, pkt)

    def _forward(self, flow: _Flow, pkt: bytes) -> None:
        flow.upstream.sendto(pkt, self.server)
        self.forwarded += 1
        self._record(flow.upstream.getsockname(), self.server, pkt)

    def _from_server(self, pkt: bytearray, flow: _Flow) -> None:
        self._record(self.server, flow.upstream.getsockname(), bytes(pkt))
        back = (-flow.delta) & MAX
        if self.isn_target is not None and len(pkt) >= 16:
            w0 = _W.unpack_from(pkt, 0)[0]
            ctype = (w0 >> 16) & 0x7FFF
            if w0 & 0x80000000 and ctype == 0 and len(pkt) >= 64:
                isn = _W.unpack_from(pkt, 24)[0]
                # the echo of the client's ISN returns as the word the client sent (bit 31 too)
                mine = flow.isn if isn == flow.isn_sent and flow.isn is not None else _shift(isn, back)
                _W.pack_into(pkt, 24, mine)
            elif w0 & 0x80000000 and ctype == 2 and len(pkt) >= 20:
                _W.pack_into(pkt, 16, _shift(_W.unpack_from(pkt, 16)[0], back))
            elif w0 & 0x80000000 and ctype == 3:
                for off in range(16, len(pkt) - 3, 4):
                    w = _W.unpack_from(pkt, off)[0]
                    _W.pack_into(pkt, off, (w & 0x80000000) | _shift(w & MAX, back))
            elif w0 & 0x80000000 and ctype == 7 and len(pkt) >= 24:
                for off in (16, 20):
                    _W.pack_into(pkt, off, _shift(_W.unpack_from(pkt, off)[0], back))
            elif not w0 & 0x80000000:
                _W.pack_into(pkt, 0, _shift(w0, back))
        self._sock.sendto(pkt, flow.client)
        self._record(self.address, flow.client, bytes(pkt))


def wrap_target(packets_before_wrap: int) -> int:
    """An ISN that puts the wrap ``packets_before_wrap`` packets into the transfer."""
    return (MAX + 1 - packets_before_wrap) & MAX


__all__ = ["LossRelay", "wrap_target"]
