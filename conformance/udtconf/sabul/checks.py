"""Wire rules for SABUL, checked on captured sessions (:mod:`.trace`), each keyed to a section
of ``docs/spec/SABUL.md`` as ``sabul/<section>/<rule>``.

A rule constrains one side, the **sender** (the TCP listener, the data source) or the
**receiver**, and is judged only on a session leg that shows that side's own behaviour
(``SabulSession.judges``): behind the ``loss`` case's relay, the sender's rules are read on the
relay ↔ sender leg and the receiver's on the receiver ↔ relay leg, where the drops show as
gaps. A violation names the side, the capture frame where it shows and what is wrong; an
:class:`~udtconf.checks.Inconclusive` says the capture cannot decide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..checks import Inconclusive, Rule, Rules, Violation
from ..loss_list import count
from .cases import ALL_CASES
from .trace import ControlRecord, DataRecord, Mark, SabulSession
from .wire import Ack, Err, SabulWireError, Syn, describe

IP_UDP_HEADERS = 28
ERR_PROMPT = 0.2  # s: "immediately" on a loaded 2-core host
SYN_GAP_MAX = 0.1  # s: a SYN every 10 ms, with room for scheduling delays
# s: a datagram the capture shows less than this before an ERR may still wait in the receiver's
# socket buffer (seen: a whole-list ERR 19 µs after the capture of a number it listed)
ARRIVAL_GRACE = 0.001


@dataclass
class SabulContext:
    testcase: str
    mss: dict[str, int] = field(default_factory=dict)  # the case's MSS per role (server = sender)
    dropped: set[int] = field(default_factory=set)


RuleFn = Callable[[SabulSession, SabulContext], Iterable[Violation]]


@dataclass(frozen=True)
class SabulRule(Rule[SabulSession, SabulContext]):
    side: str  # "sender" | "receiver": the side the rule constrains

    def run(self, session: SabulSession, ctx: SabulContext) -> list[Violation]:
        if not self.applies(session):
            return []
        return super().run(session, ctx)

    def applies(self, session: SabulSession) -> bool:
        return self.side in session.judges


RULES: Rules[SabulRule] = Rules()
rules_for = RULES.for_case
rule_by_id = RULES.by_id


def rule(
    id: str, section: str, grade: str, side: str, requirement: str, cases: frozenset[str] = ALL_CASES
) -> Callable[[RuleFn], RuleFn]:
    return RULES.declare(lambda fn: SabulRule(id, section, grade, requirement, fn, cases, side))


def _at(mark: Mark | None) -> int | None:
    return mark.frame if mark else None


def _v(side: str, mark: Mark | None, message: str) -> Violation:
    return Violation(side, _at(mark), message)


def _need_setup(s: SabulSession) -> None:
    if s.block is None or s.echo is None:
        raise Inconclusive("no option block and echo in the capture")


# ---------------------------------------------------------------------------------------------
# §3 formats


@rule(
    "sabul/3.1/data-decodable",
    "3.1",
    "MUST",
    "sender",
    "Every DATA datagram is the 32-bit sequence number (bit 31 clear) and 1 … payload_size bytes: "
    "4 < length ≤ the echoed pkt_size.",
)
def _data_decodable(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    for d in s.data:
        if d.error is not None:
            yield _v("sender", d.mark, f"{d.error}; bytes {d.raw[:16].hex()}")


@rule(
    "sabul/3.2/control-decodable",
    "3.2–3.3",
    "MUST",
    "receiver",
    "The control stream after the block is ACK (1), ERR (2) and SYN (4) frames only; an ERR carries "
    "1 … max_loss_length words that decode (no trailing range start, no start > end).",
)
def _control_decodable(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    if s.to_sender.hole:
        raise Inconclusive(f"control stream incomplete: {s.to_sender.hole}")
    if s.control_error:
        mark, err = s.control_error
        yield _v("receiver", mark, str(err))


@rule(
    "sabul/3.2/nothing-after-echo",
    "3.2",
    "MUST",
    "sender",
    "The stream carries nothing else: the sender writes exactly the echo and nothing after it.",
)
def _after_echo(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    if s.after_echo:
        extra = len(s.to_receiver.data) - s.head_len
        yield _v("sender", s.after_echo, f"{extra} bytes written after the {s.head_len}-byte echo")


@rule(
    "sabul/3.4/option-block",
    "3.4",
    "MUST",
    "receiver",
    "The receiver's block is valid: data_port 1…65535, pkt_size 32…65507, payload_size = pkt_size − 4, "
    "max_loss_length = ⌊pkt_size/4⌋ − 2, blockable 0/1, recv_flag_size 1…2^30−1, reserved 0.",
)
def check_option_block(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    """The receiver's block as the session's profile decodes it (a protocol built on SABUL
    with a longer block declares this check as its own block rule)."""
    block = s.profile_block or s.block
    if block is None:
        raise Inconclusive("no option block in the capture")
    for problem in block.problems():
        yield _v("receiver", s.block_mark, problem)


@rule(
    "sabul/3.4/echo",
    "3.4",
    "MUST",
    "sender",
    "The echo is the block with words 2–4 possibly lowered to the sender's packet size "
    "(pkt_size' ≤ pkt_size, payload_size' = pkt_size' − 4, max_loss_length' = ⌊pkt_size'/4⌋ − 2), "
    "words 0, 1, 5–9 unchanged.",
)
def check_echo(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    """The sender's echo of the block as the session's profile decodes both (a protocol built
    on SABUL with a longer block declares this check as its own echo rule)."""
    _need_setup(s)
    assert s.block is not None and s.echo is not None
    if s.profile_block is not None and s.profile_echo is not None:
        bad = s.profile_block.problems() or None
        problems = s.profile_block.echo_problems(s.profile_echo)
    else:
        bad = s.block.problems() or None
        problems = s.block.echo_problems(s.echo)
    if bad:
        raise Inconclusive("the block itself is invalid")
    for problem in problems:
        yield _v("sender", s.echo_mark, problem)


@rule(
    "sabul/3.4/mss-honoured",
    "3.4",
    "MUST",
    "sender",
    "With MSS set (server 1052, client 1280) the receiver's block proposes pkt_size = 1280 − 28 = 1252 "
    "and the sender's echo lowers it to 1052 − 28 = 1024 (max_loss_length 254).",
    cases=frozenset({"mss"}),
)
def _mss(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _need_setup(s)
    assert s.block is not None and s.echo is not None
    if "receiver" in s.judges and s.block.pkt_size != ctx.mss["client"] - IP_UDP_HEADERS:
        yield _v(
            "receiver",
            s.block_mark,
            f"block proposes pkt_size {s.block.pkt_size}, not MSS {ctx.mss['client']} − 28 (the adapter must pass MSS)",
        )
    want = min(s.block.pkt_size, ctx.mss["server"] - IP_UDP_HEADERS)
    if s.echo.pkt_size != want:
        yield _v("sender", s.echo_mark, f"echo pkt_size {s.echo.pkt_size}, expected {want} (sender MSS − 28)")


# ---------------------------------------------------------------------------------------------
# §5 sender


@rule(
    "sabul/2/data-after-echo",
    "2, 5",
    "MUST",
    "sender",
    "The data channel follows the control connection: no DATA before the sender has written its echo.",
)
def _data_after_echo(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _need_setup(s)
    assert s.echo_mark is not None
    early = [d for d in s.data if d.mark.time < s.echo_mark.time]
    if early:
        yield _v("sender", early[0].mark, f"{len(early)} DATA datagram(s) before the echo (frame {s.echo_mark.frame})")


@rule(
    "sabul/5/new-data-in-order",
    "4, 5",
    "MUST",
    "sender",
    "The first DATA packet of a session is sequence number 0, and new packets take NextSeq, NextSeq + 1, …: "
    "a number is sent for the first time only after every smaller one.",
)
def _new_in_order(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    expect = 0
    for d in s.first_sends():
        assert d.seq is not None
        if d.seq != expect:
            yield _v("sender", d.mark, f"new DATA {d.seq}, expected {expect}")
            return
        expect += 1


@rule(
    "sabul/5/window",
    "5, 8",
    "MUST",
    "sender",
    "At most W ≤ recv_flag_size packets unacknowledged: a new packet s is sent only while s − LastAck < "
    "recv_flag_size (the block's reorder window), LastAck being the last ACK the sender had received.",
)
def _window(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _need_setup(s)
    assert s.block is not None
    acks = [(c.mark.time, c.control.ack_no) for c in s.of_type(Ack) if isinstance(c.control, Ack)]
    last_ack, i = 0, 0
    for d in s.first_sends():
        while i < len(acks) and acks[i][0] <= d.mark.time:
            last_ack = max(last_ack, acks[i][1])
            i += 1
        assert d.seq is not None
        if d.seq - last_ack >= s.block.recv_flag_size:
            yield _v(
                "sender",
                d.mark,
                f"DATA {d.seq} with LastAck {last_ack}: beyond the {s.block.recv_flag_size}-packet window",
            )
            return


@rule(
    "sabul/5/retransmit-what-was-reported",
    "5.2, 5.3",
    "SHOULD",
    "sender",
    "A packet is sent again only after an ERR listed it, or after an EXP (1 s without ACK or ERR while data "
    "was outstanding).",
)
def _retransmit(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    reported: set[int] = set()
    feedback = [c for c in s.controls if isinstance(c.control, Ack | Err)]
    seen: set[int] = set()
    i = 0
    last_feedback = s.echo_mark.time if s.echo_mark else 0.0
    for d in s.data:
        while i < len(feedback) and feedback[i].mark.time <= d.mark.time:
            c = feedback[i].control
            if isinstance(c, Err):
                reported |= set(reported_losses(c))
            last_feedback = feedback[i].mark.time
            i += 1
        if d.seq is None:
            continue
        if d.seq in seen and d.seq not in reported and d.mark.time - last_feedback < 0.9:
            yield _v("sender", d.mark, f"DATA {d.seq} sent again without an ERR listing it or an EXP")
            return
        seen.add(d.seq)


def reported_losses(err: Err) -> list[int]:
    """The sequence numbers ``err`` reports lost; none where its ranges are malformed or name
    more than 2^20 packets."""
    try:
        ranges = err.ranges()
    except SabulWireError:
        return []
    if count(ranges) > 1 << 20:
        return []
    return [n for first, last in ranges for n in range(first, last + 1)]


# ---------------------------------------------------------------------------------------------
# §6 receiver


def _arrivals(s: SabulSession) -> list[DataRecord]:
    return [d for d in s.data if d.seq is not None]


@rule(
    "sabul/6/err-on-gap",
    "6",
    "MUST",
    "receiver",
    "If s > LRSN + 1, the numbers LRSN+1 … s−1 not yet received go into the loss list and one ERR listing "
    "exactly these numbers is sent immediately (checked: within 200 ms).",
    cases=frozenset({"loss"}),
)
def _err_on_gap(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    errs = [c for c in s.controls if isinstance(c.control, Err)]
    lrsn = -1
    received: set[int] = set()
    for d in _arrivals(s):
        assert d.seq is not None
        if d.seq > lrsn + 1:
            gap = [n for n in range(lrsn + 1, d.seq) if n not in received]
            match = [
                e
                for e in errs
                if 0 <= e.mark.time - d.mark.time <= ERR_PROMPT
                and isinstance(e.control, Err)
                and reported_losses(e.control) == gap
            ]
            if gap and not match:
                yield _v(
                    "receiver",
                    d.mark,
                    f"gap {gap[0]}…{gap[-1]} before DATA {d.seq}: no ERR of exactly it within 200 ms",
                )
        lrsn = max(lrsn, d.seq)
        received.add(d.seq)


@rule(
    "sabul/6/err-lists-missing-only",
    "6",
    "MUST",
    "receiver",
    "An ERR lists only numbers that are missing: below the largest number received (LRSN) and not yet received "
    "(checked: not captured on their way to the receiver 1 ms or more before the ERR).",
)
def _err_missing_only(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    arrivals = _arrivals(s)
    i, lrsn = 0, -1
    received: dict[int, float] = {}  # first arrival of each number
    for c in s.controls:
        while i < len(arrivals) and arrivals[i].mark.time <= c.mark.time:
            seq = arrivals[i].seq
            assert seq is not None
            received.setdefault(seq, arrivals[i].mark.time)
            lrsn = max(lrsn, seq)
            i += 1
        if not isinstance(c.control, Err):
            continue
        lost = reported_losses(c.control)
        beyond = [n for n in lost if n >= lrsn]
        if beyond:
            yield _v("receiver", c.mark, f"{describe(c.control)} lists {beyond[0]}, not below LRSN {lrsn}")
            return
        got = [n for n in lost if n in received and received[n] <= c.mark.time - ARRIVAL_GRACE]
        if got:
            yield _v("receiver", c.mark, f"{describe(c.control)} lists {got[0]}, which had arrived")
            return


@rule(
    "sabul/6/ack-increases",
    "6",
    "MUST",
    "receiver",
    "The ACK timer sends an ACK only if the ACK number is greater than the last ACK sent: ACK numbers "
    "strictly increase.",
)
def _ack_increases(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    last = -1
    for c in s.of_type(Ack):
        assert isinstance(c.control, Ack)
        if c.control.ack_no <= last:
            yield _v("receiver", c.mark, f"ACK {c.control.ack_no} after ACK {last}")
        last = c.control.ack_no


@rule(
    "sabul/6/ack-covers-received",
    "3.2, 6",
    "MUST",
    "receiver",
    "ACK a says everything before a was received: every number below a had arrived when the ACK was sent.",
)
def _ack_covers(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    arrivals = _arrivals(s)
    received: set[int] = set()
    i = 0
    for c in s.of_type(Ack):
        assert isinstance(c.control, Ack)
        while i < len(arrivals) and arrivals[i].mark.time <= c.mark.time:
            seq = arrivals[i].seq
            assert seq is not None
            received.add(seq)
            i += 1
        missing = next((n for n in range(c.control.ack_no) if n not in received), None)
        if missing is not None:
            yield _v("receiver", c.mark, f"ACK {c.control.ack_no} but {missing} had not arrived")
            return


@rule(
    "sabul/6/syn-count",
    "3.2, 6",
    "MUST",
    "receiver",
    "A SYN carries the DATA datagrams received since the previous SYN: the SYNs' running total never "
    "exceeds the datagrams that had reached the receiver.",
)
def _syn_count(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    times = [d.mark.time for d in s.data]
    total, i = 0, 0
    for c in s.of_type(Syn):
        assert isinstance(c.control, Syn)
        total += c.control.received
        while i < len(times) and times[i] <= c.mark.time:
            i += 1
        if total > i:
            yield _v("receiver", c.mark, f"SYNs count {total} datagrams so far, only {i} had been sent to the receiver")
            return


@rule(
    "sabul/6/syn-period",
    "6, 9",
    "SHOULD",
    "receiver",
    "SYN timer: a SYN every 10 ms from the echo on, sent even when idle (checked: no gap over 100 ms "
    "while the session is open).",
    cases=frozenset({"transfer", "loss"}),
)
def _syn_period(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _need_setup(s)
    assert s.echo_mark is not None
    end = s.to_receiver.fin.time if s.to_receiver.fin else None
    syns = [c.mark for c in s.of_type(Syn)]
    if not syns:
        yield _v("receiver", s.echo_mark, "no SYN at all")
        return
    prev = s.echo_mark
    for m in syns + ([Mark(0, end)] if end is not None else []):
        if m.time - prev.time > SYN_GAP_MAX:
            yield _v("receiver", m if m.frame else prev, f"{(m.time - prev.time) * 1000:.0f} ms without a SYN")
            return
        prev = m


# ---------------------------------------------------------------------------------------------
# §10 teardown


@rule(
    "sabul/10.1/sender-half-closes-after-the-last-ack",
    "10.1",
    "MUST",
    "sender",
    "The sender ends the session with a FIN (half-close and drain), never a reset, and only after an ACK "
    "acknowledged every packet it sent.",
)
def _sender_close(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    stream = s.to_receiver
    if stream.rst and (stream.fin is None or stream.rst.time < stream.fin.time):
        yield _v("sender", stream.rst, "the sender reset the control connection instead of closing it")
        return
    if stream.fin is None:
        raise Inconclusive("the sender's FIN is not in the capture")
    sent = {d.seq for d in s.data if d.seq is not None}
    acked = max(
        (c.control.ack_no for c in s.of_type(Ack) if isinstance(c.control, Ack) and c.mark.time <= stream.fin.time),
        default=0,
    )
    if sent and acked < max(sent) + 1:
        yield _v("sender", stream.fin, f"FIN with ACK {acked}, but packets up to {max(sent)} were sent")
    if stream.rst:
        yield _v("sender", stream.rst, "a reset followed the FIN: the sender closed with unread data (no drain)")


@rule(
    "sabul/10.1/receiver-closes-after-the-sender",
    "10.1",
    "MUST",
    "receiver",
    "The receiver closes only after the sender's FIN (a receiver that closes first aborts), and with a FIN, "
    "not a reset.",
)
def _receiver_close(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    mine, theirs = s.to_sender, s.to_receiver
    end = mine.rst or mine.fin
    if end is None:
        raise Inconclusive("the receiver's close is not in the capture")
    if theirs.fin is None or end.time < theirs.fin.time:
        yield _v("receiver", end, "the receiver closed the control connection before the sender's FIN")
    elif mine.rst:
        yield _v("receiver", mine.rst, "the receiver reset the control connection after a complete session")


def describe_record(c: ControlRecord | DataRecord) -> str:
    if isinstance(c, DataRecord):
        return describe(c.packet) if c.packet else c.raw[:16].hex()
    return describe(c.control)
