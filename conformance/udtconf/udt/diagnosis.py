"""What a UDT4 capture says about a failed run, in words a stack's author can act on; the
processes' part (exits, crash lines, log tails, stats) is the family's :mod:`udtconf.diagnosis`.

* from the capture (:func:`wire_findings`): whether the handshake completed (UDT4.md §6), how far
  data and ACKs got — the last ACK number and whether it sits at the 2^31 wrap (§4), and whether
  the receiver stopped acknowledging data it had (§8.3) or the sender never retransmitted what
  was NAKed (§8.7) — and which side went silent first;
* who is at fault, from the order of events: before a receiver is blamed for silence, the cell's
  wire rules are read for a packet that spoiled the exchange
  (:func:`udtconf.udt.checks.spoiled_packets`: a first data packet that is not the ISN, a payload
  over MSS − 44, a cookie reply that is not the request), and a reply is missed only where the
  request that asks for it was sent — else the side that sent the bad packet, or never sent the
  request, is named. A handshake the codec rejects (another handshake version, a body short of
  48 bytes, §5.1) is such a packet, never an absent one: a listener that ignores it is not deaf,
  and a client that gets only such answers was answered, malformed. The spoiling packet also
  outranks a crash of its receiver that followed it (libudt 4.11 aborts on a short response):
  the crash is what it caused;
* *alive but deaf*: a role still running that sent nothing for :data:`DEAF_AFTER` seconds. A
  healthy UDT endpoint is never that quiet: its EXP timer sends a keep-alive or a
  retransmission at least every few hundred milliseconds (§9.4).

:func:`diagnose` puts these after the processes' findings into one
:class:`~udtconf.diagnosis.Diagnosis`. :class:`WireWatch` reads a capture while it grows, so
that the runner can stop a run as soon as a role is deaf or the ACK number stalls with data
outstanding, rather than sit out the case's timeout.

Numbers are the ones on the server's side of the wire: in the relay cases (``loss``, ``wrap``)
the relay shifts the client's sequence numbers, and the server's numbering is the one the
``wrap`` case moves across 2^31.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from pathlib import Path

from udtharness.capture import SENTINEL
from udtharness.pcap import parse_frame

from ..diagnosis import Diagnosis, Role, crashed, exit_text, last_stats, log_crash, log_tail, stats_text
from ..seq import MAX, seqcmp, seqoff
from .checks import Context, Spoiled, spoiled_packets
from .trace import Connection, Endpoint, Record
from .wire import ControlType, DataPacket, Handshake, Nak, WireError, decode

# Why a failed run's diagnosis has no connection to read, where nothing more precise is known.
NO_CAPTURE = "no capture of the server's port (capturing needs root)"
DEAF_AFTER = 5.0  # s without a packet from a running, engaged role: deaf (keep-alives every ~0.3 s, §9.4)
STALL_AFTER = 10.0  # s without the ACK number moving while data beyond it reached the receiver
STARTUP = 10.0  # s a client may take from its start to its first packet (an adapter may start slowly)
NEAR_WRAP = 64  # sequence numbers this close to 2^31 are reported relative to the wrap


# ---------------------------------------------------------------------------------------------
# The capture


def wrap_note(seq: int) -> str:
    """Where ``seq`` sits relative to the 2^31 wrap, when it is near it (§4); else ''."""
    pos = seqoff(0, seq)  # 0 for 0x00000000, -1 for 0x7fffffff
    if pos in (-1, 0):
        return " (the 2^31 wrap)"
    if -NEAR_WRAP <= pos < -1:
        return f" ({-pos - 1} before the 2^31 wrap)"
    if 0 < pos <= NEAR_WRAP:
        return f" ({pos} after the 2^31 wrap)"
    return ""


def _shift(a: Connection, b: Connection) -> int:
    """What to add to sequence numbers of leg ``b`` to get those of leg ``a`` (the relay's shift)."""
    isn_a = next((h.isn for _, h in a.handshakes("client")), None)
    isn_b = next((h.isn for _, h in b.handshakes("client")), None)
    return 0 if isn_a is None or isn_b is None else (isn_a - isn_b) & MAX


def wire_findings(
    conn: Connection,
    names: Mapping[str, str],
    t0: float,
    client_leg: Connection | None = None,
    ctx: Context | None = None,
) -> list[str]:
    """What the capture of one connection says about how far it got, in the server's numbering.

    ``conn`` is the server's side of the wire, ``client_leg`` the client's own side where a relay
    sits between them, ``names`` the stack of each side, ``t0`` the run's start (wall clock),
    ``ctx`` the case's context for the wire rules: with it, a side that sent a packet spoiling
    the exchange is named before its peer is blamed for what followed."""
    return _wire(conn, names, t0, client_leg, ctx)[0]


def _wire(
    conn: Connection, names: Mapping[str, str], t0: float, client_leg: Connection | None, ctx: Context | None
) -> tuple[list[str], tuple[str, Record] | None]:
    """:func:`wire_findings`, and where their verdict rests on a spoiling packet, that verdict
    and the packet."""
    srv, cli = f"server {names.get('server', '?')}", f"client {names.get('client', '?')}"
    own = client_leg or conn  # where the client's own sending shows
    out: list[str] = []

    def at(t: float) -> str:
        return f"t={t - t0:.2f} s"

    if not own.records:
        return [f"nothing on the wire from the {cli}"], None
    spoiled = spoiled_packets(conn, ctx) if ctx is not None else []
    culprit: tuple[str, Record] | None = None
    if not conn.data("client"):
        stall, spoiler = _handshake_stall(conn, spoiled, srv, cli, at)
        out.append(stall)
        culprit = (stall, spoiler) if spoiler else None
    else:
        out += _progress(conn, own, spoiled, srv, cli, at)
        culprit = next(((f, s.record) for f in out[:1] for s in spoiled if _spoil_text(s, at) in f), None)
    out.append(_silence(own, srv, cli, at))
    return out, culprit


def _spoil_text(s: Spoiled, at: Callable[[float], str]) -> str:
    return f"{s.rule}: {s.message} (frame {s.record.frame}, {at(s.record.time)})"


def _is_handshake(raw: bytes) -> bool:
    """Whether a datagram's header says handshake (control bit, type 0), whatever its body (§3.2)."""
    return len(raw) >= 2 and bool(raw[0] & 0x80) and (raw[0] << 8 | raw[1]) & 0x7FFF == ControlType.HANDSHAKE


def _undecodable_handshakes(conn: Connection, side: str) -> list[Record]:
    """The handshakes ``side`` sent that the codec rejects (udt4/2/decodable): another handshake
    version, a body that is not 48 bytes (§5.1). Their receiver cannot read them: they are the
    sender's fault, not absent."""
    return [r for r in conn.by(side) if r.error is not None and _is_handshake(r.raw)]


def _undecodable_text(records: list[Record], at: Callable[[float], str]) -> str:
    first = records[0]
    return f"udt4/2/decodable: {first.error} (frame {first.frame}, {at(first.time)}, {len(first.raw)} bytes)"


def _handshake_stall(
    conn: Connection, spoiled: list[Spoiled], srv: str, cli: str, at: Callable[[float], str]
) -> tuple[str, Record | None]:
    """Where a connection without data stopped, and whose move it was: a reply is missed only
    where the request that asks for it was sent and was valid. With it, the invalid or
    undecodable handshake the verdict rests on, or None."""
    hs_c, hs_s = conn.handshakes("client"), conn.handshakes("server")
    bad = {
        side: next((s for s in spoiled if s.record.sender == side and isinstance(s.record.packet, Handshake)), None)
        for side in ("client", "server")
    }
    bad_c, bad_s = bad["client"], bad["server"]
    junk_c, junk_s = _undecodable_handshakes(conn, "client"), _undecodable_handshakes(conn, "server")
    if not hs_c:
        if junk_c:
            return (
                f"the {cli} sent {len(junk_c)} handshake(s) the {srv} could not decode "
                f"({_undecodable_text(junk_c, at)}) and none it could: nothing a UDT4 peer answers (§5.1, §6)"
            ), junk_c[0]
        return f"the {cli} sent no handshake that reached the server", None
    if junk_s and not any(h.req_type in (-1, -2) for _, h in hs_s):
        asked = "second-round request" if any(h.req_type == -1 for _, h in hs_c) else "request"
        return (
            f"the {srv} answered the {cli}'s {asked} with {len(junk_s)} handshake(s) the client could not decode "
            f"({_undecodable_text(junk_s, at)}): no response it could read (§5.1, §6.1)"
        ), junk_s[0]
    if not hs_s:
        if bad_c:
            return (
                f"the {cli} sent an invalid handshake request ({_spoil_text(bad_c, at)}): the {srv} did not "
                f"answer its {len(hs_c)} handshake(s) (§6.1)"
            ), bad_c.record
        return f"the {srv} never answered the {len(hs_c)} handshake(s) of the {cli} (§6.1)", None
    if any(h.req_type in (-1, -2) for _, h in hs_s):
        if bad_s:
            return (
                f"the {srv} sent an invalid handshake ({_spoil_text(bad_s, at)}): the {cli} sent no data after it (§6)"
            ), bad_s.record
        return f"the handshake completed but the {cli} sent no data (§6)", None
    reply = hs_s[0][0]
    if not any(h.req_type == 1 for _, h in hs_c):  # rendezvous (§6.2): each side answers the other's HS
        if bad_c:
            return f"the {cli} sent an invalid rendezvous handshake ({_spoil_text(bad_c, at)}) (§6.2)", bad_c.record
        return f"the {srv} answered the {cli}'s rendezvous handshakes but never with HS(−1) (§6.2)", None
    # listener (§6.1): the final response answers the client's second-round request
    second = [(r, h) for r, h in hs_c if r.time >= reply.time and h.req_type != 1]
    if not second:
        if bad_s:
            return (
                f"the {srv}'s cookie reply was invalid ({_spoil_text(bad_s, at)}): the {cli} never sent the "
                "second-round request (§6.1)"
            ), bad_s.record
        return (
            f"the {cli} never sent the second-round request after the {srv}'s cookie reply at {at(reply.time)} (§6.1)"
        ), None
    if bad_c:
        return (
            f"the {cli} sent an invalid handshake request ({_spoil_text(bad_c, at)}): the {srv} sent no final "
            "response to it (§6.1)"
        ), bad_c.record
    cookies = {h.cookie for _, h in hs_s if h.req_type == 1}
    if not any(h.cookie in cookies for _, h in second):
        return (
            f"the {cli}'s second-round request did not echo the {srv}'s cookie: no final response (a listener drops "
            "it, §6.1 listener rule 4)"
        ), None
    return (
        f"the handshake stopped after the {srv}'s first-round reply (§6.1): no final response to the second-round "
        f"request the {cli} sent at {at(second[0][0].time)}"
    ), None


def _progress(
    conn: Connection, own: Connection, spoiled: list[Spoiled], srv: str, cli: str, at: Callable[[float], str]
) -> list[str]:
    """How far the data got: the verdict (who held it up) first, then the numbers. Invalid data
    from the client is the verdict where the receiver's stall follows from it: its first data
    packet, or the packet at the number the ACK waits for."""
    data = conn.data("client")
    arrived: dict[int, float] = {}
    top: int | None = None
    for r, d in data:
        arrived.setdefault(d.seq, r.time)
        if top is None or seqcmp(d.seq, top) > 0:
            top = d.seq
    assert top is not None
    delta = _shift(conn, own) if own is not conn else 0
    sent = own.data("client")
    last_r, last_d = sent[-1] if sent else data[-1]
    summary = (
        f"data: {len(arrived)} sequence numbers reached the server, up to {top:#010x}{wrap_note(top)}; "
        f"the client's last data packet {(last_d.seq + delta) & MAX:#010x} at {at(last_r.time)}"
    )
    bad = [s for s in spoiled if s.record.sender == "client" and isinstance(s.record.packet, DataPacket)]
    firsts = {id(leg.data("client")[0][0]) for leg in (conn, own) if leg.data("client")}
    first_bad = next((s for s in bad if id(s.record) in firsts), None)
    acks = conn.acks("server")
    if not acks:
        if first_bad:
            return [
                f"the {cli}'s first data packet was invalid ({_spoil_text(first_bad, at)}): the {srv} had nothing it "
                "could acknowledge",
                summary,
            ]
        return [f"the {srv} received data but sent no ACK at all (§8.3)", summary]
    ack = acks[-1][1].ack_no
    moved = next(r.time for r, a in acks if a.ack_no == ack)
    if seqcmp(ack, top) > 0:
        done = f"every data packet that reached the server was acknowledged (ACK {ack:#010x} at {at(moved)})"
        if bad:
            more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
            return [f"the {cli} sent invalid data: {_spoil_text(bad[0], at)}{more}", summary, done]
        return [summary, done]
    at_ack = first_bad or next((s for s in bad if isinstance(p := s.record.packet, DataPacket) and p.seq == ack), None)
    if at_ack:
        why = _spoil_text(at_ack, at)
        return [
            f"the ACK number waits at {ack:#010x}{wrap_note(ack)} after invalid data from the {cli} ({why})",
            summary,
        ]
    beyond = seqoff(ack, top) + 1
    if ack in arrived:
        verdict = (
            f"receiver ({srv}) stopped ACKing at {ack:#010x}{wrap_note(ack)}: that packet arrived at "
            f"{at(arrived[ack])} and {beyond - 1} more after it, but the ACK number last moved at {at(moved)}, "
            f"{last_r.time - moved:.1f} s before the client's last data packet (§8.3)"
        )
        return [verdict, summary]
    naks = [(r, n) for r, n in conn.of_type(Nak, "server") if ack in _losses(n)]
    if not naks:
        verdict = (
            f"the ACK number waits at {ack:#010x}{wrap_note(ack)}, which never reached the server and "
            f"which the {srv} never NAKed (§8.2)"
        )
    else:
        verdict = (
            f"the ACK number waits at {ack:#010x}{wrap_note(ack)}, NAKed by the {srv} {len(naks)} time(s) "
            f"(first at {at(naks[0][0].time)}) but never retransmitted by the {cli} (§8.7)"
        )
    return [verdict, summary]


def _losses(n: Nak) -> list[int]:
    try:
        return n.losses()
    except WireError:
        return []


def _silence(own: Connection, srv: str, cli: str, at: Callable[[float], str]) -> str:
    last_c = max((r.time for r in own.by("client")), default=None)
    last_s = max((r.time for r in own.by("server")), default=None)
    if last_s is None:
        return f"the {srv} sent nothing"
    if last_c is None:
        return f"the {cli} sent nothing"
    first = cli if last_c < last_s else srv
    return f"last packets: {cli} at {at(last_c)}, {srv} at {at(last_s)} — the {first.split()[0]} went silent first"


def deaf_findings(
    roles: list[Role], last_sent: Mapping[str, float], first_sent: Mapping[str, float], t0: float
) -> list[str]:
    """Roles the suite stopped while still running that had sent nothing for DEAF_AFTER s: since
    their last packet, or, for one that never sent any, since the peer's first packet."""
    out = []
    for role in roles:
        if role.rc is not None or role.ended is None:
            continue
        last = last_sent.get(role.side)
        spoken_to = first_sent.get("client" if role.side == "server" else "server")
        ref = last if last is not None else spoken_to
        if ref is None or role.ended - ref < DEAF_AFTER:
            continue
        since = f"last packet at t={ref - t0:.2f} s" if last is not None else "it never sent a packet"
        out.append(
            f"{role.label} alive but deaf: still running, yet it had sent nothing for {role.ended - ref:.1f} s "
            f"({since})"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Everything together


def diagnose(
    roles: list[Role],
    conns: list[Connection],
    t0: float,
    client_leg: Connection | None = None,
    stopped: str | None = None,
    ctx: Context | None = None,
    uncaptured: str = NO_CAPTURE,
) -> Diagnosis:
    """A failed run's :class:`Diagnosis` from its roles and its capture (``conns``: the server's
    side, one per client; ``client_leg``: the client's own side behind a relay; ``stopped``: why
    the suite stopped the run early, which then already names a deaf role; ``ctx``: the case's
    context for the wire rules, which the culprit of a stall is read from; ``uncaptured``: why
    there is no connection, where ``conns`` is empty)."""
    diag = Diagnosis()
    fallen: dict[str, float | None] = {}  # side → when a role of it that crashed or hit a cap ended
    for role in roles:
        tail = log_tail(role.log)
        if tail:
            diag.tails[role.label] = tail
        crash = log_crash(role.log)
        limit = f" ({role.limit})" if role.limit else ""
        if crash:
            diag.findings.append(f"{role.label} {exit_text(role.rc)}: {crash}{limit}")
        elif crashed(role.rc, crash) or role.limit:
            diag.findings.append(f"{role.label} {exit_text(role.rc)}{limit}")
        if crash or crashed(role.rc, crash) or role.limit:
            fallen[role.side] = role.ended
        if role.stats and (s := last_stats(role.stats)):
            diag.stats[role.label] = stats_text(s)
    names = {r.side: r.stack for r in roles}
    legs = [client_leg] if client_leg is not None else conns
    last_sent: dict[str, float] = {}
    first_sent: dict[str, float] = {}  # a peer speaks to a role with its first packet the role can decode
    for leg in legs:
        for r in leg.records:
            last_sent[r.sender] = max(last_sent.get(r.sender, r.time), r.time)
            if r.packet is not None:
                first_sent[r.sender] = min(first_sent.get(r.sender, r.time), r.time)
    wire: list[str] = []
    spoiler: str | None = None
    for i, conn in enumerate(conns):
        prefix = f"connection {i + 1} (client port {conn.client[1]}): " if len(conns) > 1 else ""
        own = client_leg if len(conns) == 1 else None
        found, culprit = _wire(conn, names, t0, own, ctx)
        wire += [prefix + f for f in found]
        if culprit and diag.culprit is None and _outranks(culprit[1], fallen):
            diag.culprit, spoiler = prefix + culprit[0], culprit[1].sender
    if not stopped:
        # a peer gone quiet after the spoiling packet is its consequence, not a second fault
        deaf = deaf_findings(roles, last_sent, first_sent, t0)
        diag.findings += [f"then {f}" if spoiler and not f.startswith(spoiler) else f for f in deaf]
    if not conns:
        diag.findings.append(f"{uncaptured}: no wire symptoms")
    diag.findings += wire
    return diag


def _outranks(spoiling: Record, fallen: Mapping[str, float | None]) -> bool:
    """Whether the ``spoiling`` packet leads the reason over the roles that crashed or hit a cap
    (``fallen``: side → when it ended): only where each of them is the packet's receiver and ended
    after it came (libudt 4.11 aborts on a short handshake response, UDT4.md §5.1: the crash is
    the consequence, the packet the cause). A crash of the sender, or one before the packet or at
    an unknown time, leads as before."""
    return all(
        side != spoiling.sender and ended is not None and ended >= spoiling.time for side, ended in fallen.items()
    )


# ---------------------------------------------------------------------------------------------
# Watching a capture while it grows

_REC = struct.Struct("<IIII")
_MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\x4d\x3c\xb2\xa1": ("<", 1e-9)}


class WireWatch:
    """Who has sent what so far, read from a classic pcap file while it is being written.

    ``server`` is the server's endpoint; ``entry`` where clients send (the relay, else the
    server). :meth:`poll` reads the records added since the last call; :meth:`verdict` says
    whether the run is stuck."""

    def __init__(
        self, path: Path, server: Endpoint, entry: Endpoint | None = None, names: Mapping[str, str] | None = None
    ) -> None:
        self.path = path
        self.names = {side: f"{side} {(names or {}).get(side, '')}".strip() for side in ("server", "client")}
        self.server = server
        self.entry = entry or server
        self.last: dict[str, float] = {}  # side -> time of its last packet
        self.first_contact: float | None = None  # a client's first packet
        self.client_valid = False  # whether a client sent a packet the codec decodes
        self.client_junk: list[str] = []  # until then: why each packet a client sent was rejected
        self.ack: int | None = None  # the server's last ACK number
        self.top: int | None = None  # the largest data sequence number that reached the server
        self.first_data: float | None = None
        self.stalled_since: float | None = None  # data beyond the ACK number since then
        self._offset = 0
        self._endian = ""
        self._unit = 1e-6
        self._linktype = 0

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        pos = 0
        if not self._endian:
            if len(chunk) < 24 or chunk[:4] not in _MAGICS:
                return  # not (yet) a classic pcap
            self._endian, self._unit = _MAGICS[chunk[:4]]
            self._linktype = struct.unpack_from("<I", chunk, 20)[0] & 0x0FFFFFFF
            pos = 24
        while pos + 16 <= len(chunk):
            sec, frac, incl, _ = _REC.unpack_from(chunk, pos)
            if pos + 16 + incl > len(chunk):
                break  # the tool is still writing this record
            frame = chunk[pos + 16 : pos + 16 + incl]
            pos += 16 + incl
            dg = parse_frame(sec + frac * self._unit, self._linktype, frame)
            if dg is not None and dg.payload != SENTINEL:
                self._see(dg.time, dg.src, dg.dst, dg.payload)
        self._offset += pos

    def _see(self, t: float, src: Endpoint, dst: Endpoint, payload: bytes) -> None:
        if src[1] == self.server[1]:
            self.last["server"] = t
            if len(payload) >= 20 and payload[0] & 0x80 and (payload[0] & 0x7F, payload[1]) == (0, 2):
                ack = struct.unpack_from("!I", payload, 16)[0] & MAX
                if ack != self.ack:
                    self.ack = ack
                    self.stalled_since = t if self.top is not None and seqcmp(self.top, ack) >= 0 else None
        elif dst[1] == self.entry[1]:
            self.last["client"] = t
            if self.first_contact is None:
                self.first_contact = t
            if not self.client_valid:
                try:
                    decode(payload)
                    self.client_valid = True
                except WireError as e:
                    self.client_junk.append(str(e))
        if dst[1] == self.server[1] and len(payload) >= 16 and not payload[0] & 0x80:
            seq = struct.unpack_from("!I", payload, 0)[0]
            if self.first_data is None:
                self.first_data = t
            if self.top is None or seqcmp(seq, self.top) > 0:
                self.top = seq
            if self.ack is not None and self.stalled_since is None and seqcmp(seq, self.ack) >= 0:
                self.stalled_since = t

    def verdict(self, started: Mapping[str, float], now: float) -> str | None:
        """Why the run is stuck, or None. ``started``: for each side with a role still running,
        when it started (wall clock); the verdict needs both sides running."""
        if "server" not in started or "client" not in started:
            return None
        # a server is spoken to from a client's first packet on; a client speaks first, after
        # STARTUP at the latest
        since = {"server": self.first_contact, "client": started["client"] + STARTUP - DEAF_AFTER}
        quiet = {}
        for side in ("server", "client"):
            ref = self.last.get(side, since[side])
            if ref is not None and now - ref >= DEAF_AFTER:
                quiet[side] = ref
        if len(quiet) == 2 and all(side in self.last for side in quiet):
            first = min(quiet, key=lambda s: quiet[s])
            return (
                f"neither side sent anything for {DEAF_AFTER:.0f} s while both were running; "
                f"the {self.names[first]} went silent first"
            )
        for side, ref in quiet.items():
            who, other = self.names[side], "client" if side == "server" else "server"
            if side not in self.last and side == "client":
                return f"{who} alive but deaf: running for {now - started['client']:.1f} s without sending a packet"
            if side not in self.last and self.client_junk and not self.client_valid:
                # a listener rightly ignores what it cannot decode (§5.1): the client is at fault
                return (
                    f"the {self.names['client']} sent {len(self.client_junk)} packet(s) in {now - ref:.1f} s, none "
                    f"of which the server could decode ({self.client_junk[0]}), and the server rightly answered none"
                )
            if side not in self.last:
                return f"{who} alive but deaf: running, yet it never answered the client ({now - ref:.1f} s)"
            talking = self.last.get(other, ref) > ref
            return f"{who} alive but deaf: running, yet it sent nothing for {now - ref:.1f} s" + (
                f" while the {other} kept sending" if talking else ""
            )
        if self.ack is None and self.first_data is not None and now - self.first_data >= STALL_AFTER:
            return f"the server received data for {now - self.first_data:.0f} s without sending a single ACK"
        if self.ack is not None and self.stalled_since is not None and now - self.stalled_since >= STALL_AFTER:
            return (
                f"the ACK number stayed at {self.ack:#010x}{wrap_note(self.ack)} for "
                f"{now - self.stalled_since:.0f} s while data beyond it reached the server"
            )
        return None


__all__ = [
    "DEAF_AFTER",
    "STALL_AFTER",
    "STARTUP",
    "WireWatch",
    "deaf_findings",
    "diagnose",
    "wire_findings",
    "wrap_note",
]
