"""Active tester: the suite's Python UDT4 peer (:mod:`udtconf.udt.peer`) plays either role against a
live stack and misbehaves on purpose (crafted NAKs and ACKs, malformed packets, wrong socket
IDs, replayed handshakes, a cookie-round flood, silence mid-transfer) or is hostile (message
drop requests on a stream, a flood of completed handshakes, absurd MSS and flow windows, an
error signal among several connections).

Each probe returns a :class:`ProbeResult` whose :class:`~udtconf.active.Outcome` is ``pass``
(behaved as the spec asks), ``fail`` (crashed, hung, corrupted data, or broke a MUST), or
``tolerated``/``broken`` for inputs where the spec allows either ignoring the packet or
dropping the connection (recorded, not failed).

Each probe starts a fresh process of the stack through its adapter, exactly as the interop
matrix does (docs/conformance/adapter-contract.md, *Active tester*): ``TESTCASE=transfer`` — or
the probe's own :attr:`Probe.testcase` (``multiconnect`` for the ones that open three
connections, ``dgram`` for the DGRAM drop requests) — in the role the probe needs, with the
probe's directory as ``LOGDIR`` (a subdirectory each for the probes that start several). The
probe's directory also gets ``probe.pcap`` (every datagram the tester sent and received,
written by the tester itself, so no root is needed) and ``probe.log`` (the verdict, the notes,
and the end of the stack's own log with any crash line, :mod:`udtconf.diagnosis`).

Every probe runs under a deadline of its own (:data:`PROBE_DEADLINE`, longer for the probes in
:data:`DEADLINES`), above the sum of the waits it may legitimately sit out, and enforced outside
the probe's code: its tester sockets wait for nothing past it (:class:`~udtconf.udt.peer.Wire`
raises :class:`~udtconf.udt.peer.DeadlinePassed`), no stack process is started after it, and a
watchdog stops the stack's processes when it passes. A probe that reaches its deadline fails
with a line that says so and where it was waiting: a stack that never stops sending, or never
answers, cannot hold up a run.
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

from udtharness import processes
from udtharness.ports import free_udp_port, udp_port_bound
from udtharness.stacks import Stack, stop
from udtharness.testdata import random_file

from .. import active
from ..active import Outcome, ProbeResult
from ..diagnosis import exit_text, log_crash, log_tail
from ..seq import MAX, incseq, seqoff
from .cases import CASES
from .peer import PAYLOAD, Addr, ClientSession, DeadlinePassed, ListenerSession, Wire, connect, new_socket_id
from .wire import (
    Ack,
    Ack2,
    Boundary,
    DataPacket,
    ErrorSignal,
    Handshake,
    KeepAlive,
    MsgDropRequest,
    Shutdown,
    WireError,
    encode_loss_list,
    encode_raw_control,
    peer_ip_field,
)


@dataclass
class ProbeEnv(active.ProbeEnv):
    deadline: float = float("inf")  # time.monotonic() at which the probe's time is up (run_probe)

    def wire(self, bind: Addr = ("127.0.0.1", 0)) -> Wire:
        """A tester socket whose datagrams go to the probe's pcap, and which waits for nothing
        past the probe's deadline."""
        return Wire(bind, self.recorder, deadline=self.deadline)

    def left(self) -> float:
        """Seconds to the probe's deadline; DeadlinePassed once it has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the probe's deadline passed")
        return left


Probe = active.Probe[ProbeEnv]
PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe
MULTI_CONNECTIONS = CASES["multiconnect"].clients  # server/many-connections-one-port: CONNECTIONS


class _StackServer:
    """The stack's ``server`` role on a fresh loopback port, for server-side probes: TESTCASE is
    the probe's (``transfer``: one connection, OUTPUT a file; ``multiconnect``: CONNECTIONS
    connections, OUTPUT a directory)."""

    def __init__(self, env: ProbeEnv, workdir: Path | None = None) -> None:
        env.left()  # no new stack process past the probe's deadline
        self.port = free_udp_port()
        self.addr: Addr = ("127.0.0.1", self.port)
        case = env.probe.testcase
        self.workdir = workdir or env.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        extra: dict[str, str | int | Path] = {}
        if case == "multiconnect":
            self.output = self.workdir / "output"
            self.output.mkdir(exist_ok=True)
            extra["CONNECTIONS"] = MULTI_CONNECTIONS
        else:
            self.output = self.workdir / "output.bin"
        self.proc = env.stack.start(
            "server", case, self.workdir, SERVER_ADDR="127.0.0.1", SERVER_PORT=self.port, OUTPUT=self.output, **extra
        )
        deadline = time.monotonic() + min(5.0, env.left())
        while not udp_port_bound(self.port) and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.02)
        time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout: float = 10.0) -> int | None:
        return active.ended(self.proc, timeout)

    def close(self) -> None:
        stop(self.proc)


def _exit_desc(rc: int | None) -> str:
    if rc is None:
        return "hung (killed after timeout)"
    if rc < 0 or rc >= 128:
        return f"crashed ({exit_text(rc)})"
    return f"exit {rc}"


def _serve_transfer(
    env: ProbeEnv,
    srv: _StackServer,
    payload: bytes,
    sess: ClientSession | None = None,
    wire: Wire | None = None,
    before_send: Callable[[int, bytes], None] | None = None,
    timeout: float = 20.0,
) -> tuple[bool, str]:
    """Finish a tester → stack transfer and check the stack wrote exactly ``payload``."""
    own = wire is None
    wire = wire or env.wire()
    try:
        sess = sess or connect(wire, srv.addr)
        ok = sess.send_stream(payload, before_send=before_send, timeout=timeout, alive=srv.alive)
        sess.shutdown()
        rc = srv.finish(min(timeout, 10.0))
        if not ok:
            return False, f"transfer not acknowledged; stack {_exit_desc(rc)}"
        if rc != 0:
            return False, f"stack {_exit_desc(rc)} after a complete transfer"
        got = srv.output.read_bytes() if srv.output.exists() else b""
        if got != payload:
            return False, f"stack wrote {len(got)} bytes, expected {len(payload)} — data corrupted"
        return True, f"{len(payload)} bytes delivered intact"
    finally:
        if own:
            wire.close()


ANSWERS_WINDOW = 2.0  # s: how long the tester collects answers to packets that deserve none


@probe(
    "server/malformed-then-serve",
    "2, 6.1",
    "server",
    "truncated/malformed packets and packets for unknown sockets at the listener; then a normal transfer",
)
def _malformed(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    notes = []
    try:
        w = env.wire()
        hs = Handshake(isn=5, socket_id=77, req_type=1, peer_ip=peer_ip_field("127.0.0.1"))
        junk = [
            b"",
            b"\x80",
            b"\x00" * 3,
            hs.encode()[:16],
            hs.encode()[:60],
            hs.encode() + b"\x00" * 4,
            hs.encode()[:63],
            encode_raw_control(0x7FFE, info=b"\x00" * 4),
            encode_raw_control(2, dst_id=0x7FFFFFFF, info=b"\x00" * 8),
            encode_raw_control(3, dst_id=12345, info=bytes.fromhex("80000005")),
            DataPacket(seq=1, msg_no=1, dst_id=0, payload=b"EVIL").encode(),
            DataPacket(seq=1, msg_no=1, dst_id=0xFFFFFFFF, payload=b"EVIL").encode(),
            os.urandom(1472),
        ]
        for j in junk:
            w.send(j, srv.addr)
        answers = []
        until = time.monotonic() + ANSWERS_WINDOW
        while (left := until - time.monotonic()) > 0 and (got := w.recv(min(0.3, left))) is not None:
            answers.append(got[0])
        if left <= 0:
            notes.append(f"the listener was still sending {ANSWERS_WINDOW:.0f} s after the malformed packets")
        if answers:
            notes.append(f"listener answered {len(answers)} malformed packet(s): {[type(a).__name__ for a in answers]}")
        w.close()
        if not srv.alive():
            return env.result(Outcome.FAIL, f"stack {_exit_desc(srv.proc.returncode)} after malformed packets")
        payload = os.urandom(64 * 1024)
        ok, why = _serve_transfer(env, srv, payload)
        wrong = [a for a in answers if not isinstance(a, Handshake)]
        if not ok:
            return env.result(Outcome.FAIL, why, notes)
        if wrong:
            return env.result(
                Outcome.FAIL, "listener answered a malformed/unknown packet with a non-handshake packet", notes
            )
        return env.result(Outcome.PASS, f"ignored {len(junk)} malformed packets; " + why, notes)
    finally:
        srv.close()


@probe(
    "server/cookie-flood-no-state",
    "6.1",
    "server",
    "200 first-round requests from 20 source addresses (127.0.0.2–21) that never finish the cookie "
    "round, plus a wrong cookie; the listener keeps no state and still serves a real client",
)
def _flood(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    notes: list[str] = []
    try:
        wires = [env.wire((f"127.0.0.{i + 2}", 0)) for i in range(20)]
        replies = bad = 0
        for _ in range(10):
            for w in wires:
                req = Handshake(
                    isn=random.randint(0, MAX),
                    socket_id=new_socket_id(),
                    req_type=1,
                    peer_ip=peer_ip_field("127.0.0.1"),
                )
                w.send(req, srv.addr)
            time.sleep(0.005)  # a burst per round, not one 200-packet spike into a 4.11 socket
        deadline = time.monotonic() + 1.0
        for w in wires:  # after the second, only what is queued: a stack that never stops sending is cut off
            while time.monotonic() < deadline + 1.0 and (
                (got := w.recv(max(0.0, deadline - time.monotonic()) or 0.01)) is not None
            ):
                h = got[0]
                if isinstance(h, Handshake) and h.req_type == 1 and h.dst_id == h.socket_id:
                    replies += 1
                else:
                    bad += 1
        # wrong cookie in the second round must be dropped silently (§6.1 listener rule 4)
        w = wires[0]
        w.send(
            Handshake(
                isn=1, socket_id=new_socket_id(), req_type=-1, cookie=0xDEADBEEF, peer_ip=peer_ip_field("127.0.0.1")
            ),
            srv.addr,
        )
        answered_wrong_cookie = w.recv(0.4) is not None
        for w in wires:
            w.close()
        notes.append(f"{replies}/200 cookie replies")
        if not srv.alive():
            return env.result(Outcome.FAIL, f"stack {_exit_desc(srv.proc.returncode)} under the handshake flood", notes)
        ok, why = _serve_transfer(env, srv, os.urandom(32 * 1024))
        if not ok:
            return env.result(Outcome.FAIL, "after the flood: " + why, notes)
        if answered_wrong_cookie:
            return env.result(Outcome.FAIL, "listener answered a second-round request with a wrong cookie", notes)
        if bad:
            return env.result(Outcome.FAIL, f"{bad} non-cookie replies to first-round requests", notes)
        if replies < 190:
            notes.append("some cookie replies missing (UDP on a loaded host)")
        return env.result(Outcome.PASS, "no state before the cookie round; " + why, notes)
    finally:
        srv.close()


@probe(
    "server/replayed-handshake",
    "6.1",
    "server",
    "replay the cookie-bearing request of a live connection: the listener re-sends the response of the "
    "existing connection (same socket ID) and does not open a second one",
)
def _replay(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w = env.wire()
        sess = connect(w, srv.addr)
        sess.pump(0.05)
        w.send(sess.request, srv.addr)
        resp = None
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            got = w.recv(deadline - time.monotonic())
            if got and isinstance(got[0], Handshake):
                resp = got[0]
                break
            if got:
                sess.handle(got[0], {})
        notes = []
        if resp is None:
            notes.append("no answer to the replayed request")
        ok, why = _serve_transfer(env, srv, os.urandom(32 * 1024), sess=sess, wire=w)
        w.close()
        if not ok:
            return env.result(Outcome.FAIL, "after the replay: " + why, notes)
        if resp is not None and resp.socket_id != sess.peer_id:
            return env.result(
                Outcome.FAIL, f"replayed request got a new socket ID {resp.socket_id:#x} (was {sess.peer_id:#x})", notes
            )
        if resp is not None:
            notes.append(
                f"response FFS {resp.flight_flag_size} (4.11: UDT_FC = 25600 on a repeat), "
                f"ISN echoed: {resp.isn == sess.isn}"
            )
        return env.result(Outcome.PASS, "replay answered from the existing connection; " + why, notes)
    finally:
        srv.close()


@probe(
    "server/wrong-socket-id",
    "3.3",
    "server",
    "data with a wrong destination socket ID, and with the right ID from a different source port, is "
    "dropped: the stack's output must not contain it",
)
def _wrong_id(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w, intruder = env.wire(), env.wire()
        sess = connect(w, srv.addr)

        def inject(seq: int, chunk: bytes) -> None:
            evil = b"EVIL" * (len(chunk) // 4) + b"E" * (len(chunk) % 4)
            w.send(replace(sess.data(seq, evil), dst_id=sess.peer_id ^ 0x1), srv.addr)
            intruder.send(sess.data(seq, evil), srv.addr)

        payload = os.urandom(16 * PAYLOAD)
        ok, why = _serve_transfer(env, srv, payload, sess=sess, wire=w, before_send=inject)
        intruder.close()
        w.close()
        return env.result(Outcome.PASS if ok else Outcome.FAIL, why)
    finally:
        srv.close()


@probe(
    "server/many-connections-one-port",
    "3.3, 6.1",
    "server",
    "three tester connections at once to the stack's one listening port (TESTCASE=multiconnect, "
    "CONNECTIONS=3): each is accepted with its own socket ID and served to the end, and each "
    "connection's bytes arrive intact in their own output file",
    testcase="multiconnect",
)
def _many(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    wires = [env.wire() for _ in range(MULTI_CONNECTIONS)]
    try:
        sessions: list[ClientSession] = []
        rejected = 0
        for w in wires:
            try:
                sessions.append(connect(w, srv.addr))
            except ConnectionError:
                rejected += 1
        ids = {s.peer_id for s in sessions}
        payloads = [os.urandom(24 * PAYLOAD) for _ in sessions]
        acked = [s.send_stream(p, timeout=10.0) for s, p in zip(sessions, payloads, strict=True)]
        for s in sessions:
            s.shutdown()
        rc = srv.finish()
        files = sorted(p for p in srv.output.iterdir() if p.is_file())
        got = sorted(p.read_bytes() for p in files)
        notes = [
            f"{len(sessions)} accepted (socket IDs {[hex(i) for i in ids]}), {rejected} rejected with 1002",
            f"acknowledged: {acked}",
            f"output files: {[(p.name, p.stat().st_size) for p in files]}",
            f"stack {_exit_desc(rc)}",
        ]
        if len(sessions) < MULTI_CONNECTIONS:
            return env.result(
                Outcome.FAIL, f"{len(sessions)} of {MULTI_CONNECTIONS} connections accepted with CONNECTIONS=3", notes
            )
        if len(ids) != len(sessions):
            return env.result(Outcome.FAIL, "connections from different ports share a socket ID", notes)
        if not all(acked):
            return env.result(
                Outcome.FAIL, "an accepted connection on the shared port was not served to the end", notes
            )
        if got != sorted(payloads):
            return env.result(
                Outcome.FAIL,
                f"the {len(files)} output files do not match the {len(payloads)} connections' bytes: mixed or lost",
                notes,
            )
        if rc != 0:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)}", notes)
        return env.result(Outcome.PASS, f"{len(sessions)} connections served on one port, each delivered intact", notes)
    except TimeoutError as e:
        return env.result(Outcome.FAIL, f"a connection attempt got no answer at all: {e}")
    finally:
        for w in wires:
            w.close()
        srv.close()


@probe(
    "server/silence-keepalive",
    "9.4",
    "server",
    "the tester goes silent mid-connection for 2.5 s: the stack (nothing to send) emits keep-alives on its "
    "EXP timer, ≥ 300 ms apart, and the connection survives",
)
def _silence_server(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w = env.wire()
        sess = connect(w, srv.addr)
        first = os.urandom(8 * PAYLOAD)
        chunks = [first[i : i + PAYLOAD] for i in range(0, len(first), PAYLOAD)]
        sent = {}
        for c in chunks:
            sent[sess.next_seq] = c
            w.send(sess.data(sess.next_seq, c), srv.addr)
            sess.next_seq = incseq(sess.next_seq)
        sess.pump(0.3, sent)
        t0 = time.monotonic()
        kas: list[float] = []
        while time.monotonic() - t0 < 2.5:  # silent: read only
            got = w.recv(2.5 - (time.monotonic() - t0))
            if got and isinstance(got[0], KeepAlive):
                kas.append(time.monotonic() - t0)
        rest = os.urandom(8 * PAYLOAD)
        # the stack may still be waiting for ACK2s etc.; resume and finish
        sess.last_ack = sess.next_seq if sess.last_ack != sess.next_seq else sess.last_ack
        ok, why = _serve_transfer(env, srv, first + rest, sess=_resume(sess, first, rest), wire=w)
        w.close()
        notes = [f"keep-alives at {[round(k, 3) for k in kas]} s"]
        if not ok:
            return env.result(Outcome.FAIL, "after 2.5 s of silence: " + why, notes)
        if not kas:
            return env.result(Outcome.FAIL, "no keep-alive during 2.5 s of peer silence (EXP §9.4)", notes)
        gaps = [b - a for a, b in pairwise(kas)]
        if kas[0] > 1.5 or any(g < 0.25 for g in gaps):
            return env.result(
                Outcome.FAIL, "keep-alive cadence outside EXP rules (first ≤ 1.5 s, then ≥ 300 ms apart)", notes
            )
        return env.result(Outcome.PASS, f"{len(kas)} keep-alives during silence; " + why, notes)
    finally:
        srv.close()


def _resume(sess: ClientSession, first: bytes, rest: bytes) -> ClientSession:
    """Continue a session whose first part was sent by hand: re-send from ISN (duplicates are fine)."""
    sess.next_seq = sess.isn
    sess.last_ack = sess.isn
    return sess


class _StackClient:
    """The stack's ``client`` role sending INPUT to the tester's listener."""

    def __init__(
        self, env: ProbeEnv, size: int = 400 * PAYLOAD, workdir: Path | None = None, lst: ListenerSession | None = None
    ) -> None:
        env.left()  # no new stack process past the probe's deadline
        self.wire = lst.wire if lst else env.wire()
        self.workdir = workdir or env.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.input = self.workdir / "input.bin"
        random_file(self.input, size, seed=env.probe.id)
        self.payload = self.input.read_bytes()
        self.proc = env.stack.start(
            "client",
            env.probe.testcase,
            self.workdir,
            SERVER_ADDR="127.0.0.1",
            SERVER_PORT=self.wire.addr[1],
            INPUT=self.input,
        )
        self.lst = lst or ListenerSession(self.wire)

    def finish(self, timeout: float = 15.0) -> int | None:
        """Keep receiving and ACKing until the stack exits (or timeout)."""
        deadline = time.monotonic() + timeout
        self.lst.hold_acks = False
        while time.monotonic() < deadline and self.proc.poll() is None:
            self.lst.run(0.1)
        self.lst.run(0.1)
        if self.proc.poll() is None:
            stop(self.proc)
            return None
        return self.proc.returncode

    def close(self) -> None:
        stop(self.proc)
        self.wire.close()


def _crafted_nak_probe(
    env: ProbeEnv,
    make_words: Callable[[ListenerSession], list[int]],
    allow_break: bool,
    expect_retx: Callable[[ListenerSession], set[int]] | None = None,
    settle: float = 0.2,
) -> ProbeResult:
    cl = _StackClient(env)
    try:
        lst = cl.lst
        lst.hold_first_window(settle)
        if len(lst.received) < 16:
            return env.result(Outcome.FAIL, f"stack sent only {len(lst.received)} packets before the NAK")
        words = make_words(lst)
        n_before = len(lst.arrivals)
        lst.nak(words)
        lst.run(0.5)
        retx = [s for _, s in lst.arrivals[n_before:]]
        notes = [f"NAK words {[hex(w & 0xFFFFFFFF) for w in words]}", f"{len(retx)} data packets in the next 0.5 s"]
        if expect_retx is not None:
            want = expect_retx(lst)
            missing = want - set(retx)
            notes.append(f"retransmitted {len(want) - len(missing)}/{len(want)} NAKed packets")
        rc = cl.finish()
        got = lst.stream()
        intact = got == cl.payload[: len(got)]
        complete = rc == 0 and got == cl.payload
        notes.append(f"stack {_exit_desc(rc)}, received {len(got)}/{len(cl.payload)} bytes in order")
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)}", notes)
        if not intact:
            return env.result(Outcome.FAIL, "delivered bytes differ from the input — corruption", notes)
        if expect_retx is not None and missing:
            return env.result(Outcome.FAIL, f"{len(missing)} NAKed packet(s) not retransmitted within 0.5 s", notes)
        if complete:
            return env.result(
                Outcome.TOLERATED if allow_break else Outcome.PASS, "transfer completed after the NAK", notes
            )
        if allow_break:
            return env.result(Outcome.BROKEN, "the stack dropped the connection (allowed: 4.11 marks it broken)", notes)
        return env.result(Outcome.FAIL, "transfer did not complete after a valid NAK", notes)
    finally:
        cl.close()


@probe(
    "client/nak-valid-mixed",
    "5.4, 8.7",
    "client",
    "a valid NAK mixing singles and ranges ({3, 6..10, 13}): exactly those packets are retransmitted",
)
def _nak_mixed(env: ProbeEnv) -> ProbeResult:
    def lost(listener: ListenerSession) -> set[int]:
        return {incseq(listener.isn, o) for o in (3, 6, 7, 8, 9, 10, 13)}

    return _crafted_nak_probe(
        env,
        lambda listener: encode_loss_list(sorted(lost(listener), key=lambda s: seqoff(listener.isn, s))),
        allow_break=False,
        expect_retx=lost,
    )


@probe(
    "client/early-nak",
    "8.7, 16",
    "client",
    "a valid NAK as soon as the first 16 packets arrived (a few ms after the handshake) is acted on: the "
    "NAKed packet is retransmitted within 0.5 s",
)
def _nak_early(env: ProbeEnv) -> ProbeResult:
    return _crafted_nak_probe(
        env,
        lambda listener: [incseq(listener.isn, 3)],
        allow_break=False,
        expect_retx=lambda listener: {incseq(listener.isn, 3)},
        settle=0.0,
    )


@probe("client/nak-duplicates", "5.4", "client", "a NAK listing the same number three times, sent three times")
def _nak_dup(env: ProbeEnv) -> ProbeResult:
    return _crafted_nak_probe(
        env,
        lambda listener: [incseq(listener.isn, 3)] * 3,
        allow_break=False,
        expect_retx=lambda listener: {incseq(listener.isn, 3)},
    )


@probe(
    "client/nak-start-after-end",
    "5.4",
    "client",
    "a NAK range whose start is after its end: 4.11 marks the connection broken; must not crash or corrupt",
)
def _nak_inverted(env: ProbeEnv) -> ProbeResult:
    return _crafted_nak_probe(
        env, lambda listener: [incseq(listener.isn, 10) | 0x80000000, incseq(listener.isn, 5)], allow_break=True
    )


@probe(
    "client/nak-beyond-sent",
    "5.4",
    "client",
    "a NAK for a number the sender never sent: 4.11 marks the connection broken",
)
def _nak_beyond(env: ProbeEnv) -> ProbeResult:
    return _crafted_nak_probe(env, lambda listener: [incseq(listener.top or listener.isn, 5000)], allow_break=True)


@probe(
    "client/nak-trailing-range-start",
    "5.4",
    "client",
    "a NAK ending in a range-start word (4.11 reads past the end): must not crash or corrupt",
)
def _nak_trailing(env: ProbeEnv) -> ProbeResult:
    return _crafted_nak_probe(
        env, lambda listener: [incseq(listener.isn, 2), incseq(listener.isn, 4) | 0x80000000], allow_break=True
    )


@probe(
    "client/ack-beyond-sent",
    "8.6",
    "client",
    "a full ACK acknowledging data never sent: 4.11 marks the connection broken; must not report success",
)
def _ack_beyond(env: ProbeEnv) -> ProbeResult:
    cl = _StackClient(env)
    try:
        lst = cl.lst
        lst.hold_first_window()
        assert lst.peer
        bogus = incseq(lst.top or lst.isn, 100_000)
        lst.wire.send(
            Ack(
                dst_id=lst.peer_id,
                ack_seq_no=1,
                ack_no=bogus,
                rtt=10_000,
                rtt_var=5_000,
                avail_buffer=8192,
                arrival_speed=1000,
                link_capacity=1000,
            ),
            lst.peer,
        )
        lst.ack_sub = 1
        rc = cl.finish()
        got = lst.stream()
        notes = [f"stack {_exit_desc(rc)}, received {len(got)}/{len(cl.payload)} bytes"]
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)}", notes)
        if rc == 0 and got != cl.payload:
            return env.result(
                Outcome.FAIL, "sender reported success although the data never arrived (a bogus ACK released it)", notes
            )
        if rc == 0:
            return env.result(Outcome.TOLERATED, "bogus ACK ignored, transfer completed", notes)
        return env.result(Outcome.BROKEN, "connection broken as 4.11 does", notes)
    finally:
        cl.close()


@probe(
    "client/medium-ack",
    "5.3, 8.6",
    "client",
    "after the first window the tester answers only with medium (16-byte: ACK number, RTT, RTT variance, "
    "available buffer) ACKs for up to 1 s, then full ACKs: the sender must not crash, must advance on the "
    "medium ACKs (new data beyond the window) and must complete the transfer intact on the later full ACKs",
)
def _medium_ack(env: ProbeEnv) -> ProbeResult:
    cl = _StackClient(env)
    try:
        lst = cl.lst
        lst.hold_first_window()
        if not lst.received:
            return env.result(Outcome.FAIL, "stack sent no data")
        n_before, ack_before, top_before = len(lst.received), lst.ack_no, lst.top
        ack2_before = sum(1 for _, _, p in lst.wire.log if isinstance(p, Ack2))
        lst.medium_acks, lst.hold_acks = True, False
        lst.run(1.0, until=lambda: len(lst.received) >= n_before + 128 or cl.proc.poll() is not None)
        lst.medium_acks = False
        n_medium = lst.ack_sub
        gained = len(lst.received) - n_before
        ack2s = sum(1 for _, _, p in lst.wire.log if isinstance(p, Ack2)) - ack2_before
        alive = cl.proc.poll() is None
        rc = cl.finish()
        got = lst.stream()
        notes = [
            f"{n_before} packets before the first ACK (top {top_before if top_before is None else hex(top_before)}, "
            f"ACK number {ack_before:#x})",
            f"{n_medium} medium ACKs: {gained} new packets, {ack2s} ACK2s in reply",
            f"stack {'alive' if alive else 'exited'} after the medium ACKs; {_exit_desc(rc)} at the end, "
            f"received {len(got)}/{len(cl.payload)} bytes in order",
        ]
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)}", notes)
        if got != cl.payload[: len(got)]:
            return env.result(Outcome.FAIL, "delivered bytes differ from the input — corruption", notes)
        if gained == 0:
            return env.result(
                Outcome.FAIL, "no new data while medium ACKs released the window: medium ACKs ignored", notes
            )
        if rc != 0 or got != cl.payload:
            return env.result(Outcome.FAIL, "transfer did not complete on the full ACKs that followed", notes)
        return env.result(Outcome.PASS, "medium ACKs advanced the sender; transfer completed on later full ACKs", notes)
    finally:
        cl.close()


@probe(
    "client/silence-exp-retransmit",
    "9.4",
    "client",
    "the tester receives data but never ACKs for 2 s: the sender's EXP timer retransmits the unacknowledged "
    "packets (first within 2 s), then the transfer completes when ACKs resume",
)
def _silence_client(env: ProbeEnv) -> ProbeResult:
    cl = _StackClient(env)
    try:
        lst = cl.lst
        lst.accept()
        lst.hold_acks = True
        t0 = time.monotonic()
        lst.run(2.0)
        first_pass = {}
        retx_times = []
        for t, s in lst.arrivals:
            if s in first_pass:
                retx_times.append(t - t0)
            else:
                first_pass[s] = t
        rc = cl.finish()
        got = lst.stream()
        notes = [
            f"{len(first_pass)} new packets, {len(retx_times)} retransmissions during silence, first at "
            f"{round(retx_times[0], 3) if retx_times else None} s",
            f"stack {_exit_desc(rc)}",
        ]
        if rc != 0 or got != cl.payload:
            return env.result(
                Outcome.FAIL, f"transfer did not complete after the silence: {_exit_desc(rc)}, {len(got)} bytes", notes
            )
        if not retx_times:
            return env.result(Outcome.FAIL, "no retransmission during 2 s without any ACK (EXP §9.4)", notes)
        return env.result(Outcome.PASS, "EXP retransmitted and the transfer completed", notes)
    finally:
        cl.close()


# ---------------------------------------------------------------------------------------------
# Hostile peers (issue 14): message drop requests, a completed-handshake flood, absurd handshake
# fields, an error signal among several connections


@probe(
    "server/msg-drop-stream-hole",
    "5.8",
    "server",
    "a message drop request (type 7) in a live STREAM transfer for 10 packets the tester never sent, "
    "which it then holds back 0.5 s more: a STREAM receiver ignores it (§5.8 TC), so it NAKs them "
    "again and every byte arrives, no hole",
)
def _drop_stream_hole(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w = env.wire()
        sess = connect(w, srv.addr)
        first, last = incseq(sess.isn, 10), incseq(sess.isn, 19)
        sess.withheld = {incseq(sess.isn, k) for k in range(10, 20)}
        sess.withhold_until = float("inf")

        def inject(seq: int, chunk: bytes) -> None:
            if seq == incseq(sess.isn, 24):  # 20..23 arrived: the receiver has seen the gap
                w.send(MsgDropRequest(dst_id=sess.peer_id, msg_no=1, first_seq=first, last_seq=last), srv.addr)
                sess.withhold_until = time.monotonic() + 0.5

        payload = os.urandom(64 * PAYLOAD)
        ok, why = _serve_transfer(env, srv, payload, sess=sess, wire=w, before_send=inject, timeout=8.0)
        w.close()
        notes = [f"drop request msg 1, [{first:#x}, {last:#x}] (ISN + 10 … 19, never sent)"]
        if not ok:
            return env.result(Outcome.FAIL, "after a drop request on a STREAM: " + why, notes)
        return env.result(Outcome.PASS, "drop request ignored on a STREAM; " + why, notes)
    finally:
        srv.close()


@probe(
    "server/msg-drop-stream-unsent",
    "5.8",
    "server",
    "a message drop request in a live STREAM transfer naming 64 numbers not yet sent (the next ones): "
    "their real packets must still be delivered — no hang, the output byte-exact",
)
def _drop_stream_unsent(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w = env.wire()
        sess = connect(w, srv.addr)
        first, last = incseq(sess.isn, 16), incseq(sess.isn, 79)

        def inject(seq: int, chunk: bytes) -> None:
            if seq == first:
                w.send(MsgDropRequest(dst_id=sess.peer_id, msg_no=1, first_seq=first, last_seq=last), srv.addr)
                sess.pump(0.05)  # let an ACK past the named range, if any, reach us first

        payload = os.urandom(128 * PAYLOAD)
        ok, why = _serve_transfer(env, srv, payload, sess=sess, wire=w, before_send=inject, timeout=8.0)
        w.close()
        notes = [f"drop request msg 1, [{first:#x}, {last:#x}] (ISN + 16 … 79) before ISN + 16 was sent"]
        if not ok:
            return env.result(Outcome.FAIL, "after a drop request for unsent numbers: " + why, notes)
        return env.result(Outcome.PASS, "drop request for unsent numbers ignored; " + why, notes)
    finally:
        srv.close()


def _whole_messages(got: bytes, messages: list[bytes]) -> list[int] | None:
    """Which of ``messages`` (in order, each whole) ``got`` is made of; None if it is not."""
    pos, found = 0, []
    for i, m in enumerate(messages):
        if got.startswith(m, pos):
            pos += len(m)
            found.append(i + 1)
    return found if pos == len(got) else None


@probe(
    "server/msg-drop-dgram",
    "5.8",
    "server",
    "DGRAM: a drop request for a 3-packet message whose middle packet was withheld (the §5.8 shape), "
    "then absurd ones (last before first; [ISN, ISN + 2^30]; [0, 2^31 − 1] for message 2^29 − 1): "
    "no crash, no hang, and the output is whole messages in order",
    testcase="dgram",
)
def _drop_dgram(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    try:
        w = env.wire()
        sess = connect(w, srv.addr, sock_type=2)
        isn = sess.isn
        # message 1: 1 packet; 2: 3 packets (the middle one withheld); 3..8: 1 packet each
        shape = [(1, Boundary.SOLO), (2, Boundary.FIRST), (2, Boundary.MIDDLE), (2, Boundary.LAST)]
        shape += [(m, Boundary.SOLO) for m in range(3, 9)]
        sess.framing = {incseq(isn, k): f for k, f in enumerate(shape)}
        chunks = [os.urandom(PAYLOAD) for _ in shape]
        messages = [chunks[0], b"".join(chunks[1:4]), *chunks[4:]]
        sess.withheld, sess.withhold_until = {incseq(isn, 2)}, float("inf")
        drops = {
            4: [MsgDropRequest(dst_id=sess.peer_id, msg_no=2, first_seq=incseq(isn, 1), last_seq=incseq(isn, 3))],
            6: [
                MsgDropRequest(dst_id=sess.peer_id, msg_no=5, first_seq=incseq(isn, 8), last_seq=incseq(isn, 6)),
                MsgDropRequest(dst_id=sess.peer_id, msg_no=6, first_seq=isn, last_seq=incseq(isn, 1 << 30)),
                MsgDropRequest(dst_id=sess.peer_id, msg_no=(1 << 29) - 1, first_seq=0, last_seq=MAX),
            ],
        }

        def inject(seq: int, chunk: bytes) -> None:
            for d in drops.get(seqoff(isn, seq), []):
                w.send(d, srv.addr)
            if seqoff(isn, seq) == 4:
                sess.withhold_until = time.monotonic() + 0.5

        acked = sess.send_stream(b"".join(chunks), timeout=3.0, before_send=inject, alive=srv.alive)
        sess.shutdown()
        rc = srv.finish(5.0)
        w.close()
        got = srv.output.read_bytes() if srv.output.exists() else b""
        whole = _whole_messages(got, messages)
        notes = [
            "drop requests: msg 2 [ISN+1, ISN+3]; msg 5 [ISN+8, ISN+6]; msg 6 [ISN, ISN+2^30]; msg 2^29−1 [0, 2^31−1]",
            f"all sent data acknowledged: {acked}; stack {_exit_desc(rc)}",
            f"output {len(got)} bytes: messages {whole if whole is not None else 'not whole'}",
        ]
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)} after DGRAM drop requests", notes)
        if whole is None:
            return env.result(
                Outcome.FAIL, "the output is not whole messages in order: a partial or corrupt message", notes
            )
        return env.result(
            Outcome.PASS, f"no crash or hang; {len(whole)} of {len(messages)} messages delivered whole", notes
        )
    finally:
        srv.close()


def _tree_rss_kib(pid: int) -> int:
    """Resident memory (VmRSS) of ``pid`` and its descendants, in KiB (0 once gone)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


FLOOD_CLIENTS = 1000  # completed handshakes, from 10 source addresses
FLOOD_BACKLOG = 1  # the backlog of a single-connection receiver (TESTCASE=transfer), as UDT::listen(1)
FLOOD_RSS_GROWTH_KIB = 32 * 1024


@probe(
    "server/completed-handshake-flood",
    "6.1",
    "server",
    f"{FLOOD_CLIENTS} clients from 10 addresses complete the cookie round against a single-connection "
    f"receiver: at most backlog + 1 = {FLOOD_BACKLOG + 1} are accepted, the rest rejected (1002, listener "
    f"rule 7), and its resident memory grows by less than {FLOOD_RSS_GROWTH_KIB // 1024} MiB (two "
    "connections' state and slack; a listener accepting every one holds ~280 KiB each, ~280 MB)",
)
def _completed_flood(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    wires = [env.wire((f"127.0.0.{i + 2}", 0)) for i in range(10)]
    try:
        rss0 = _tree_rss_kib(srv.proc.pid)
        t0 = time.monotonic()
        cookies: dict[int, int] = {}
        for _ in range(3):  # the cookie: one per source address
            for i, w in enumerate(wires):
                if i not in cookies:
                    w.send(
                        Handshake(isn=1, socket_id=new_socket_id(), req_type=1, peer_ip=peer_ip_field("127.0.0.1")),
                        srv.addr,
                    )
            for i, w in enumerate(wires):
                until = time.monotonic() + 0.5  # the reply, not whatever else the stack keeps sending
                while i not in cookies and time.monotonic() < until and (got := w.recv(0.2)) is not None:
                    if isinstance(got[0], Handshake) and got[0].req_type == 1:
                        cookies[i] = got[0].cookie
        if len(cookies) < len(wires):
            return env.result(Outcome.FAIL, f"only {len(cookies)} of {len(wires)} addresses got a cookie reply")
        per = FLOOD_CLIENTS // len(wires)
        clients = [[(new_socket_id(), random.randint(0, MAX)) for _ in range(per)] for _ in wires]
        answers: dict[int, Handshake] = {}  # client socket ID → the listener's final answer
        owner = {sid: w for w, cs in zip(wires, clients, strict=True) for sid, _ in cs}

        def drain(w: Wire, wait: float) -> None:
            """The answers queued on ``w``, for at most 10 × ``wait`` (a stack that never stops
            sending is cut off; what is left is read by the next drain)."""
            until = time.monotonic() + 10 * wait
            while time.monotonic() < until and (got := w.recv(wait)) is not None:
                h = got[0]
                if isinstance(h, Handshake) and h.req_type in (-1, 1002) and h.dst_id not in answers:
                    answers[h.dst_id] = h

        for _ in range(2):  # a second pass for what UDP lost on the way (the same request: rule 6)
            for i, w in enumerate(wires):
                for k, (sid, isn) in enumerate(clients[i]):
                    if sid in answers:
                        continue
                    req = Handshake(isn=isn, socket_id=sid, req_type=-1, cookie=cookies[i])
                    w.send(replace(req, peer_ip=peer_ip_field("127.0.0.1")), srv.addr)
                    if k % 25 == 24:
                        drain(w, 0.002)
                drain(w, 0.002)
            for w in wires:
                drain(w, 0.05)
        flood_s = time.monotonic() - t0
        time.sleep(0.3)
        rss1 = _tree_rss_kib(srv.proc.pid)
        alive = srv.alive()
        accepted = [h for h in answers.values() if h.req_type == -1]
        rejected = sum(1 for h in answers.values() if h.req_type == 1002)
        for h in accepted:  # close what was accepted, so that the receiver can end
            owner[h.dst_id].send(Shutdown(dst_id=h.socket_id), srv.addr)
        rc = srv.finish(5.0) if alive else srv.proc.returncode
        grew = rss1 - rss0
        notes = [
            f"{len(accepted)} accepted, {rejected} rejected (1002), "
            f"{FLOOD_CLIENTS - len(answers)} unanswered, in {flood_s:.1f} s",
            f"VmRSS {rss0} KiB before, {rss1} KiB after ({grew:+} KiB)",
            f"stack {'alive' if alive else 'dead'} after the flood; {_exit_desc(rc)} after shutting the accepted down",
        ]
        if not alive:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)} under the completed-handshake flood", notes)
        if len(accepted) > FLOOD_BACKLOG + 1:
            return env.result(
                Outcome.FAIL,
                f"{len(accepted)} connections accepted with backlog {FLOOD_BACKLOG} (rule 7: reject 1002)",
                notes,
            )
        if grew > FLOOD_RSS_GROWTH_KIB:
            return env.result(Outcome.FAIL, f"resident memory grew by {grew // 1024} MiB under the flood", notes)
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)} after the flood", notes)
        return env.result(Outcome.PASS, f"{len(accepted)} accepted, {rejected} rejected, memory {grew:+} KiB", notes)
    finally:
        for w in wires:
            w.close()
        srv.close()


ABSURD_HANDSHAKES = [  # label, MSS, flight flag size
    ("MSS 0", 0, 8192),
    ("MSS 1", 1, 8192),
    ("MSS 0xFFFFFFFF", 0xFFFFFFFF, 8192),
    ("FFS 0", 1500, 0),
    ("FFS 2^31", 1500, 1 << 31),
    ("FFS 0xFFFFFFFF", 1500, 0xFFFFFFFF),
]
MIN_MSS = 76  # the smallest MSS UDT_MSS allows (§13); a listener rejects less (§6.1 TC)


def _slug(label: str) -> str:
    return label.lower().replace(" ", "-").replace("^", "")


def _answers_past_the_cookie(w: Wire) -> str:
    """What the stack sent ``w`` beyond cookie replies and rejections, in words ("" if nothing):
    undecodable packets (with the first one's fault) and decodable ones by type."""
    undecodable = [p for _, _, p in w.log if isinstance(p, WireError)]
    kinds: dict[str, int] = {}
    for _, _, p in w.log:
        if isinstance(p, Handshake) and p.req_type in (1, 1002):
            continue
        if not isinstance(p, WireError):
            kinds[type(p).__name__] = kinds.get(type(p).__name__, 0) + 1
    parts = [f"{len(undecodable)} undecodable packet(s) ({undecodable[0]})"] if undecodable else []
    parts += [f"{n} × {kind}" for kind, n in kinds.items()]
    return ", ".join(parts)


def _stack_crash(rc: int | None, log: Path) -> str:
    line = log_crash(log)
    return f"{_exit_desc(rc)}" + (f" ({line})" if line else "")


@probe(
    "server/handshake-absurd-mss-ffs",
    "6.1, 13",
    "server",
    "handshake requests with MSS 0, 1, 0xFFFFFFFF and flight flag size 0, 2^31, 0xFFFFFFFF at the "
    "listener: no crash; an MSS below 76 is rejected (1002, §6.1 TC) or goes unanswered (an answer the "
    "tester cannot decode, or ACKs without a response, take it); one that is accepted answers MSS ≤ 1500 "
    "and transfers 16 KiB intact",
)
def _absurd_server(env: ProbeEnv) -> ProbeResult:
    srv: _StackServer | None = None
    outcomes, failures = [], []
    try:
        for label, mss, ffs in ABSURD_HANDSHAKES:
            if srv is None or not srv.alive():
                srv = _StackServer(env, env.workdir / _slug(label))
            w = env.wire()
            try:
                sess = connect(w, srv.addr, timeout=1.5, mss=mss, ffs=ffs, alive=srv.alive)
            except (ConnectionError, TimeoutError) as e:
                until = time.monotonic() + (0.3 if isinstance(e, TimeoutError) else 0.0)
                while (left := until - time.monotonic()) > 0:
                    w.recv(left)  # what it goes on sending, if anything: ACKs of a connection it took
                answered = _answers_past_the_cookie(w)
                w.close()
                time.sleep(0.1)
                if not srv.alive():
                    outcomes.append(f"{label}: stack {_stack_crash(srv.proc.returncode, srv.workdir / 'server.log')}")
                    failures.append(f"{label}: crashed")
                elif isinstance(e, ConnectionError):
                    outcomes.append(f"{label}: rejected (1002)")
                elif answered:
                    # an answer the tester cannot take is still an answer: the stack took the request
                    took = f"accepted (MSS below {MIN_MSS}): " if mss < MIN_MSS else ""
                    outcomes.append(f"{label}: answered with {answered}, no response the tester could decode")
                    failures.append(f"{label}: {took}answered with {answered}, no decodable response (§5.1, §6.1)")
                    srv.close()  # the next value meets a fresh listener, not this connection
                else:
                    outcomes.append(f"{label}: no answer")
                continue
            if mss < MIN_MSS:
                failures.append(f"{label}: accepted (MSS below {MIN_MSS})")
            ok, why = _serve_transfer(env, srv, os.urandom(16 * 1024), sess=sess, wire=w, timeout=5.0)
            w.close()
            r = sess.response
            outcomes.append(f"{label}: accepted, response MSS {r.mss}, FFS {r.flight_flag_size}; {why}")
            if not ok:
                failures.append(f"{label}: {why}; {_stack_crash(srv.proc.returncode, srv.workdir / 'server.log')}")
            elif r.mss > 1500:
                failures.append(f"{label}: response MSS {r.mss} > the listener's 1500")
            srv.close()
        if failures:
            return env.result(Outcome.FAIL, "; ".join(failures), outcomes)
        return env.result(Outcome.PASS, "no crash; every absurd handshake rejected or served", outcomes)
    finally:
        if srv:
            srv.close()


@probe(
    "client/handshake-absurd-mss-ffs",
    "6.1, 13",
    "client",
    "the tester's listener answers the stack's request with MSS 0, 1, 0xFFFFFFFF or flight flag size 0, "
    "2^31, 0xFFFFFFFF (a fresh client each): no crash, no hang; the client gives up with an error or "
    "sends 32 packets' worth intact, no payload above 1456 bytes",
)
def _absurd_client(env: ProbeEnv) -> ProbeResult:
    outcomes, failures = [], []
    for label, mss, ffs in ABSURD_HANDSHAKES:
        lst = ListenerSession(env.wire(), resp_mss=mss, resp_ffs=ffs)
        cl = _StackClient(env, 32 * PAYLOAD, workdir=env.workdir / _slug(label), lst=lst)
        try:
            try:
                lst.accept(timeout=3.0)
            except TimeoutError:
                rc = active.ended(cl.proc, 1.0)
                outcomes.append(f"{label}: the stack never completed its request; {_exit_desc(rc)}")
                if rc is None or rc < 0 or rc >= 128:
                    failures.append(f"{label}: {_exit_desc(rc)}")
                continue
            rc = cl.finish(timeout=3.0)
            got = lst.stream()
            biggest = max((len(p) for p in lst.received.values()), default=0)
            outcome = f"{label}: {_stack_crash(rc, cl.workdir / 'client.log')}, {len(got)}/{len(cl.payload)} bytes"
            outcomes.append(outcome + f", largest payload {biggest}")
            if rc is None or rc < 0 or rc >= 128:
                failures.append(outcome)
            elif got != cl.payload[: len(got)]:
                failures.append(f"{label}: delivered bytes differ from the input")
            elif rc == 0 and got != cl.payload:
                failures.append(f"{label}: exit 0 with {len(got)} of {len(cl.payload)} bytes delivered")
            elif biggest > PAYLOAD:
                failures.append(f"{label}: a {biggest}-byte payload above the 1500-byte MSS's {PAYLOAD}")
        finally:
            cl.close()
    if failures:
        return env.result(Outcome.FAIL, "; ".join(failures), outcomes)
    return env.result(Outcome.PASS, "no crash or hang; each absurd response refused or served intact", outcomes)


@probe(
    "server/error-signal-among-three",
    "5.9, 3.3",
    "server",
    "three connections to one port (TESTCASE=multiconnect, CONNECTIONS=3); the second sends half its "
    "data, an error signal (type 8, code 4000) and a shutdown: the other two are served to the end "
    "intact; the receiver then exits non-zero (reported) — exit 0 is recorded as tolerated",
    testcase="multiconnect",
)
def _error_among_three(env: ProbeEnv) -> ProbeResult:
    srv = _StackServer(env)
    wires = [env.wire() for _ in range(MULTI_CONNECTIONS)]
    try:
        sessions = [connect(w, srv.addr, alive=srv.alive) for w in wires]
        payloads = [os.urandom(24 * PAYLOAD) for _ in sessions]
        acked = []
        for k, (s, p) in enumerate(zip(sessions, payloads, strict=True)):
            if k == 1:
                acked.append(s.send_stream(p[: len(p) // 2], timeout=5.0))
                s.wire.send(ErrorSignal(dst_id=s.peer_id, addl=4000), s.server)
                s.pump(0.05)
            else:
                acked.append(s.send_stream(p, timeout=5.0))
            s.shutdown()
        rc = srv.finish(8.0)
        files = sorted(p for p in srv.output.iterdir() if p.is_file())
        contents = {p.read_bytes() for p in files}
        served = [payloads[k] in contents for k in (0, 2)]
        log = "\n".join(log_tail(srv.workdir / "server.log", 20))
        notes = [
            f"acknowledged: {acked} (the second only its first half)",
            f"output files: {[(p.name, p.stat().st_size) for p in files]}",
            f"stack {_exit_desc(rc)}",
        ]
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"stack {_exit_desc(rc)} after an error signal on one connection", notes)
        if not (acked[0] and acked[2] and all(served)):
            return env.result(Outcome.FAIL, "an error signal on one connection cost the others their data", notes)
        if rc == 0:
            return env.result(
                Outcome.TOLERATED, "the others were served; the error signal went unreported (exit 0)", notes
            )
        named = "connection 2" in log
        notes.append(f"the log names the connection: {named}")
        return env.result(Outcome.PASS, f"the others were served intact; reported with exit {rc}", notes)
    finally:
        for w in wires:
            w.close()
        srv.close()


# A probe's deadline: above the sum of the waits it may sit out against a stack that hangs or
# stays silent (a 20 s transfer, 10 s for the stack to exit, 15 s for a sender to finish, 5 s to
# bind, 2 s to stop each process), so that only a tester stuck on the stack meets it.
PROBE_DEADLINE = 60.0
DEADLINES = {  # the probes that start a fresh process for each of six handshakes
    "server/handshake-absurd-mss-ffs": 150.0,  # each: bind 5 s, handshake 1.5 s, 16 KiB 5 s, exit 5 s, stop
    "client/handshake-absurd-mss-ffs": 90.0,  # each: accept 3 s, finish 3 s, exit 1 s, stop
}


def deadline_of(p: Probe) -> float:
    """The probe's deadline, in seconds from its start."""
    return DEADLINES.get(p.id, PROBE_DEADLINE)


def _waiting_in(exc: BaseException) -> str:
    """Where the tester was waiting when its deadline passed: the innermost frame of ours."""
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
    return f"in {ours[-1].name}(), tester.py:{ours[-1].lineno}" if ours else "at its end"


def _with_deadline(p: Probe, seconds: float) -> Probe:
    """``p`` under its deadline: its wires wait for nothing past it, no stack process starts after
    it, a watchdog stops the processes it started when it passes, and a probe that met it fails
    with a line that says so."""

    def bounded(env: ProbeEnv) -> ProbeResult:
        env.deadline = time.monotonic() + seconds
        before = len(processes.started())
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            for proc in processes.started()[before:]:
                if proc.poll() is None:
                    stop(proc)

        watchdog = threading.Timer(seconds, expire)
        watchdog.daemon = True
        watchdog.start()
        waiting: str | None = None
        try:
            res = p.fn(env)
        except DeadlinePassed as e:
            waiting = _waiting_in(e)
            res = env.result(Outcome.FAIL, "")
        finally:
            watchdog.cancel()
        if waiting is None and not expired.is_set():
            return res
        said = [f"the probe alone said: {res.verdict}"] if waiting is None else []
        where = f", still waiting on the stack {waiting}" if waiting else ""
        return env.result(
            Outcome.FAIL, f"ran into its {seconds:.0f} s deadline{where}: the stack was stopped there", said + res.notes
        )

    return replace(p, fn=bounded)


def run_probe(stack: Stack, p: Probe, workdir: Path, deadline: float | None = None) -> ProbeResult:
    """Run one probe against a fresh process of ``stack`` in ``workdir`` (emptied first), under its
    deadline (:func:`deadline_of`, or ``deadline`` seconds), and write its ``probe.log`` and
    ``probe.pcap`` there."""
    errors = (TimeoutError, ConnectionError)
    bounded = _with_deadline(p, deadline_of(p) if deadline is None else deadline)
    return active.run_probe(stack, bounded, workdir, ProbeEnv, spec="UDT4.md", side=p.role, plays=p.role, errors=errors)
