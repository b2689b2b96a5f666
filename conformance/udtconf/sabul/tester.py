"""The active tester for SABUL stacks: the suite's own endpoint plays the other side of a session
and misbehaves on purpose (``docs/spec/SABUL.md`` §3, §5.5, §10).

Every probe starts a fresh process of the stack through the adapter contract with
``TESTCASE=transfer``: as the **sender** (``ROLE=server``: it listens, the tester connects as
a receiver) or as the **receiver** (``ROLE=client``: the tester listens as a sender). What a
correct stack does with bad input is an abort (§10.2): it resets the control connection and
exits non-zero, promptly, without crashing and — as a receiver — with every byte delivered
before the hole or the abort in its OUTPUT and nothing else. A stack that claims success (exit
0), hangs, crashes, closes with a FIN where it should reset, or loses or invents data fails.

Each probe leaves ``probe.log`` and ``probe.pcap`` (what the tester sent and received on both
channels, written by the tester itself) in its directory.

The tester of a protocol built on SABUL builds on this one's public names: the recorded
:class:`ControlConnection`, the stack as :class:`AsSender` or :class:`AsReceiver` (subclassed
through their hooks: :attr:`AsSender.data_ip`, :attr:`AsSender.block_len`,
:meth:`AsSender.own_block`, :meth:`AsSender.handshake`; :meth:`AsReceiver.accept_control` and
the adapter environment ``AsReceiver(env, **extra)``), :func:`abort_verdict`,
:func:`wait_for_ack` and :func:`ending`.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Self

from udtharness.pcap import TCP_ACK, TCP_PSH, PcapWriter
from udtharness.ports import free_tcp_port, tcp_port_listening
from udtharness.stacks import Stack, stop

from .. import active
from ..active import Outcome, Probe, ProbeEnv, ProbeResult, Probes, ended
from ..diagnosis import exit_text
from .wire import OPTION_BLOCK_LEN, Ack, Data, OptionBlock, decode_option_block, encode_raw_control

Addr = tuple[str, int]
PAYLOAD = 1468
INPUT_BYTES = 300 * PAYLOAD
_RST = struct.pack("ii", 1, 0)


SabulProbe = Probe[ProbeEnv]
PROBES: Probes[ProbeEnv] = Probes()
probe = PROBES.probe


class ControlConnection:
    """The tester's control connection, recording what it sends and receives to the probe pcap."""

    def __init__(self, sock: socket.socket, recorder: PcapWriter) -> None:
        self.sock, self.recorder = sock, recorder
        self.me: Addr = sock.getsockname()[:2]
        self.peer: Addr = sock.getpeername()[:2]
        self._seq = {"out": 1, "in": 1}

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.recorder.write_tcp(time.time(), self.me, self.peer, self._seq["out"], TCP_PSH | TCP_ACK, data)
        self._seq["out"] += len(data)

    def recv(self, n: int, timeout: float) -> bytes:
        """Up to ``n`` bytes; b"" on EOF; raises TimeoutError, ConnectionResetError."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(n)
        if data:
            self.recorder.write_tcp(time.time(), self.peer, self.me, self._seq["in"], TCP_PSH | TCP_ACK, data)
            self._seq["in"] += len(data)
        return data

    def recv_exact(self, n: int, timeout: float) -> bytes:
        buf = b""
        deadline = time.monotonic() + timeout
        while len(buf) < n:
            chunk = self.recv(n - len(buf), max(0.001, deadline - time.monotonic()))
            if not chunk:
                break
            buf += chunk
        return buf

    def how_closed(self, timeout: float) -> str:
        """Reads until the peer closes: "reset", "fin", or "open" if it did neither in time."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    if not self.recv(65536, max(0.001, deadline - time.monotonic())):
                        return "fin"
                except TimeoutError:
                    return "open"
        except ConnectionResetError:
            return "reset"
        return "open"

    def reset(self) -> None:
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
        self.sock.close()

    def close(self) -> None:
        self.sock.close()


def _udp(ip: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((ip, 0))
    return s


def abort_verdict(env: ProbeEnv, rc: int | None, closed: str, what: str, notes: list[str]) -> ProbeResult:
    """The verdict for a probe whose correct outcome is an abort (§10.2)."""
    if rc is None:
        return env.result(Outcome.FAIL, f"still running 10 s after {what} (killed): it must abort", notes)
    if rc < 0 or rc >= 128:
        return env.result(Outcome.FAIL, f"crashed after {what} ({exit_text(rc)})", notes)
    if rc == 0:
        return env.result(Outcome.FAIL, f"exit 0 after {what}: it claimed success", notes)
    if closed == "fin":
        return env.result(
            Outcome.FAIL,
            f"closed the control connection with a FIN after {what}: an abort resets (SABUL.md §10.2)",
            notes,
        )
    return env.result(Outcome.PASS, f"aborted after {what}: {closed or 'closed'}, exit {rc}", notes)


class Session:
    """The stack's process in a probe and the tester's sockets, closed when the ``with`` ends."""

    proc: subprocess.Popen[bytes]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# The stack as the sender: the tester is its receiver


class AsSender(Session):
    """The stack started as the sender (``ROLE=server``) of :data:`INPUT_BYTES` random bytes,
    listening; the tester connects as its receiver with :meth:`connect` or :meth:`set_up`."""

    # Hooks of a profile's tester: the tester's data address (its data socket, ``udp``), the
    # length of the block and its echo (§3.4), and the valid block :meth:`own_block`.
    data_ip = "127.0.0.1"
    block_len = OPTION_BLOCK_LEN

    def __init__(self, env: ProbeEnv) -> None:
        self.env = env
        self.input = env.workdir / "input.bin"
        self.input.write_bytes(os.urandom(INPUT_BYTES))
        self.port = free_tcp_port()
        self.proc = env.stack.start(
            "server", "transfer", env.workdir, SERVER_ADDR="127.0.0.1", SERVER_PORT=self.port, INPUT=self.input
        )
        deadline = time.monotonic() + 5
        while not tcp_port_listening(self.port) and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.02)
        self.udp = _udp(self.data_ip)

    def own_block(self) -> bytes:
        """Hook: the valid block :meth:`connect` sends unless told otherwise: data port = the
        tester's data socket (§3.4)."""
        return OptionBlock(self.udp.getsockname()[1], self.port).encode()

    def connect(self, block: bytes | None = None) -> ControlConnection:
        tcp = ControlConnection(socket.create_connection(("127.0.0.1", self.port), timeout=5), self.env.recorder)
        tcp.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tcp.send(block if block is not None else self.own_block())
        return tcp

    def handshake(self) -> tuple[ControlConnection, bytes]:
        """The valid block (:meth:`own_block`) and its echo, :attr:`block_len` bytes read within
        5 s (ConnectionError if fewer came); returns the connection and the echo."""
        tcp = self.connect()
        echo = tcp.recv_exact(self.block_len, 5)
        if len(echo) != self.block_len:
            raise ConnectionError(f"no echo to a valid block ({len(echo)} bytes)")
        return tcp, echo

    def set_up(self) -> tuple[ControlConnection, int]:
        """A valid block, the echo, the first DATA packet; returns the connection and its seq."""
        tcp, _ = self.handshake()
        self.udp.settimeout(5)
        raw, src = self.udp.recvfrom(65536)
        self.env.recorder.write(time.time(), src, self.udp.getsockname(), raw)
        return tcp, struct.unpack_from("!I", raw)[0]

    def abort_in_silence(self, tcp: ControlConnection, wait: float, what: str, silence: str = "") -> ProbeResult:
        """The tester says nothing more: the verdict on how and when the stack aborts."""
        t0 = time.monotonic()
        closed = tcp.how_closed(wait)
        rc = ended(self.proc, 5)
        notes = [f"control connection {closed} after {time.monotonic() - t0:.1f} s{silence}"]
        return abort_verdict(self.env, rc, closed, what, notes)

    def close(self) -> None:
        stop(self.proc)
        self.udp.close()


def _bad_feedback(env: ProbeEnv, frame: Callable[[int], bytes], what: str) -> ProbeResult:
    with AsSender(env) as s:
        tcp, seq = s.set_up()
        tcp.send(frame(seq))
        closed = tcp.how_closed(5)
        return abort_verdict(env, ended(s.proc, 10), closed, what, [f"first DATA seq {seq}"])


@probe(
    "sender/bogus-option-block",
    "3.4",
    "sender",
    "a block whose max_loss_length is not ⌊pkt_size/4⌋ − 2: no echo, an abort (reset, exit ≠ 0)",
)
def _bogus_block(env: ProbeEnv) -> ProbeResult:
    with AsSender(env) as s:
        tcp = s.connect(OptionBlock(s.udp.getsockname()[1], s.port, max_loss_length=9999).encode())
        try:
            echo = tcp.recv_exact(OPTION_BLOCK_LEN, 3)
        except ConnectionResetError:
            echo = b""
            closed = "reset"
        else:
            closed = tcp.how_closed(3)
        if echo:
            return env.result(Outcome.FAIL, f"echoed an invalid block ({len(echo)} bytes): §3.4 rejects it")
        return abort_verdict(env, ended(s.proc, 10), closed, "an invalid option block", [])


@probe("sender/short-option-block", "10.3", "sender", "20 of the block's 40 bytes, then silence: abort within ~1 s")
def _short_block(env: ProbeEnv) -> ProbeResult:
    with AsSender(env) as s:
        tcp = s.connect(OptionBlock(s.udp.getsockname()[1], s.port).encode()[:20])
        return s.abort_in_silence(tcp, 8, "a block cut short")


@probe(
    "sender/malformed-err",
    "3.3",
    "sender",
    "an ERR whose loss list ends in a range start (the first DATA number with bit 31 set): abort",
)
def _malformed_err(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: encode_raw_control(2, 1, [0x80000000 | seq]), "a malformed ERR")


@probe(
    "sender/err-claims-a-billion-words",
    "3.2",
    "sender",
    "an ERR header claiming 10^9 loss-list words and nothing after it: abort at once, nothing allocated",
)
def _huge_err(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: encode_raw_control(2, 1_000_000_000), "an ERR claiming 10^9 words")


@probe("sender/err-beyond-sent-data", "5.5", "sender", "an ERR listing a number never sent (first + 10^6): abort")
def _err_beyond(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: encode_raw_control(2, 1, [seq + 1_000_000]), "an ERR beyond the data sent")


@probe("sender/err-start-after-end", "3.3", "sender", "an ERR range whose start is after its end: abort")
def _err_inverted(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: encode_raw_control(2, 2, [0x80000000 | (seq + 5), seq]), "an inverted range")


@probe("sender/unknown-control-type", "3.2", "sender", "a control frame of type 9: abort")
def _unknown_type(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: encode_raw_control(9, 0), "a frame of unknown type 9")


@probe("sender/ack-beyond-sent-data", "5.5", "sender", "an ACK far beyond the data sent: abort")
def _ack_beyond(env: ProbeEnv) -> ProbeResult:
    return _bad_feedback(env, lambda seq: Ack(seq + 1_000_000).encode(), "an ACK beyond the data sent")


@probe(
    "sender/receiver-vanishes",
    "5.3, 5.5",
    "sender",
    "the receiver goes silent after the echo (TCP open, no ACK/ERR/SYN): EXP re-sends, then an abort after 10",
)
def _vanishes(env: ProbeEnv) -> ProbeResult:
    with AsSender(env) as s:
        tcp, _ = s.set_up()
        return s.abort_in_silence(tcp, 20, "a silent receiver", " of silence")


# ---------------------------------------------------------------------------------------------
# The stack as the receiver: the tester is its sender


class AsReceiver(Session):
    """The stack started as the receiver (``ROLE=client``), connecting to the tester's listener;
    the tester plays its sender with :meth:`accept` or :meth:`set_up`, then DATA to its port."""

    def __init__(self, env: ProbeEnv, **extra: str) -> None:
        """``extra``: more adapter environment (a profile's tester may pass its own)."""
        self.env = env
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.output = env.workdir / "output.bin"
        self.proc = env.stack.start(
            "client",
            "transfer",
            env.workdir,
            SERVER_ADDR="127.0.0.1",
            SERVER_PORT=self.port,
            OUTPUT=self.output,
            **extra,
        )
        self.udp = _udp()

    def accept_control(self) -> ControlConnection:
        """The stack's control connection, accepted within 10 s and recorded."""
        self.lsock.settimeout(10)
        conn, _ = self.lsock.accept()
        return ControlConnection(conn, self.env.recorder)

    def accept(self) -> tuple[ControlConnection, OptionBlock]:
        """The control connection and the stack's block (40 bytes within 5 s, validated: §3.4)."""
        tcp = self.accept_control()
        return tcp, decode_option_block(tcp.recv_exact(OPTION_BLOCK_LEN, 5))

    def set_up(self) -> tuple[ControlConnection, OptionBlock]:
        """The stack's block, echoed unchanged; returns the connection and the block."""
        tcp, block = self.accept()
        tcp.send(block.encode())
        return tcp, block

    def send_data(self, block: OptionBlock, seq: int, payload: bytes, src: socket.socket | None = None) -> None:
        sock = src or self.udp
        raw = Data(seq, payload).encode()
        dest = ("127.0.0.1", block.data_port)
        sock.sendto(raw, dest)
        self.env.recorder.write(time.time(), sock.getsockname(), dest, raw)

    def deliver(self, tcp: ControlConnection, block: OptionBlock, n: int) -> list[bytes] | None:
        """``n`` fresh packets from seq 0; their payloads once ACK ``n`` came within 5 s, else None."""
        chunks = [os.urandom(PAYLOAD) for _ in range(n)]
        for seq, c in enumerate(chunks):
            self.send_data(block, seq, c)
        return chunks if wait_for_ack(tcp, n, 5) else None

    def written(self) -> bytes:
        return self.output.read_bytes() if self.output.exists() else b""

    def close(self) -> None:
        stop(self.proc)
        self.udp.close()
        self.lsock.close()


def wait_for_ack(tcp: ControlConnection, ack_no: int, timeout: float) -> bool:
    """Whether an ACK ``ack_no`` arrives on ``tcp`` within ``timeout`` (False on EOF)."""
    want = Ack(ack_no).encode()
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = tcp.recv(65536, max(0.001, deadline - time.monotonic()))
        except TimeoutError:
            return False
        if not chunk:
            return False
        buf += chunk
        if want in buf:
            return True
    return False


@probe(
    "receiver/reset-mid-transfer",
    "10.2",
    "receiver",
    "50 packets, their ACK, then a TCP reset: an abort (exit ≠ 0) with exactly those 50 packets in OUTPUT",
)
def _reset_mid(env: ProbeEnv) -> ProbeResult:
    with AsReceiver(env) as r:
        tcp, block = r.set_up()
        chunks = r.deliver(tcp, block, 50)
        if chunks is None:
            return env.result(Outcome.FAIL, "no ACK 50 for 50 contiguous packets within 5 s")
        tcp.reset()
        rc = ended(r.proc, 10)
        got, want = r.written(), b"".join(chunks)
        notes = [f"OUTPUT {len(got)} bytes, {len(want)} delivered before the reset"]
        if rc == 0:
            return env.result(
                Outcome.FAIL, "exit 0 after a reset: a reset before EOF is an abort (SABUL.md §10.2)", notes
            )
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"{ending(rc)} after the reset", notes)
        if got != want:
            return env.result(Outcome.FAIL, "OUTPUT is not exactly the 50 packets delivered before the reset", notes)
        return env.result(Outcome.PASS, f"aborted (exit {rc}) and kept the 50 delivered packets", notes)


@probe("receiver/bogus-echo", "3.4", "receiver", "an echo that changed data_port: an abort, nothing written")
def _bogus_echo(env: ProbeEnv) -> ProbeResult:
    with AsReceiver(env) as r:
        tcp, block = r.accept()
        bad = replace(block, data_port=block.data_port % 65535 + 1)
        tcp.send(bad.encode())
        closed = tcp.how_closed(5)
        rc = ended(r.proc, 10)
        res = abort_verdict(env, rc, closed, "an echo with another data_port", [])
        if not res.failed and r.output.exists() and r.output.stat().st_size:
            return env.result(Outcome.FAIL, "wrote data although the session never started")
        return res


@probe(
    "receiver/data-from-a-foreign-address",
    "2",
    "receiver",
    "forged DATA 0 from 127.0.0.2 before the real packets from the control peer's IP: only the real bytes",
)
def _foreign(env: ProbeEnv) -> ProbeResult:
    with AsReceiver(env) as r:
        tcp, block = r.set_up()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as forger:
            forger.bind(("127.0.0.2", 0))
            r.send_data(block, 0, b"forged" * 100, forger)
        chunks = r.deliver(tcp, block, 10)
        if chunks is None:
            return env.result(Outcome.FAIL, "no ACK 10 within 5 s")
        tcp.sock.shutdown(socket.SHUT_WR)
        closed = tcp.how_closed(5)
        rc = ended(r.proc, 10)
        got = r.written()
        notes = [f"receiver's close: {closed}"]
        if got != b"".join(chunks):
            return env.result(
                Outcome.FAIL, f"OUTPUT ({len(got)} bytes) is not the 10 real packets: the forged one got in", notes
            )
        if rc != 0:
            return env.result(Outcome.FAIL, f"{ending(rc)} after a complete session", notes)
        return env.result(Outcome.PASS, "ignored the forged datagram, delivered the real data, exit 0", notes)


def ending(rc: int | None) -> str:
    """How the stack's process ended: its exit (:func:`~udtconf.diagnosis.exit_text`), or
    "hung (killed)" where it had to be stopped."""
    return "hung (killed)" if rc is None else exit_text(rc)


def run_probe(stack: Stack, p: SabulProbe, workdir: Path) -> ProbeResult:
    """Run one probe against a fresh process of ``stack`` in ``workdir`` (emptied first); writes
    ``probe.log`` and ``probe.pcap`` there."""
    side = "server" if p.role == "sender" else "client"
    plays = f"the {p.role} (ROLE={side})"
    return active.run_probe(stack, p, workdir, ProbeEnv, spec="SABUL.md", side=side, plays=plays, errors=(OSError,))
