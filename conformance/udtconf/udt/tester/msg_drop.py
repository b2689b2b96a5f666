"""Probes of message drop requests (§5.8): ignored on a STREAM connection, whatever they name;
on a DGRAM one, the output stays whole messages in order.
"""

from __future__ import annotations

import os
import time

from ... import active
from ...active import Outcome, ProbeResult
from ...seq import MAX, incseq, seqoff
from ..peer import PAYLOAD, connect
from ..wire import Boundary, MsgDropRequest
from .probe import ProbeEnv, _exit_desc, _serve_transfer, _StackServer

PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe


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
