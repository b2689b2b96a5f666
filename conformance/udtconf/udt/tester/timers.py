"""Probes of the EXP timer (§9.4) while the tester is silent: a stack with nothing to send keeps
the connection alive, a sender without ACKs retransmits.
"""

from __future__ import annotations

import os
import time
from itertools import pairwise

from ... import active
from ...active import Outcome, ProbeResult
from ...seq import incseq
from ..peer import PAYLOAD, ClientSession, connect
from ..wire import KeepAlive
from .probe import ProbeEnv, _exit_desc, _serve_transfer, _StackClient, _StackServer

PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe


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
