"""Drives the sans-IO :mod:`.peer` over real sockets: the sender listens on TCP and waits for one
receiver, then sends DATA over UDP; the receiver connects, binds its UDP data port and writes
what arrives, in order (``docs/spec/SABUL.md`` §2, §10).

Plain Python with ``select``: it moves files byte-exactly and follows the spec's timers, not
fast (see docs/conformance/README.md for what it reaches). The exit codes are docs/cli.md's:
0 success, 3 set-up failed, 4 local I/O, 5 broken mid-transfer (an abort: §5.5, §10.2).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from .peer import ProtocolError, ReceiverConfig, SabulReceiver, SabulSender, SenderConfig
from .wire import ControlReader, SabulWireError

EXIT_OK, EXIT_USAGE, EXIT_SETUP, EXIT_IO, EXIT_BROKEN = 0, 2, 3, 4, 5
FRAME_TIMEOUT = 1.0  # §10.3: a started frame (or block, or echo) completes within 1 s
BLOCK_TIMEOUT = 1.0  # §10.3: the block arrives within 1 s of the accept
ECHO_TIMEOUT = 10.0  # §10.3: the echo within 10 s of connecting
DRAIN = 1.0  # §10.1
UDP_RCVBUF = 4 << 20  # §9
UDP_SNDBUF = 1 << 20  # [C] had 64 KiB; invisible on the wire, larger suits Python's bursts
STACK = "sabul-py"


class SessionError(Exception):
    """The session failed; ``code`` is the exit status it maps to."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_address(text: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[IPv6]:PORT`` or ``host:PORT``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"address {text!r}: write ADDR:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _resolve(host: str, port: int, kind: socket.SocketKind) -> tuple[socket.AddressFamily, tuple[str, int]]:
    try:
        family, _, _, _, addr = socket.getaddrinfo(host, port, type=kind)[0]
    except socket.gaierror as e:
        raise SessionError(f"cannot resolve {host}: {e}", EXIT_USAGE) from e
    return family, (str(addr[0]), int(addr[1]))


def _reset(sock: socket.socket) -> None:
    """Abort: close with an RST (SO_LINGER {1, 0}), so the peer cannot take it for the end of
    the stream (§10.2)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _recv_exact(sock: socket.socket, n: int, first_byte_timeout: float, what: str) -> bytes:
    """``n`` bytes: the first within ``first_byte_timeout``, the rest within FRAME_TIMEOUT (§10.3)."""
    buf = bytearray()
    deadline = time.monotonic() + first_byte_timeout
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SessionError(f"{what}: only {len(buf)} of {n} bytes in time (SABUL.md §10.3)", EXIT_SETUP)
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(buf))
        except TimeoutError:
            continue
        except OSError as e:
            raise SessionError(f"{what}: {e}", EXIT_SETUP) from e
        if not chunk:
            raise SessionError(f"{what}: the peer closed after {len(buf)} of {n} bytes (SABUL.md §3.4)", EXIT_SETUP)
        if not buf:
            deadline = time.monotonic() + FRAME_TIMEOUT
        buf += chunk
    return bytes(buf)


class Stats:
    """The ``--stats`` JSON lines of docs/cli.md."""

    def __init__(
        self,
        out: TextIO | None,
        role: str,
        interval: float,
        sample: Callable[[], dict[str, float]],
        stack: str = STACK,
    ) -> None:
        self.out, self.role, self.interval, self.sample, self.stack = out, role, interval, sample, stack
        self.t0 = time.monotonic()
        self._next = self.t0 + interval
        self._last_t, self._last_bytes = self.t0, 0.0

    def poll(self, now: float) -> None:
        if self.out is not None and now >= self._next:
            self._next = now + self.interval
            self._write(now, {})

    def summary(self) -> None:
        if self.out is not None:
            now = time.monotonic()
            self._last_t, self._last_bytes = self.t0, 0.0
            self._write(now, {"summary": True, "seconds": round(now - self.t0, 6)})

    def _write(self, now: float, extra: dict[str, object]) -> None:
        assert self.out is not None
        s = self.sample()
        span = max(now - self._last_t, 1e-9)
        mbps = (s["bytes"] - self._last_bytes) * 8 / span / 1e6
        self._last_t, self._last_bytes = now, s["bytes"]
        line = {"stack": self.stack, "role": self.role, "t": round(now - self.t0, 6), **s, "mbps": round(mbps, 3)}
        self.out.write(json.dumps({**line, **extra}) + "\n")
        self.out.flush()


# ---------------------------------------------------------------------------------------------
# Sender: listen, accept one receiver, send (§2, §5, §10)


@dataclass
class SendResult:
    bytes: int
    seconds: float
    sender: SabulSender


def send(
    listen: tuple[str, int],
    source: BinaryIO,
    config: SenderConfig | None = None,
    stats: TextIO | None = None,
    stats_interval: float = 0.1,
    log: TextIO = sys.stderr,
    on_listening: Callable[[tuple[str, int]], None] | None = None,
    make_sender: Callable[[Callable[[int], bytes], SenderConfig | None], SabulSender] = SabulSender,
) -> SendResult:
    """Serves one receiver; raises :class:`SessionError` when the session fails. ``make_sender``
    picks the profile (SABUL's sender, or a subclass through the hooks of
    :class:`~.peer.SabulSender`)."""
    family, addr = _resolve(*listen, socket.SOCK_STREAM)
    lsock = socket.socket(family, socket.SOCK_STREAM)
    try:
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(addr)
        lsock.listen(1)
    except OSError as e:
        lsock.close()
        raise SessionError(f"cannot listen on {addr[0]}:{addr[1]}: {e}", EXIT_IO) from e
    bound = lsock.getsockname()[:2]
    print(f"listening on {bound[0]}:{bound[1]}", file=log, flush=True)
    if on_listening:
        on_listening((str(bound[0]), int(bound[1])))
    with lsock:
        conn, peer = lsock.accept()  # one receiver per session (§2 step 4)
    print(f"accepted {peer[0]}:{peer[1]}", file=log, flush=True)
    sender = make_sender(source.read, config)
    try:
        raw = _recv_exact(conn, sender.block_len, BLOCK_TIMEOUT, "option block")
        echo = sender.handle_block(raw, time.monotonic())
        conn.sendall(echo)
    except ProtocolError as e:
        _reset(conn)
        raise SessionError(str(e), EXIT_SETUP) from e
    except (SessionError, OSError) as e:
        _reset(conn)
        raise SessionError(str(e), EXIT_SETUP) from e
    assert sender.block is not None
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, UDP_SNDBUF)
    udp.bind((addr[0], 0))
    dest = sender.data_dest(str(peer[0]))
    reader = ControlReader(sender.block.max_loss_length)

    def sample() -> dict[str, float]:
        return {
            "bytes": sender.bytes_acked,
            "rtt_ms": 0.0,
            "flow_window": sender.rc.window,
            "cwnd": float(sender.rc.window),
            "period_us": round(sender.rc.interval, 3),
            **sender.stats.line(),
        }

    meter = Stats(stats, "send", stats_interval, sample, sender.stack)
    t0 = time.monotonic()
    try:
        _send_loop(sender, conn, udp, dest, reader, meter)
    except ProtocolError as e:
        _reset(conn)
        raise SessionError(str(e), EXIT_BROKEN) from e
    except OSError as e:
        _reset(conn)
        raise SessionError(f"control connection broken: {e}", EXIT_BROKEN) from e
    except SessionError:
        _reset(conn)
        raise
    finally:
        udp.close()
    seconds = time.monotonic() - t0
    _half_close_and_drain(conn, reader)
    meter.summary()
    print(f"sent {sender.bytes_acked} bytes, all acknowledged", file=log, flush=True)
    return SendResult(sender.bytes_acked, seconds, sender)


def _send_loop(
    sender: SabulSender,
    conn: socket.socket,
    udp: socket.socket,
    dest: tuple[str, int],
    reader: ControlReader,
    meter: Stats,
) -> None:
    conn.setblocking(False)
    while True:
        now = time.monotonic()
        while True:  # §5 step 3: drain every control frame available
            try:
                chunk = conn.recv(65536)
            except BlockingIOError:
                break
            if not chunk:
                raise SessionError(
                    f"the receiver closed the control connection at ACK {sender.last_ack} of {sender.next_seq} "
                    "packets (SABUL.md §10.2)",
                    EXIT_BROKEN,
                )
            try:
                frames = reader.feed(chunk)
            except SabulWireError as e:
                raise ProtocolError(f"control stream: {e}") from e
            for frame in frames:
                sender.handle_control(frame, now)
        sender.handle_timeout(now)
        meter.poll(now)
        for _ in range(64):
            datagram = sender.poll_transmit(now)
            if datagram is None:
                break
            udp.sendto(datagram, dest)
            now = time.monotonic()
        if sender.finished:
            return
        wait = sender.next_deadline(now) - time.monotonic()
        if wait > 0:
            select.select([conn], [], [], min(wait, 0.05))


def _half_close_and_drain(conn: socket.socket, reader: ControlReader) -> None:
    """§10.1: FIN, then read (and discard) until the receiver's FIN, at most DRAIN seconds."""
    deadline = time.monotonic() + DRAIN
    try:
        conn.setblocking(True)
        conn.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            try:
                reader.feed(chunk)
            except SabulWireError:
                pass  # only logged in the drain: everything was acknowledged
    except OSError:
        pass  # a reset or timeout in the drain changes nothing (§10.1 step 3)
    conn.close()


# ---------------------------------------------------------------------------------------------
# Receiver: connect, exchange the block, receive (§2, §6, §10)


@dataclass
class RecvResult:
    bytes: int
    seconds: float
    receiver: SabulReceiver


def receive(
    connect: tuple[str, int],
    sink: BinaryIO,
    config: ReceiverConfig | None = None,
    stats: TextIO | None = None,
    stats_interval: float = 0.1,
    log: TextIO = sys.stderr,
    data_port: int = 0,
    data_ip: str | None = None,
    make_receiver: Callable[[int, int, ReceiverConfig, str], SabulReceiver] | None = None,
) -> RecvResult:
    """Receives one session into ``sink``; raises :class:`SessionError` when it fails (every byte
    before the hole or the abort is written first). DATA is taken on ``data_ip`` (default: the
    control connection's local address); ``make_receiver(data_port, ctrl_port, config,
    data_ip)`` picks the profile (SABUL's receiver, or a subclass through the hooks of
    :class:`~.peer.SabulReceiver`)."""
    family, addr = _resolve(*connect, socket.SOCK_STREAM)
    try:
        tcp = socket.create_connection(addr, timeout=ECHO_TIMEOUT)
    except OSError as e:
        raise SessionError(f"cannot connect to {addr[0]}:{addr[1]}: {e}", EXIT_SETUP) from e
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)
    try:
        udp.bind((data_ip or tcp.getsockname()[0], data_port))
    except OSError as e:
        _reset(tcp)
        udp.close()
        raise SessionError(f"cannot bind the UDP data address {data_ip or ''}:{data_port}: {e}", EXIT_IO) from e
    bound_ip, bound_port = udp.getsockname()[:2]
    if make_receiver is None:
        receiver = SabulReceiver(bound_port, addr[1], config or ReceiverConfig())
    else:
        receiver = make_receiver(bound_port, addr[1], config or ReceiverConfig(), str(bound_ip))
    peer_ip = tcp.getpeername()[0]
    try:
        tcp.sendall(receiver.option_block(time.monotonic()))
        echo = _recv_exact(tcp, receiver.block_len, ECHO_TIMEOUT, "echo")
        receiver.handle_echo(echo, time.monotonic())
    except (SessionError, ProtocolError, OSError) as e:
        _reset(tcp)
        udp.close()
        raise SessionError(str(e), EXIT_SETUP) from e
    print(f"connected to {addr[0]}:{addr[1]}, data port {receiver.data_port}", file=log, flush=True)

    def sample() -> dict[str, float]:
        return {
            "bytes": receiver.bytes_delivered,
            "rtt_ms": round(receiver.rtt * 1000, 3),
            "flow_window": receiver.config.flag_size,
            "cwnd": 0.0,
            "period_us": 0.0,
            **receiver.stats.line(),
        }

    meter = Stats(stats, "recv", stats_interval, sample, receiver.stack)
    t0 = time.monotonic()
    try:
        _recv_loop(receiver, tcp, udp, peer_ip, sink, meter)
    except ProtocolError as e:
        _flush(receiver, sink)
        _reset(tcp)
        raise SessionError(str(e), EXIT_BROKEN) from e
    except ConnectionError as e:
        _flush(receiver, sink)
        _reset(tcp)
        raise SessionError(
            f"the sender reset the control connection before its end ({e}); {receiver.bytes_delivered} bytes "
            f"delivered up to sequence number {receiver.ack_point} (SABUL.md §10.2)",
            EXIT_BROKEN,
        ) from e
    except OSError as e:
        _reset(tcp)
        raise SessionError(f"local I/O: {e}", EXIT_IO) from e
    finally:
        udp.close()
    tcp.close()
    meter.summary()
    print(f"received {receiver.bytes_delivered} bytes", file=log, flush=True)
    return RecvResult(receiver.bytes_delivered, time.monotonic() - t0, receiver)


def _flush(receiver: SabulReceiver, sink: BinaryIO) -> None:
    try:
        sink.write(receiver.take_output())
        sink.flush()
    except OSError:
        pass


def _recv_loop(
    receiver: SabulReceiver, tcp: socket.socket, udp: socket.socket, peer_ip: str, sink: BinaryIO, meter: Stats
) -> None:
    tcp.setblocking(False)
    udp.setblocking(False)
    pending = bytearray()  # control frames the socket did not take yet
    foreign = 0
    while True:
        now = time.monotonic()
        wait = max(0.0, min(receiver.next_deadline() - now, 0.05))
        readable, _, _ = select.select([udp, tcp], [tcp] if pending else [], [], wait)
        now = time.monotonic()
        for _ in range(1024):
            try:
                data, src = udp.recvfrom(65536)
            except BlockingIOError:
                break
            if not receiver.data_source_ok(src[0], peer_ip):
                foreign += 1  # §2 step 7: not from the sender's IP
                continue
            receiver.handle_data(data, now)
        if tcp in readable:
            chunk = tcp.recv(4096)  # ConnectionResetError: an abort before EOF (§10.2)
            if not chunk:
                sink.write(receiver.take_output())
                receiver.handle_eof()  # the end of the stream, or the hole it leaves (§10.1)
                sink.flush()
                return
            raise ProtocolError(f"the sender wrote {len(chunk)} bytes after the echo (SABUL.md §3.2)")
        receiver.handle_timeout(now)
        for frame in receiver.poll_control():
            pending += frame
        if pending:
            try:
                sent = tcp.send(pending)
                del pending[:sent]
            except BlockingIOError:
                pass
        out = receiver.take_output()
        if out:
            sink.write(out)
        meter.poll(now)
