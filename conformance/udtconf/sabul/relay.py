"""A relay for SABUL's two channels that drops chosen DATA packets (the ``loss`` case).

SABUL's sender sends DATA to the data port the receiver announced in its option block (§2,
§3.4), so a UDP relay alone cannot sit in the path. This one sits in both: the receiver
connects its control connection to the relay's TCP port; the relay connects on to the sender
and splices the two streams byte for byte, except for word 0 of the first 40 bytes in each
direction — it announces its own UDP port to the sender in the block and restores the
receiver's in the echo — so both stacks see a consistent session. DATA then reaches the relay,
which forwards it to the receiver's real data port, from the same IP as the control connection
(§2 step 7), dropping each listed sequence number the first ``drop_times`` times it passes.

A protocol built on SABUL with a longer block runs through the relay under its profile
(:class:`~udtconf.sabul.profile.SabulProfile`): the relay holds back that many bytes, and the
profile says where the block's data address is and how to point it at the relay and back.

FIN and RST are passed on as they came (a half-close as a half-close, a reset as a reset), so
the teardown rules of §10 hold through the relay. Runs in one thread; needs no root.
"""

from __future__ import annotations

import selectors
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..relay import Relay
from .profile import SABUL, Endpoint, SabulProfile

_W = struct.Struct("!I")
_LINGER_RST = struct.pack("ii", 1, 0)


@dataclass
class _Session:
    down: socket.socket  # from the receiver
    up: socket.socket  # to the sender
    udp: socket.socket  # the data port the sender is told
    receiver_ip: str
    block: bytearray = field(default_factory=bytearray)  # the receiver's block (40 bytes), held back
    echo: bytearray = field(default_factory=bytearray)
    original: bytes | None = None  # the receiver's block as it sent it
    data_addr: Endpoint | None = None  # the receiver's real data address
    eof: set[str] = field(default_factory=set)
    closed: bool = False


class SabulRelay(Relay):
    def __init__(
        self,
        sender: tuple[str, int],
        drop: Iterable[int] | Mapping[int, int] = (),
        drop_times: int = 1,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        lifetime: float = 120.0,
        profile: SabulProfile = SABUL,
    ) -> None:
        super().__init__("udtc-sabul-relay", drop_times, lifetime)
        self.sender = sender
        # sequence number → how many of its transmissions to drop (a mapping sets each its own)
        self.drop = dict(drop) if isinstance(drop, Mapping) else dict.fromkeys(drop, drop_times)
        self.profile = profile  # the block's length and where its data address is
        self.head_len = profile.head_len
        self._seen: dict[int, int] = {}
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(listen)
        self._lsock.listen(4)
        self.address: tuple[str, int] = self._lsock.getsockname()
        self.udp_ports: list[int] = []
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._lsock, selectors.EVENT_READ, None)
        self._sessions: list[_Session] = []

    def _free(self) -> None:
        for s in self._sessions:
            for sock in (s.down, s.up, s.udp):
                sock.close()
        self._lsock.close()

    # -----------------------------------------------------------------------------------------

    def _poll(self) -> None:
        for key, _ in self._sel.select(timeout=0.05):
            sock, session = key.fileobj, key.data
            assert isinstance(sock, socket.socket)
            if session is None:
                self._accept()
            elif sock is session.udp:
                self._datagrams(session)
            else:
                self._stream(session, sock)

    def _accept(self) -> None:
        down, peer = self._lsock.accept()
        try:
            up = socket.create_connection(self.sender, timeout=5)
        except OSError:
            down.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            down.close()
            return
        for s in (down, up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setblocking(True)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        udp.bind((self.address[0], 0))
        self.udp_ports.append(udp.getsockname()[1])
        session = _Session(down, up, udp, str(peer[0]))
        self._sessions.append(session)
        for s in (down, up, udp):
            self._sel.register(s, selectors.EVENT_READ, session)

    def _stream(self, s: _Session, sock: socket.socket) -> None:
        other, side = (s.up, "down") if sock is s.down else (s.down, "up")
        try:
            chunk = sock.recv(65536)
        except OSError:  # a reset: pass it on as a reset
            self._reset(s)
            return
        if not chunk:
            self._sel.unregister(sock)
            s.eof.add(side)
            try:
                other.shutdown(socket.SHUT_WR)  # a FIN: pass it on as a FIN
            except OSError:
                pass
            if s.eof == {"down", "up"}:
                self._end(s)
            return
        chunk = self._rewrite(s, side, chunk)
        try:
            if chunk:
                other.sendall(chunk)
        except OSError:
            self._reset(s)

    def _rewrite(self, s: _Session, side: str, chunk: bytes) -> bytes:
        """Holds back the block and the echo (the profile's length: SABUL's 40 bytes) and
        rewrites their data address (SABUL's word 0, §3.4): the relay's in the block, the
        receiver's own again in the echo."""
        n = self.head_len
        head = s.block if side == "down" else s.echo
        if len(head) >= n:
            return chunk
        take = n - len(head)
        head += chunk[:take]
        rest = chunk[take:]
        if len(head) < n:
            return b""
        if side == "down":
            s.original = bytes(head)
            s.data_addr = self.profile.decode_block(s.original).data_address(s.receiver_ip)
            name = s.udp.getsockname()
            self.profile.redirect(head, (str(name[0]), int(name[1])))
        elif s.original is not None:
            self.profile.restore(head, s.original)
        return bytes(head) + rest

    def _datagrams(self, s: _Session) -> None:
        for _ in range(256):
            try:
                data = s.udp.recv(65536, socket.MSG_DONTWAIT)
            except OSError:
                return
            if s.data_addr is None:
                continue
            if len(data) >= 4 and not data[0] & 0x80:
                seq = _W.unpack_from(data, 0)[0]
                n = self._seen.get(seq, 0)
                self._seen[seq] = n + 1
                if n < self.drop.get(seq, 0):
                    self.dropped.append(seq)
                    continue
            s.udp.sendto(data, s.data_addr)
            self.forwarded += 1

    def _reset(self, s: _Session) -> None:
        for sock in (s.down, s.up):
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            except OSError:
                pass
        self._end(s)

    def _end(self, s: _Session) -> None:
        if s.closed:
            return
        s.closed = True
        for sock in (s.down, s.up):
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()


__all__ = ["SabulRelay"]
