"""Probes of connection setup (§6.1, §13): what a listener takes before a connection exists —
malformed packets, a flood of first-round requests, a replayed request, a flood of completed
handshakes — and absurd MSS and flight flag sizes in a request or a response.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import replace
from pathlib import Path

from ... import active
from ...active import Outcome, ProbeResult
from ...diagnosis import log_crash
from ...seq import MAX
from ..peer import PAYLOAD, ListenerSession, Wire, connect, new_socket_id
from ..wire import DataPacket, Handshake, Shutdown, WireError, encode_raw_control, peer_ip_field
from .probe import ProbeEnv, _exit_desc, _serve_transfer, _StackClient, _StackServer

PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe


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
