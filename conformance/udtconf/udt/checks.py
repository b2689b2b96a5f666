"""UDT4's wire rules, checked on captured connections, each keyed to a section of
``docs/spec/UDT4.md`` as ``udt4/<section>/<name>``, on the family's rule machinery
(:mod:`udtconf.checks`).

A violation names the *party the rule constrains*, which is not always the side whose packet
shows the symptom. A missing ACK2 is the fault of the side that received the ACK (§8.6), a
missing NAK that of the side that received the data with the gap (§8.2), and an out-of-range
socket ID that of the side that chose it, not of the peer that echoes it as required (§3.3,
§6.1). The frame is the one where the symptom shows (the unanswered ACK, the data after the
gap), or none.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from ..checks import Inconclusive, Rule, Rules, Violation
from ..seq import MAX, incseq, seqcmp, seqoff
from .cases import ALL_CASES, CASES, LISTENER_CASES
from .trace import Connection, Record
from .wire import (
    Ack,
    Ack2,
    AckKind,
    Boundary,
    DataPacket,
    Handshake,
    KeepAlive,
    Nak,
    Shutdown,
    SocketType,
    _Empty,
    describe,
    encode_loss_list,
)

SYN = 0.010


@dataclass
class Context:
    testcase: str
    dropped: set[int] = field(default_factory=set)  # data sequence numbers the relay dropped
    client_leg: Connection | None = None  # relay cases (loss, wrap): the client's own side of the relay

    def sender_view(self, conn: Connection) -> Connection:
        """Where the client's sending behaviour is observable unaltered by the relay."""
        return self.client_leg if self.client_leg is not None else conn

    def sender_dropped(self) -> set[int]:
        return set() if self.client_leg is not None else self.dropped

    @property
    def sock_type(self) -> int:
        return SocketType.DGRAM if self.testcase == "dgram" else SocketType.STREAM

    @property
    def input_bytes(self) -> int:
        """The bytes the case's client sends (its ``INPUT``)."""
        return CASES[self.testcase].bytes


RuleFn = Callable[[Connection, Context], Iterable[Violation]]
RULES: Rules[Rule[Connection, Context]] = Rules()
rules_for = RULES.for_case
rule_by_id = RULES.by_id


def rule(
    id: str, section: str, grade: str, requirement: str, cases: frozenset[str] = ALL_CASES
) -> Callable[[RuleFn], RuleFn]:
    return RULES.declare(lambda fn: Rule(id, section, grade, requirement, fn, cases))


def _v(r: Record, msg: str, party: str | None = None) -> Violation:
    """A violation shown by record ``r``; by default the party is ``r``'s sender (the rule
    constrains what it sent), otherwise ``party`` (e.g. the side that should have answered ``r``)."""
    detail = describe(r.packet) if r.packet else r.raw[:32].hex()
    return Violation(party or r.sender, r.frame, f"{msg} — {detail}")


def _peer(side: str) -> str:
    return "server" if side == "client" else "client"


def transfer_completed(conn: Connection, input_bytes: int) -> bool:
    """Whether the client's transfer completed: the server's last ACK number lies past every data
    sequence number that reached the server (§8.3), and the payloads it acknowledged add up to the
    client's ``input_bytes`` (a run stopped after its first packets may have all of *those*
    acknowledged). A rule that judges what follows a transfer (its close) is inconclusive on a run
    where this is False."""
    top: int | None = None
    payloads: dict[int, int] = {}
    for _, d in conn.data("client"):
        payloads[d.seq] = len(d.payload)
        if top is None or seqcmp(d.seq, top) > 0:
            top = d.seq
    acks = conn.acks("server")
    if top is None or not acks or seqcmp(acks[-1][1].ack_no, top) <= 0:
        return False
    return sum(payloads.values()) >= input_bytes


def _negotiated_mss(conn: Connection) -> int | None:
    hs = [h for _, h in conn.handshakes() if h.req_type in (-1, -2) and h.mss]
    return min((h.mss for h in hs), default=None)


# ---------------------------------------------------------------------------------------------
# §2–3 framing and header


@rule(
    "udt4/2/decodable",
    "2–5",
    "MUST",
    "Every packet is a valid UDT4 packet: 16-byte header, control information a multiple of 4 bytes, "
    "handshake body exactly 48 bytes, ACK information exactly 4, 16 or 24 bytes, a NAK list that "
    "does not end in a range start and has no range with start > end.",
)
def _decodable(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r in conn.records:
        if r.error is not None:
            yield Violation(r.sender, r.frame, f"{r.error}; bytes {r.raw[:48].hex()}")


@rule(
    "udt4/2/max-length",
    "2",
    "MUST",
    "Maximum length: MSS − 28 bytes. Never send a data payload longer than negotiated MSS − 44.",
)
def _max_length(conn: Connection, ctx: Context) -> Iterable[Violation]:
    mss = _negotiated_mss(conn)
    if mss is None:
        raise Inconclusive("no handshake response in the capture")
    for r in conn.records:
        if len(r.raw) > mss - 28:
            yield _v(r, f"{len(r.raw)} bytes exceeds MSS {mss} − 28")


@rule(
    "udt4/2/info-less-padding",
    "2",
    "SHOULD",
    "Types that carry no control information are sent with 4 zero bytes of padding (20 bytes total); "
    "senders SHOULD emit the 20-byte form for byte-exact parity with 4.11.",
)
def _padding(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r in conn.records:
        if isinstance(r.packet, _Empty) and r.packet.info_len != 4:
            yield _v(r, f"info-less control packet of {len(r.raw)} bytes, expected 20")


@rule(
    "udt4/3.2/control-timestamp-zero",
    "3.2",
    "SHOULD",
    "4.11 sends 0 in the control packets it builds; a listener's reply that is the received request "
    "sent back (cookie reply, rejection 1002, §6.1) echoes the request's time stamp. Senders SHOULD "
    "send 0 (testbed rule: MUST send 0, except in such an echo).",
)
def _ctl_ts(conn: Connection, ctx: Context) -> Iterable[Violation]:
    requested: set[int] = set()  # time stamps of the client's handshake requests so far
    for r in conn.records:
        p = r.packet
        if p is None or not p.is_control:
            continue
        if r.sender == "client" and isinstance(p, Handshake):
            requested.add(p.timestamp)
        # §6.1 listener rules 3 and 5: the reply is the request's packet, header and all; a
        # non-zero time stamp there is the client's, already reported on its request.
        echo = r.sender == "server" and isinstance(p, Handshake) and p.req_type in (1, 1002)
        if p.timestamp != 0 and not (echo and p.timestamp in requested):
            yield _v(r, f"control time stamp {p.timestamp} ≠ 0")


@rule(
    "udt4/3.3/destination-id",
    "3.3",
    "MUST",
    "Incoming packets are routed by destination socket ID: after the handshake every packet of the "
    "connection carries the peer's socket ID (never 0 for data).",
)
def _dst_id(conn: Connection, ctx: Context) -> Iterable[Violation]:
    ids = {s: conn.socket_id(s) for s in ("client", "server")}
    if None in ids.values():
        raise Inconclusive("a side sent no handshake")
    for r in conn.records:
        p = r.packet
        if p is None or isinstance(p, Handshake):
            continue
        want = ids[_peer(r.sender)]
        if p.dst_id != want:
            yield _v(r, f"destination socket ID {p.dst_id:#x}, peer's socket ID is {want:#x}")


@rule("udt4/3.3/socket-id-range", "3.3", "MUST", "A UDT socket ID is a positive 32-bit signed integer, in [1, 2^31−1].")
def _sid_range(conn: Connection, ctx: Context) -> Iterable[Violation]:
    # Only the side that *chose* an ID breaks this rule: its own ID in its own handshakes. A
    # listener's cookie reply returns the client's request unchanged (§6.1), so an ID there that
    # the client announced is the client's (reported on the client's request), and destination
    # IDs echo the peer's ID as §3.3/§6.1 require; neither is the echoing side's fault.
    client_ids = {h.socket_id for _, h in conn.handshakes("client")}
    for r, h in conn.handshakes():
        if r.sender == "server" and h.req_type == 1 and h.socket_id in client_ids:
            continue
        if not 1 <= h.socket_id <= MAX:
            yield _v(r, f"own socket ID {h.socket_id:#x} outside [1, 2^31−1]")


# ---------------------------------------------------------------------------------------------
# §5.1 / §6 handshakes


@rule(
    "udt4/5.1/handshake-fields",
    "5.1",
    "MUST",
    "version 4 (a listener rejects anything else); socket type 1 = STREAM, 2 = DGRAM, equal on both "
    "sides; MSS ≥ 76; handshake header additional info and time stamp 0.",
)
def _hs_fields(conn: Connection, ctx: Context) -> Iterable[Violation]:
    request: Handshake | None = None  # the client's latest first-round request
    for r, h in conn.handshakes():
        if h.req_type == -2:
            continue  # the minimal post-connection reply of §6.2 carries version 0 / type 0
        if r.sender == "client" and h.req_type == 1:
            request = h
        # A listener's cookie reply is the client's request returned unchanged (§6.1): a field
        # it echoes is the client's choice, already reported on the request.
        echo = request if r.sender == "server" and h.req_type == 1 else None
        if h.version != 4 and (echo is None or h.version != echo.version):
            yield _v(r, f"version {h.version} ≠ 4")
        if h.sock_type != ctx.sock_type and (echo is None or h.sock_type != echo.sock_type):
            yield _v(r, f"socket type {h.sock_type}, expected {int(ctx.sock_type)} for case {ctx.testcase}")
        if h.mss < 76 and (echo is None or h.mss != echo.mss):
            yield _v(r, f"MSS {h.mss} < 76")
        if h.addl != 0:
            yield _v(r, f"handshake additional info {h.addl:#x} ≠ 0")


@rule(
    "udt4/6.1/cookie-round",
    "6.1",
    "MUST",
    "Request type 1 ⇒ reply with the received handshake unchanged except cookie = K, destination = the "
    "client's socket ID. The client switches to request type −1 and echoes the cookie. The final "
    "response echoes the client's ISN and the cookie, has request type −1 and MSS = min(client, listener).",
    cases=LISTENER_CASES,
)
def _cookie(conn: Connection, ctx: Context) -> Iterable[Violation]:
    cli = conn.handshakes("client")
    srv = conn.handshakes("server")
    if not cli and (data := conn.data("client")):
        yield _v(data[0][0], "data without any handshake request before it")
        return
    if not cli or not srv:
        raise Inconclusive("handshake exchange incomplete in the capture")
    r0, first = cli[0]
    if first.req_type != 1 or first.cookie != 0 or first.dst_id != 0:
        yield _v(r0, "first client request must have request type 1, cookie 0, destination 0")
    replies = [(r, h) for r, h in srv if h.req_type == 1]
    if not replies:
        yield Violation("server", None, "no cookie reply (request type 1) from the listener")
        return
    rr, reply = replies[0]
    same = (reply.version, reply.sock_type, reply.isn, reply.mss, reply.flight_flag_size, reply.socket_id)
    changed = same != (first.version, first.sock_type, first.isn, first.mss, first.flight_flag_size, first.socket_id)
    if changed:
        yield _v(rr, "cookie reply changed fields other than the cookie")
    if reply.dst_id != first.socket_id:
        yield _v(rr, f"cookie reply destination {reply.dst_id:#x} ≠ client socket ID {first.socket_id:#x}")
    seconds = [(r, h) for r, h in cli if r.time >= rr.time and h.cookie == reply.cookie and h.req_type != 1]
    if not seconds:
        # a client that will not go on from a cookie reply that is not its request is not at fault
        if not changed and reply.dst_id == first.socket_id:
            yield Violation("client", None, f"no second request echoing cookie {reply.cookie:#x} with request type ≠ 1")
        return
    r2, second = seconds[0]
    finals = [(r, h) for r, h in srv if r.time >= r2.time and h.req_type == -1]
    if not finals:
        yield Violation("server", None, "no final response (request type −1)")
        return
    rf, final = finals[0]
    if final.isn != first.isn:
        yield _v(rf, f"final response ISN {final.isn:#x} does not echo client ISN {first.isn:#x}")
    if final.cookie != reply.cookie:
        yield _v(rf, "final response does not echo the cookie")
    if final.dst_id != first.socket_id:
        yield _v(rf, f"final response destination {final.dst_id:#x} ≠ client socket ID")
    if final.mss > second.mss:
        yield _v(rf, f"response MSS {final.mss} > request MSS {second.mss} (must be the min)")
    if final.socket_id == 0:
        yield _v(rf, "final response carries socket ID 0")


@rule(
    "udt4/6.1/listener-stateless-before-cookie",
    "6.1",
    "MUST",
    "Request type 1 ⇒ reply … No state: the listener answers a first request only with the cookie "
    "reply, never with a final response or data.",
    cases=LISTENER_CASES,
)
def _stateless(conn: Connection, ctx: Context) -> Iterable[Violation]:
    cookie_seen = False
    for r in conn.records:
        p = r.packet
        if r.sender == "client" and isinstance(p, Handshake) and p.req_type != 1:
            cookie_seen = True
        if r.sender == "server" and not cookie_seen and p is not None:
            if not (isinstance(p, Handshake) and p.req_type == 1):
                yield _v(r, "listener sent something other than a cookie reply before the cookie round")


@rule(
    "udt4/6.2/rendezvous-handshake",
    "6.2",
    "MUST",
    "Rendezvous: HS(0) with destination 0 until the peer is known, then HS(−1) with destination = the "
    "peer's socket ID; no cookie; rendezvous and regular requests (type 1) never mix.",
    cases=frozenset({"rendezvous"}),
)
def _rdv(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for side in ("client", "server"):
        hs = conn.handshakes(side)
        if not hs:
            yield Violation(side, None, "sent no handshake")
            continue
        peer_id = conn.socket_id(_peer(side))
        for r, h in hs:
            if h.req_type == 1:
                yield _v(r, "regular request (type 1) in a rendezvous")
            elif h.req_type == 0 and h.dst_id != 0:
                yield _v(r, "HS(0) with non-zero destination")
            elif h.req_type == -1 and h.dst_id != peer_id:
                yield _v(r, f"HS(−1) destination {h.dst_id:#x} ≠ peer ID {peer_id:#x}")
            if h.req_type in (0, -1) and h.cookie != 0:
                yield _v(r, "rendezvous handshake carries a cookie")
        if hs[0][1].req_type != 0:
            yield _v(hs[0][0], "first rendezvous request is not HS(0)")


@rule(
    "udt4/6.1/request-repeated-unchanged",
    "6.1",
    "MUST",
    "The client chooses its ISN once, before its first request, and re-sends its current request "
    "every 250 ms: every request of one connection attempt (one client socket ID) carries the same "
    "ISN, which the listener's response must echo.",
    cases=LISTENER_CASES,
)
def _request_repeated(conn: Connection, ctx: Context) -> Iterable[Violation]:
    first: dict[int, int] = {}  # client socket ID -> the ISN of its first request
    for r, h in conn.handshakes("client"):
        if h.req_type not in (1, -1):
            continue
        isn = first.setdefault(h.socket_id, h.isn)
        if h.isn != isn:
            yield _v(r, f"request of socket {h.socket_id:#x} with ISN {h.isn:#x}, its first request had {isn:#x}")


@rule(
    "udt4/6.1/one-session-per-request",
    "6.1",
    "MUST",
    "A repeated request of a connection that exists (same peer address, socket ID and ISN) is answered "
    "from that connection: the same server socket ID, never a second session.",
    cases=LISTENER_CASES,
)
def _one_session(conn: Connection, ctx: Context) -> Iterable[Violation]:
    session: dict[tuple[int, int], int] = {}  # (client socket ID, ISN) -> the server's socket ID
    for r, h in conn.handshakes("server"):
        if h.req_type != -1:
            continue
        key = (h.dst_id, h.isn)
        sid = session.setdefault(key, h.socket_id)
        if h.socket_id != sid:
            yield _v(
                r,
                f"a second session {h.socket_id:#x} for client socket {h.dst_id:#x} and ISN {h.isn:#x}, "
                f"already answered as {sid:#x}",
            )


# ---------------------------------------------------------------------------------------------
# §3.1 / §4 data


@rule(
    "udt4/4/first-data-is-isn",
    "4",
    "MUST",
    "The first data packet of a direction carries the ISN itself (for a listener connection the "
    "client's ISN, echoed in the response).",
)
def _first_isn(conn: Connection, ctx: Context) -> Iterable[Violation]:
    conn = ctx.sender_view(conn)
    data = conn.data("client")
    isn = next((h.isn for _, h in conn.handshakes("client")), None)
    if not data or isn is None:
        raise Inconclusive("no data or no client handshake")
    r, d = data[0]
    if d.seq != isn and isn not in ctx.sender_dropped():
        yield _v(r, f"first data sequence {d.seq:#x} ≠ ISN {isn:#x}")


@rule(
    "udt4/3.1/sequence-contiguous",
    "3.1",
    "MUST",
    "Packet sequence number +1 per new data packet (retransmissions reuse the original number).",
)
def _contig(conn: Connection, ctx: Context) -> Iterable[Violation]:
    conn, dropped = ctx.sender_view(conn), ctx.sender_dropped()
    top: int | None = None
    for r, d in conn.data("client"):
        if top is None:
            top = d.seq
            continue
        if seqcmp(d.seq, top) > 0:
            missing: list[int] = []
            s = incseq(top)
            while s != d.seq and len(missing) < 100000:
                missing.append(s)
                s = incseq(s)
            unexplained = [m for m in missing if m not in dropped]
            if unexplained:
                yield _v(
                    r, f"new sequence {d.seq:#x} skips {len(unexplained)} number(s) from {unexplained[0]:#x} never seen"
                )
            top = d.seq


@rule(
    "udt4/3.1/payload-size",
    "3.1",
    "MUST",
    "The payload of one call is cut into MSS − 44-byte pieces; never a data payload longer than negotiated MSS − 44.",
)
def _payload(conn: Connection, ctx: Context) -> Iterable[Violation]:
    mss = _negotiated_mss(conn)
    bound = "MSS − 44"
    if mss is None:
        # No response seen: the negotiated MSS is at most what the client asked for (§6.1
        # listener rule 8), so a payload past the client's own request's MSS − 44 is too long
        # whatever the listener would have answered.
        mss = min((h.mss for _, h in conn.handshakes("client") if h.req_type in (1, -1) and h.mss), default=None)
        bound = "the client's requested MSS − 44 (no response seen; the negotiated MSS is at most that)"
    if mss is None:
        raise Inconclusive("no handshake carried an MSS")
    for r, d in conn.data("client"):
        if len(d.payload) > mss - 44:
            yield _v(r, f"payload {len(d.payload)} > {bound} = {mss - 44}")


@rule(
    "udt4/3.1/data-timestamp-us",
    "3.1",
    "SHOULD",
    "Time stamp: µs elapsed since the sending socket was opened, truncated to 32 bits; "
    "retransmissions carry the current time stamp.",
    cases=frozenset({"transfer", "dgram", "loss", "wrap", "rendezvous"}),
)
def _data_ts(conn: Connection, ctx: Context) -> Iterable[Violation]:
    conn = ctx.sender_view(conn)
    data = conn.data("client")
    if len(data) < 20 or data[-1][0].time - data[0][0].time < 0.2:
        raise Inconclusive("transfer shorter than 200 ms: time stamp rate not measurable")
    prev = None
    for r, d in data:
        if prev is not None and ((d.timestamp - prev) & 0xFFFFFFFF) > 0x80000000:
            yield _v(r, f"time stamp {d.timestamp} went backwards from {prev}")
            break
        prev = d.timestamp
    (r0, d0), (r1, d1) = data[0], data[-1]
    wall = r1.time - r0.time
    stamped = ((d1.timestamp - d0.timestamp) & 0xFFFFFFFF) / 1e6
    if not 0.8 * wall - 0.02 <= stamped <= 1.2 * wall + 0.02:
        yield Violation(
            "client", r1.frame, f"data time stamps advanced {stamped:.3f} s over {wall:.3f} s of capture time (not µs?)"
        )


@rule(
    "udt4/3.1/message-boundaries",
    "3.1",
    "MUST",
    "FF bits: 10 first packet of a message, 00 middle, 01 last, 11 the only packet; all packets of one "
    "message share its message number; message numbers start at 1.",
    cases=frozenset({"dgram"}),
)
def _boundaries(conn: Connection, ctx: Context) -> Iterable[Violation]:
    seen: dict[int, DataPacket] = {}
    for r, d in conn.data("client"):
        seen.setdefault(d.seq, d)
        if d.msg_no == 0:
            yield _v(r, "message number 0 is never used")
    seqs = sorted(seen, key=lambda s: (seqcmp(s, next(iter(seen))), s))
    open_msg: int | None = None
    first = True
    for s in seqs:
        d = seen[s]
        if first and d.msg_no != 1:
            yield Violation("client", None, f"first message number {d.msg_no} (4.11 starts at 1)")
        first = False
        if d.boundary in (Boundary.FIRST, Boundary.SOLO):
            if open_msg is not None:
                yield Violation("client", None, f"message {open_msg} not closed before seq {s:#x} starts a new one")
            open_msg = d.msg_no if d.boundary == Boundary.FIRST else None
        else:
            if open_msg is None and not ctx.dropped:
                yield Violation("client", None, f"seq {s:#x} continues a message that was never opened")
            elif open_msg is not None and d.msg_no != open_msg:
                yield Violation("client", None, f"seq {s:#x} has message {d.msg_no} inside message {open_msg}")
            if d.boundary == Boundary.LAST:
                open_msg = None


# ---------------------------------------------------------------------------------------------
# §5.3–5.7 ACK / NAK / ACK2


@rule(
    "udt4/5.3/ack-forms",
    "5.3",
    "MUST",
    "Light ACK: 4 bytes, additional info 0. Full (24 B) and medium (16 B) ACKs carry a fresh ACK "
    "sub-sequence number; the available buffer is in packets, never less than 2.",
)
def _ack_forms(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r, a in conn.of_type(Ack):
        if a.kind is AckKind.LIGHT and a.ack_seq_no != 0:
            yield _v(r, f"light ACK with additional info {a.ack_seq_no}")
        if a.kind is not AckKind.LIGHT:
            if a.ack_seq_no == 0:
                yield _v(r, "full/medium ACK with sub-sequence number 0")
            if a.avail_buffer is not None and a.avail_buffer < 2:
                yield _v(r, f"advertised window {a.avail_buffer} < 2")


@rule(
    "udt4/8.3/ack-after-data",
    "8.3",
    "SHOULD",
    "An ACK acknowledges data: none before the first data packet from the peer arrived (the ACK number "
    "would be the peer's ISN, which 4.11 never acknowledges); the RTT of a full or medium ACK is the "
    "receiver's estimate, which starts at 100 ms and is never 0.",
)
def _ack_after_data(conn: Connection, ctx: Context) -> Iterable[Violation]:
    got_data = {"client": False, "server": False}
    for r in conn.records:
        p = r.packet
        if isinstance(p, DataPacket):
            got_data[_peer(r.sender)] = True
        elif isinstance(p, Ack):
            if not got_data[r.sender]:
                yield _v(r, "ACK before any data from the peer")
            elif p.kind is not AckKind.LIGHT and p.rtt == 0:
                yield _v(r, "ACK with RTT 0")


@rule(
    "udt4/4/ack-subseq-increments",
    "4",
    "SHOULD",
    "ACK sub-sequence numbers: a separate counter per side, incremented before use, so the first full "
    "ACK carries 1; a repeated ACK is a new ACK with a new sub-sequence number.",
)
def _ack_subseq(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for side in ("server", "client"):
        prev = 0
        for r, a in conn.acks(side):
            if a.kind is AckKind.LIGHT:
                continue
            want = 0 if prev == MAX else prev + 1
            if a.ack_seq_no != want:
                yield _v(r, f"sub-sequence {a.ack_seq_no}, expected {want}")
            prev = a.ack_seq_no


LIGHT_ACK_EVERY = 64  # data packets between timer ACKs that trigger a light ACK (§9.3)


@rule(
    "udt4/5.3/first-ack-full",
    "5.3",
    "SHOULD",
    "At connection start the last ACK time is 0, so the first timer ACK is full (24 bytes). A light "
    "ACK comes first when 64 data packets arrive before the first ACK timer (§9.3), so the receiver's "
    "first ACK must be full only when fewer than 64 data packets arrived within 10 ms of the first.",
)
def _first_full(conn: Connection, ctx: Context) -> Iterable[Violation]:
    acked = False
    for receiver in ("server", "client"):
        acks = conn.acks(receiver)
        if not acks:
            continue
        acked = True
        data = conn.data(_peer(receiver))
        early = sum(1 for r, _ in data if r.time - data[0][0].time <= SYN) if data else 0
        if early >= LIGHT_ACK_EVERY:
            continue  # 4.11 itself may send a light ACK first (§9.3)
        r, a = acks[0]
        if a.kind is not AckKind.FULL:
            yield _v(
                r,
                f"first ACK is {a.kind.name.lower()} although only {early} data packet(s) arrived "
                f"within {SYN * 1e3:.0f} ms of the first",
                party=receiver,
            )
    if not acked:
        raise Inconclusive("the receiver sent no ACK")


def _walk_sent(conn: Connection, ctrl_sender: str) -> Iterable[tuple[Record, int | None]]:
    """Each record with the largest data sequence seen from the other side so far."""
    top: int | None = None
    for r in conn.records:
        if isinstance(r.packet, DataPacket) and r.sender != ctrl_sender:
            if top is None or seqcmp(r.packet.seq, top) > 0:
                top = r.packet.seq
        yield r, top


@rule(
    "udt4/5.4/no-ack-or-nak-beyond-sent",
    "5.4",
    "MUST",
    "No reported number may be later than the sender's largest sent sequence number; an ACK "
    "acknowledging data that was never sent makes 4.11 mark the connection broken.",
)
def _beyond(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r, top in _walk_sent(conn, "server"):
        p = r.packet
        if r.sender != "server":
            continue
        if isinstance(p, Ack):
            if top is None:
                continue  # nothing sent yet: the ACK number is the ISN and must not move
            if seqcmp(p.ack_no, incseq(top)) > 0:
                yield _v(r, f"ACK number {p.ack_no:#x} beyond largest data seen {top:#x} + 1")
        elif isinstance(p, Nak):
            try:
                losses = p.losses()
            except ValueError:
                continue  # reported by udt4/2/decodable
            bad = [s for s in losses if top is None or seqcmp(s, top) > 0]
            if bad:
                yield _v(r, f"NAK reports {bad[0]:#x}, beyond the largest data seen {top if top is None else hex(top)}")


@rule(
    "udt4/5.4/nak-run-as-range",
    "5.4",
    "SHOULD",
    "A run of lost numbers is emitted as a single word only if it has exactly one member; any run of "
    "two or more is emitted as a range, including runs of exactly two.",
)
def _nak_ranges(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r, n in conn.of_type(Nak):
        try:
            losses = n.losses()
        except ValueError:
            continue
        if list(n.words) != encode_loss_list(losses):
            yield _v(r, "loss list not compressed as 4.11 does (runs ≥ 2 as ranges, singles as one word)")


@rule(
    "udt4/8.2/nak-on-gap",
    "8.2",
    "SHOULD",
    "Loss detection: if a data packet skips numbers, they are inserted into the receiver loss list and "
    "a NAK is sent immediately: one word for a one-packet gap, otherwise the two-word range.",
    cases=frozenset({"loss", "wrap"}),
)
def _nak_on_gap(conn: Connection, ctx: Context) -> Iterable[Violation]:
    # The rule constrains the data *receiver*: the side that saw the gap must send the NAK.
    gaps = 0
    for receiver in ("server", "client"):
        top: int | None = None
        naks = list(conn.of_type(Nak, receiver))
        for r, d in conn.data(_peer(receiver)):
            if top is not None and seqcmp(d.seq, incseq(top)) > 0:
                gap = []
                s = incseq(top)
                while s != d.seq:
                    gap.append(s)
                    s = incseq(s)
                gaps += 1
                want = encode_loss_list(gap)
                match = [nr for nr, n in naks if 0 <= nr.time - r.time <= 0.050 and set(gap) <= set(_safe_losses(n))]
                if not match:
                    yield _v(r, f"gap {gap[0]:#x}..{gap[-1]:#x} in received data not NAKed within 50 ms", receiver)
                elif not any(list(n.words) == want for nr, n in naks if nr in match):
                    yield Violation(
                        receiver,
                        match[0].frame,
                        f"NAK for gap {gap[0]:#x}..{gap[-1]:#x} is not the one-gap form {[hex(w) for w in want]}",
                    )
            if top is None or seqcmp(d.seq, top) > 0:
                top = d.seq
    if gaps == 0:
        raise Inconclusive("no sequence gap reached the receiver")


def _safe_losses(n: Nak) -> list[int]:
    try:
        return n.losses()
    except ValueError:
        return []


@rule(
    "udt4/5.7/ack2-echoes-ack",
    "5.7",
    "MUST",
    "ACK2: additional info = the ACK sub-sequence number of the full or medium ACK being acknowledged. "
    "Light ACKs must not be ACK2'd.",
)
def _ack2_echo(conn: Connection, ctx: Context) -> Iterable[Violation]:
    sent: dict[str, set[int]] = {"client": set(), "server": set()}
    for r in conn.records:
        p = r.packet
        if isinstance(p, Ack) and p.kind is not AckKind.LIGHT:
            sent[r.sender].add(p.ack_seq_no)
        elif isinstance(p, Ack2):
            if p.ack_seq_no not in sent[_peer(r.sender)]:
                yield _v(r, f"ACK2 {p.ack_seq_no} echoes no full/medium ACK received before")


@rule(
    "udt4/8.6/ack2-for-every-ack",
    "8.6",
    "SHOULD",
    "4.11 answers every full/medium ACK with an ACK2. Recommendation: always send ACK2 for every full/medium ACK.",
)
def _ack2_every(conn: Connection, ctx: Context) -> Iterable[Violation]:
    # The rule constrains the side that *received* the ACK (the data sender, §8.6 step 1).
    end = conn.records[-1].time if conn.records else 0.0
    for answerer in ("client", "server"):
        ack2 = [(r.time, p.ack_seq_no) for r, p in conn.of_type(Ack2, answerer)]
        shut = next((r.time for r, _ in conn.of_type(Shutdown, answerer)), None)
        for r, a in conn.acks(_peer(answerer)):
            if a.kind is AckKind.LIGHT or (shut is not None and r.time >= shut) or end - r.time < 0.2:
                continue
            if not any(t >= r.time and t - r.time <= 0.2 and k == a.ack_seq_no for t, k in ack2):
                yield _v(r, f"this ACK got no ACK2 from the {answerer} within 200 ms", answerer)


@rule(
    "udt4/9.2/full-ack-every-syn",
    "9.2",
    "SHOULD",
    "ACK timer: at the first check after NextACKTime (a packet from the peer, or 100 ms idle), the "
    "receiver sends a full/medium ACK when its ACK number has moved; each check restarts the timer "
    "(§9.2, §8.3).",
    cases=frozenset({"transfer", "dgram", "loss", "wrap"}),
)
def _ack_period(conn: Connection, ctx: Context) -> Iterable[Violation]:
    # Constrains the data receiver (the server in this suite). The timer is modelled as §9.2
    # states it for 4.11: it is looked at when a packet from the client arrives; once due, the
    # check runs ACK generation (§8.3) and restarts the timer SYN later, *whether or not* an ACK
    # left (a check right after a packet that opened a gap finds the ACK number unchanged and
    # sends nothing). An ACK the capture shows also restarts it. A due check at which received
    # data has moved the ACK number past the last ACK must produce an ACK within the slack.
    # With no packet from the client for 100 ms an idle check runs (§9, §14 row 18) and may
    # restart the timer silently just before the next packet; its timing in 4.11 is loose, so
    # the first packet after such a pause owes nothing and the timer counts from it.
    slack = 0.020
    idle = 0.100 - slack
    acks = [(r, a) for r, a in conn.acks("server") if a.kind is not AckKind.LIGHT]
    data = conn.data("client")
    if len(acks) < 2 or len(data) < 50:
        raise Inconclusive("too little data for the ACK period")
    base = data[0][1].seq
    got: set[int] = set()
    ackable = 0  # the ACK number (offset from the first data packet) the data so far allows
    acked = 0  # the last full/medium ACK's number
    next_check: float | None = None
    last_arrival: float | None = None
    owed: Record | None = None  # the due check that found the ACK number moved
    checked = 0
    for r in conn.records:
        if owed is not None and r.time > owed.time + slack:
            yield Violation(
                "server",
                owed.frame,
                f"no ACK within {slack * 1e3:.0f} ms of this packet although the ACK timer was due "
                f"(SYN after the last ACK or check) and the ACK number had moved from "
                f"{acked:+d} to {ackable:+d} packets past the first data packet",
            )
            owed = None
        if r.sender == "server":
            if isinstance(r.packet, Ack) and r.packet.kind is not AckKind.LIGHT:
                acked, owed, next_check = seqoff(base, r.packet.ack_no), None, r.time + SYN
            continue
        if isinstance(r.packet, DataPacket):
            got.add(seqoff(base, r.packet.seq))
            while ackable in got:
                ackable += 1
        paused = last_arrival is not None and r.time - last_arrival >= idle
        last_arrival = r.time
        if next_check is None or r.time < next_check:
            continue
        next_check = r.time + SYN
        if ackable > acked and owed is None and not paused:
            owed = r
            checked += 1
    if checked == 0:
        raise Inconclusive("no due ACK check with data flowing")


@rule(
    "udt4/7/packet-pairs",
    "7",
    "SHOULD",
    "Packet pairs: when a new packet's sequence number satisfies seq & 0xF == 0, the next packet is "
    "scheduled immediately, so packets 16n and 16n+1 leave back-to-back.",
    cases=frozenset({"transfer", "dgram", "loss"}),
)
def _pairs(conn: Connection, ctx: Context) -> Iterable[Violation]:
    conn = ctx.sender_view(conn)
    new: list[tuple[float, int]] = []
    top: int | None = None
    for r, d in conn.data("client"):
        if top is None or seqcmp(d.seq, top) > 0:
            new.append((r.time, d.seq))
            top = d.seq
    pair_gaps: list[float] = []
    other_gaps: list[float] = []
    for (t0, s0), (t1, s1) in pairwise(new):
        if s1 != incseq(s0):
            continue
        (pair_gaps if s0 & 0xF == 0 else other_gaps).append(t1 - t0)
    if len(pair_gaps) < 5 or not other_gaps:
        raise Inconclusive("fewer than 5 packet pairs captured")
    base = statistics.median(other_gaps)
    if base < 50e-6:
        raise Inconclusive(f"sender not paced (median gap {base * 1e6:.0f} µs): pairs indistinguishable")
    got = statistics.median(pair_gaps)
    if got > 0.5 * base:
        yield Violation(
            "client", None, f"median 16n→16n+1 gap {got * 1e6:.0f} µs vs {base * 1e6:.0f} µs between other packets"
        )


# ---------------------------------------------------------------------------------------------
# §5.6 teardown


# Copies of one Shutdown leave within this time of the first (a busy sender's burst).
SHUTDOWN_BURST_S = 0.01


@rule(
    "udt4/5.6/shutdown-on-close",
    "5.6",
    "MUST",
    "Shutdown: sent once by close() on a connected socket (copies back to back allowed); no data follows it.",
    cases=frozenset({"close", "handshake", "mss", "transfer", "dgram"}),
)
def _shutdown(conn: Connection, ctx: Context) -> Iterable[Violation]:
    # 4.11 sends one Shutdown and never repeats it. udt-rs sends a few copies back to back, so
    # that one lost packet does not turn a clean close into a silent peer (docs/architecture.md,
    # deliberate deviations): copies in one burst are one Shutdown, a later one is a repeat.
    shuts = list(conn.of_type(Shutdown))
    if not shuts:
        # A close() lingers while data is unacknowledged (§6.3, UDT_LINGER 180 s): a run stopped
        # before the last ACK never made a Shutdown due, and its absence is nobody's fault here.
        if not transfer_completed(conn, ctx.input_bytes):
            raise Inconclusive(
                f"the transfer did not complete (client data unacknowledged, or short of the case's "
                f"{ctx.input_bytes} bytes): close was never due"
            )
        # the client (data source) closes first; the server's close() comes after the peer's Shutdown
        yield Violation("client", None, "no Shutdown packet from either side after the transfer (client closed first)")
        return
    for side in ("client", "server"):
        mine = [r for r, _ in shuts if r.sender == side]
        repeats = [r for r in mine if r.time - mine[0].time > SHUTDOWN_BURST_S]
        if repeats:
            gap_ms = (repeats[0].time - mine[0].time) * 1000
            yield Violation(side, repeats[0].frame, f"Shutdown repeated {gap_ms:.0f} ms after the first (sent once)")
        if mine:
            late = [r for r, _ in conn.of_type(DataPacket, side) if r.time > mine[0].time]
            if late:
                yield _v(late[0], "data after own Shutdown")


@rule(
    "udt4/5.2/keepalive-form", "5.2", "MUST", "Keep-alive: no information (4 zero bytes), addressed to the peer socket."
)
def _keepalive(conn: Connection, ctx: Context) -> Iterable[Violation]:
    for r, k in conn.of_type(KeepAlive):
        if k.addl != 0:
            yield _v(r, f"keep-alive additional info {k.addl}")


# ---------------------------------------------------------------------------------------------
# Packets that spoil the exchange

# Rules a packet breaks so that its receiver may discard it or cannot go on: a first data packet
# that is not the ISN, a payload longer than MSS − 44, a handshake that is not what §6 asks for,
# a packet addressed to no socket, bytes that are no UDT4 packet. A peer that stops answering or
# acknowledging after such a packet is not at fault: the diagnosis of a failed run
# (udtconf.udt.diagnosis) names the packet's sender. In order of precedence: where one packet breaks
# several, the first names it.
SPOILING_RULES = (
    "udt4/4/first-data-is-isn",
    "udt4/3.1/payload-size",
    "udt4/6.1/cookie-round",
    "udt4/5.1/handshake-fields",
    "udt4/6.2/rendezvous-handshake",
    "udt4/6.1/listener-stateless-before-cookie",
    "udt4/3.3/socket-id-range",
    "udt4/3.3/destination-id",
    "udt4/2/max-length",
    "udt4/2/decodable",
)


@dataclass(frozen=True)
class Spoiled:
    """A packet that broke a rule of :data:`SPOILING_RULES`, sent by the party the rule constrains."""

    record: Record
    rule: str
    message: str  # the violation, without the packet's description


def spoiled_packets(conn: Connection, ctx: Context) -> list[Spoiled]:
    """The packets of ``conn`` (and of the client's own leg behind a relay, ``ctx.client_leg``)
    that broke a rule of :data:`SPOILING_RULES` applying to ``ctx.testcase``, each once, in the
    order they were sent. A violation shown on a packet its party did not send (a gap NAKed too
    late) or on no packet (a reply never sent) spoils nothing: it is not listed."""
    records: dict[int, list[Record]] = {}
    for leg in (conn, ctx.client_leg):
        for r in leg.records if leg is not None else []:
            records.setdefault(r.frame, []).append(r)
    found: dict[int, Spoiled] = {}
    for rule_id in SPOILING_RULES:
        rule = rule_by_id(rule_id)
        if ctx.testcase not in rule.cases:
            continue
        try:
            violations = rule.run(conn, ctx)
        except Inconclusive:
            continue
        for v in violations:
            sent = [r for r in records.get(v.frame, []) if r.sender == v.party] if v.frame is not None else []
            if sent and id(sent[0]) not in found:
                found[id(sent[0])] = Spoiled(sent[0], rule_id, v.message.split(" — ")[0])
    return sorted(found.values(), key=lambda s: (s.record.time, s.record.frame))


# ---------------------------------------------------------------------------------------------
# §7, §11, §12.1 initial window

INITIAL_CWND = 16  # CUDTCC's W_cc at connection start (§11, §12.1)


@rule(
    "udt4/11/initial-window",
    "7, 11, 12.1",
    "MUST",
    "A new packet may be sent only if afterwards at most min(W_flow, W_cc) packets are unacknowledged "
    "(§7 step 2). Until the first full/medium ACK reaches the congestion control, W_cc is CUDTCC's "
    "initial 16 and W_flow the peer's handshake FFS (less what light ACKs acknowledged), counted "
    "from SndLastAck = ISN; retransmissions reuse their numbers and do not count.",
)
def _initial_window(conn: Connection, ctx: Context) -> Iterable[Violation]:
    conn = ctx.sender_view(conn)
    checked = False
    for side in ("client", "server"):
        own = [h for _, h in conn.handshakes(side)]
        first = next((d.seq for _, d in conn.data(side)), None)
        if first is None:
            continue
        # SndLastAck starts at the sender's ISN (§6.1 client rule 1, §6.1 listener rule 8, §6.2);
        # every handshake of the sender carries it (a listener's echo the client's, its own).
        base = own[-1].isn if own else first
        peer = [h for _, h in conn.handshakes(_peer(side))]
        settled = [h.flight_flag_size for h in peer if h.req_type != 1] or [h.flight_flag_size for h in peer]
        flow = max(settled, default=None)  # the largest FFS the peer announced: never stricter than 4.11
        acked = 0  # packets released by light ACKs (§8.6: W_flow −= acknowledged count)
        top: int | None = None
        for r in conn.records:
            p = r.packet
            if r.sender == _peer(side) and isinstance(p, Ack):
                if seqcmp(p.ack_no, base) <= 0:
                    continue  # acknowledges nothing new: the window does not move
                if p.kind is not AckKind.LIGHT:
                    break  # the CC's onACK may grow W_cc from here on (§12.3)
                acked += seqoff(base, p.ack_no)
                base = p.ack_no
            elif r.sender == side and isinstance(p, DataPacket):
                if top is not None and seqcmp(p.seq, top) <= 0:
                    continue  # a retransmission
                top = p.seq
                checked = True
                limit = INITIAL_CWND if flow is None else min(INITIAL_CWND, flow - acked)
                outstanding = seqoff(base, p.seq) + 1  # seqlen(SndLastAck, seq), §4
                if outstanding > limit:
                    yield _v(
                        r,
                        f"{outstanding} packets unacknowledged ({base:#x}…{p.seq:#x}) before the first ACK; "
                        f"the initial window is {limit} (W_cc 16, peer FFS {flow})",
                    )
                    break
    if not checked:
        raise Inconclusive("no data packets")
