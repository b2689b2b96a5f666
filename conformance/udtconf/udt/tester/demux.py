"""Probes of one port shared by connections, told apart by socket ID (§3.3): data with a wrong
socket ID or from a foreign port, three connections at once, an error signal (§5.9) on one of
three.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ... import active
from ...active import Outcome, ProbeResult
from ...diagnosis import log_tail
from ..peer import PAYLOAD, ClientSession, connect
from ..wire import ErrorSignal
from .probe import MULTI_CONNECTIONS, ProbeEnv, _exit_desc, _serve_transfer, _StackServer

PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe


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
