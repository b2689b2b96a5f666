"""Wire rules for FRTP, checked on captures of both paths (:mod:`udtconf.sabul.trace` under
FRTP's profile, :mod:`.profile`), each keyed to a section of ``docs/spec/FRTP.md`` as
``frtp/<section>/<rule>``.

FRTP keeps SABUL's formats, error control and teardown, so :func:`rules_for` gives the SABUL
rules FRTP inherits unchanged (:data:`INHERITED`, keyed ``sabul/…`` and cited from SABUL.md)
followed by FRTP's own. Sides, legs and verdicts are SABUL's (:mod:`udtconf.sabul.checks`): a
sender rule is judged on the relay ↔ sender leg of the ``loss`` case, a receiver rule on the
receiver ↔ relay leg.

Timing rules are judged on capture timestamps of a loopback capture on a shared, loaded host,
so they use robust statistics and state their tolerances (:data:`IPT_TOLERANCE` and the others).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

from ..checks import Inconclusive, Rules, Violation
from ..sabul import checks as sabul
from ..sabul.checks import RuleFn, SabulContext, SabulRule
from ..sabul.trace import Mark, SabulSession
from ..sabul.wire import Ack, Err, Syn, describe
from .cases import ALL_CASES, TRANSFER_CASES
from .wire import FrtpOptionBlock, ip_text

# §4: the IPT. Capture timestamps on a loaded 2-core host jitter by tens of µs and a sender that
# wakes late may catch up with a short burst (§9 TC 11), so single gaps decide nothing: the
# *median* gap must be within ±20 % of the IPT, and the mean rate over the session must not
# exceed the negotiated rate by more than 5 % (a burst that catches up is allowed; a faster
# pace is not). Judged only with at least MIN_GAPS gaps.
IPT_TOLERANCE = 0.20
RATE_TOLERANCE = 0.05
MIN_GAPS = 100
# §5: the whole loss list every 20 ms: a number still missing is listed again within 60 ms
# (three periods: scheduling delays) and not twice within 5 ms (a period far below 20 ms).
ERR_PERIOD = 0.020
ERR_REPEAT_MAX = 0.060
ERR_REPEAT_MIN = 0.005
# §5: an ACK every 100 ms when it advanced: new in-order data is acknowledged within 250 ms, and
# two periodic ACKs are at least 50 ms apart (a "buffer full" ACK, after a packet beyond the
# resequencing window, is exempt).
ACK_WITHIN = 0.250
ACK_GAP_MIN = 0.050
# §4: EXP after 1 s without ACK or ERR: the sender sends again within 1.5 s while data is unacked.
EXP_WITHIN = 1.5

# The SABUL rules FRTP inherits unchanged (FRTP.md §3, §5, §9 TC 8, 13). Not inherited: the
# 40-byte block rules (FRTP's block is §3.3), SABUL's SYN and ACK-timer rules (FRTP has no SYN,
# and its "buffer full" ACK may repeat a number), and SABUL's MSS case.
INHERITED = (
    "sabul/3.1/data-decodable",
    "sabul/3.2/control-decodable",
    "sabul/3.2/nothing-after-echo",
    "sabul/2/data-after-echo",
    "sabul/5/new-data-in-order",
    "sabul/5/window",
    "sabul/5/retransmit-what-was-reported",
    "sabul/6/err-on-gap",
    "sabul/6/err-lists-missing-only",
    "sabul/6/ack-covers-received",
    "sabul/10.1/sender-half-closes-after-the-last-ack",
    "sabul/10.1/receiver-closes-after-the-sender",
)

RULES: Rules[SabulRule] = Rules()
rule_by_id = RULES.by_id


def rules_for(testcase: str) -> list[SabulRule]:
    """The inherited SABUL rules, then FRTP's, that apply to ``testcase``."""
    inherited = [sabul.rule_by_id(i) for i in INHERITED]
    return [r for r in inherited + list(RULES) if testcase in r.cases and testcase in ALL_CASES]


def rule(
    id: str, section: str, grade: str, side: str, requirement: str, cases: frozenset[str] = ALL_CASES
) -> Callable[[RuleFn], RuleFn]:
    return RULES.declare(lambda fn: SabulRule(id, section, grade, requirement, fn, cases, side))


def _v(side: str, mark: Mark | None, message: str) -> Violation:
    return Violation(side, mark.frame if mark else None, message)


def _frtp(s: SabulSession) -> tuple[FrtpOptionBlock, FrtpOptionBlock]:
    """The session's 52-byte block and echo (decoded under FRTP's profile); Inconclusive
    without them."""
    block, echo = s.profile_block, s.profile_echo
    if not isinstance(block, FrtpOptionBlock) or not isinstance(echo, FrtpOptionBlock):
        raise Inconclusive("no 52-byte option block and echo in the capture")
    return block, echo


# ---------------------------------------------------------------------------------------------
# §2, §3 set-up and formats


# The block and echo rules are SABUL's, which read the block as the session's profile decodes it:
# FRTP's 52-byte block.
rule(
    "frtp/3.3/option-block",
    "3.3, 9",
    "MUST",
    "receiver",
    "The receiver's 52-byte block is valid: words 0–9 as SABUL.md §3.4, data_ip neither multicast nor "
    "255.255.255.255, rate_bps ≠ 0.",
)(sabul.check_option_block)
rule(
    "frtp/3.3/echo",
    "2, 3.3, 9",
    "MUST",
    "sender",
    "A sender that accepts echoes the block: words 0, 1, 5–9, data_ip and rate_bps unchanged, words 2–4 "
    "possibly lowered to its packet size (SABUL.md §3.4).",
)(sabul.check_echo)


@rule(
    "frtp/3.2/no-syn",
    "3.2, 7",
    "MUST",
    "receiver",
    "No SYN: the receiver never sends a type-4 control frame.",
)
def _no_syn(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    for c in s.of_type(Syn):
        yield _v("receiver", c.mark, f"{describe(c.control)}: FRTP has no SYN")
        return


@rule(
    "frtp/2/data-to-the-data-address",
    "1, 2",
    "MUST",
    "sender",
    "DATA goes to the data address the block announced (data_ip, data_port; data_ip 0 = the control peer), "
    "not to the receiver's control address.",
)
def _data_address(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _frtp(s)
    assert s.data_addr is not None
    if s.misaddressed:
        m = s.misaddressed[0]
        yield _v("sender", m.mark, f"{len(s.misaddressed)} DATA datagram(s) to the control address {s.receiver[0]}")
    if ctx.testcase != "empty" and not s.data:
        yield _v("sender", s.echo_mark, f"no DATA reached the announced data address {s.data_addr[0]}:{s.data_addr[1]}")


@rule(
    "frtp/2/control-off-the-data-path",
    "1, 2",
    "MUST",
    "receiver",
    "The paths are kept apart: a receiver that announces a data address other than its control address "
    "runs the control connection on its control address, never on the data address.",
)
def _control_apart(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    block, _ = _frtp(s)
    if block.data_ip == 0:
        raise Inconclusive("data_ip 0: the data path is the control address by definition")
    if s.receiver[0] == ip_text(block.data_ip):
        yield _v("receiver", s.block_mark, f"control connection from the data address {s.receiver[0]}")


# ---------------------------------------------------------------------------------------------
# §4 sender


def _paced(s: SabulSession) -> tuple[list[float], float, int]:
    """The DATA gaps, the negotiated IPT and rate; Inconclusive with fewer than MIN_GAPS gaps."""
    _, echo = _frtp(s)
    t = [d.mark.time for d in s.data]
    gaps = [b - a for a, b in zip(t, t[1:], strict=False)]
    if len(gaps) < MIN_GAPS:
        raise Inconclusive(f"{len(gaps)} DATA gaps, fewer than {MIN_GAPS}")
    return gaps, echo.ipt(), echo.rate_bps


@rule(
    "frtp/4/fixed-ipt",
    "4",
    "SHOULD",
    "sender",
    "Every packet (retransmissions included) leaves one IPT = (pkt_size + 28) · 8 / rate_bps after the "
    f"previous one (checked: the median DATA gap within ±{IPT_TOLERANCE:.0%} of the IPT, over ≥ {MIN_GAPS} gaps).",
    cases=TRANSFER_CASES,
)
def _fixed_ipt(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    gaps, ipt, rate = _paced(s)
    med = statistics.median(gaps)
    if abs(med - ipt) > IPT_TOLERANCE * ipt:
        yield _v(
            "sender",
            s.data[0].mark,
            f"median DATA gap {med * 1e6:.0f} µs; the negotiated {rate} bit/s fixes "
            f"IPT {ipt * 1e6:.0f} µs (±{IPT_TOLERANCE:.0%})",
        )


@rule(
    "frtp/4/rate-not-exceeded",
    "4, 2",
    "MUST",
    "sender",
    "The sender never sends faster than the negotiated rate (checked: DATA datagrams over the span of "
    f"the session, at the IPT's IP size, not above rate_bps + {RATE_TOLERANCE:.0%}).",
    cases=TRANSFER_CASES,
)
def _rate(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    gaps, ipt, rate = _paced(s)
    span = s.data[-1].mark.time - s.data[0].mark.time
    if span * (1 + RATE_TOLERANCE) < len(gaps) * ipt:
        seen = len(gaps) * ipt / span * rate if span > 0 else float("inf")
        yield _v(
            "sender",
            s.data[-1].mark,
            f"{len(gaps) + 1} DATA datagrams in {span * 1000:.1f} ms: {seen / 1e6:.1f} Mbit/s, "
            f"negotiated {rate / 1e6:.1f}",
        )


@rule(
    "frtp/4/exp",
    "4",
    "MUST",
    "sender",
    f"EXP: after 1 s without ACK or ERR, unacknowledged packets are sent again (checked: within {EXP_WITHIN} s "
    "of the last DATA or feedback while data is unacknowledged, the sender sends).",
    cases=TRANSFER_CASES,
)
def _exp(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    acks = [(c.mark.time, c.control.ack_no) for c in s.of_type(Ack) if isinstance(c.control, Ack)]
    feedback = sorted([c.mark.time for c in s.controls if isinstance(c.control, Ack | Err)])
    end = s.to_receiver.fin or s.to_receiver.rst or s.to_sender.fin or s.to_sender.rst
    events = sorted([(d.mark.time, "data", d) for d in s.data if d.seq is not None], key=lambda e: e[0])
    if not events or end is None:
        raise Inconclusive("no DATA or no end of the session in the capture")
    sent_max = -1
    for i, (t, _, d) in enumerate(events):
        assert d.seq is not None
        sent_max = max(sent_max, d.seq)
        acked = max((a for ta, a in acks if ta <= t), default=0)
        if acked > sent_max:
            continue
        nxt = events[i + 1][0] if i + 1 < len(events) else end.time
        last_fb = max((f for f in feedback if f <= nxt), default=t)
        quiet_from = max(t, last_fb)
        acked_by_then = max((a for ta, a in acks if ta <= nxt), default=0)
        if acked_by_then > sent_max:
            continue
        if nxt - quiet_from > EXP_WITHIN:
            yield _v(
                "sender",
                d.mark,
                f"{(nxt - quiet_from):.2f} s without sending while packets up to {sent_max} were unacknowledged "
                f"(ACK {acked_by_then}) and no feedback came",
            )
            return


# ---------------------------------------------------------------------------------------------
# §5 receiver


@rule(
    "frtp/5/err-every-20ms",
    "5",
    "SHOULD",
    "receiver",
    f"Every 20 ms the whole loss list is sent as ERR: a number still missing is listed again within "
    f"{ERR_REPEAT_MAX * 1000:.0f} ms, and two periodic ERRs listing it are at least {ERR_REPEAT_MIN * 1000:.0f} ms "
    "apart (the ERR on the gap is not periodic).",
    cases=frozenset({"loss"}),
)
def _err_period(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    arrivals: dict[int, list[float]] = {}
    for d in s.data:
        if d.seq is not None:
            arrivals.setdefault(d.seq, []).append(d.mark.time)
    reports: dict[int, list[tuple[float, Mark]]] = {}
    for c in s.controls:
        if isinstance(c.control, Err):
            for n in sabul.reported_losses(c.control):
                reports.setdefault(n, []).append((c.mark.time, c.mark))
    repeats = 0
    end = s.to_receiver.fin.time if s.to_receiver.fin else float("inf")
    for n, times in reports.items():
        for i, ((t, mark), nxt) in enumerate(zip(times, [*times[1:], None], strict=False)):
            arrived = next((a for a in arrivals.get(n, []) if a > t), float("inf"))
            if nxt is not None:
                repeats += 1
                # the first report is the ERR on the gap, independent of the 20 ms tick (§5)
                if i > 0 and nxt[0] - t < ERR_REPEAT_MIN and nxt[0] < arrived:
                    yield _v("receiver", nxt[1], f"{n} listed again {(nxt[0] - t) * 1000:.1f} ms after the last ERR")
                    return
            deadline = t + ERR_REPEAT_MAX
            if arrived > deadline and end > deadline and (nxt is None or nxt[0] > deadline):
                yield _v(
                    "receiver",
                    mark,
                    f"{n} still missing {ERR_REPEAT_MAX * 1000:.0f} ms after this ERR and not listed again",
                )
                return
    if not repeats:
        raise Inconclusive("no loss stayed outstanding past one ERR: the period does not show")


@rule(
    "frtp/5/ack-every-100ms",
    "5, 9",
    "SHOULD",
    "receiver",
    f"An ACK every 100 ms when the ACK point advanced: new in-order data is acknowledged within "
    f"{ACK_WITHIN * 1000:.0f} ms, and ACKs are at least {ACK_GAP_MIN * 1000:.0f} ms apart unless one answers a "
    "packet beyond the resequencing window.",
    cases=TRANSFER_CASES,
)
def _ack_period(s: SabulSession, ctx: SabulContext) -> Iterable[Violation]:
    _frtp(s)
    assert s.block is not None
    acks = [(c.mark.time, c.control.ack_no, c.mark) for c in s.of_type(Ack) if isinstance(c.control, Ack)]
    received: set[int] = set()
    point, last_ack = 0, 0
    pending: tuple[float, int, Mark] | None = None  # the first arrival the ACK point has not covered
    j = 0
    for d in s.data:
        while j < len(acks) and acks[j][0] <= d.mark.time:
            last_ack = max(last_ack, acks[j][1])
            if pending and last_ack >= pending[1]:
                pending = None
            j += 1
        if pending and d.mark.time - pending[0] > ACK_WITHIN:
            yield _v("receiver", pending[2], f"in-order data up to {pending[1]} not acknowledged within 250 ms")
            return
        if d.seq is None:
            continue
        received.add(d.seq)
        while point in received:
            point += 1
        if point > last_ack and pending is None:
            pending = (d.mark.time, point, d.mark)
    window_hits = [d.mark.time for d in s.data if d.seq is not None and d.seq - 0 >= s.block.recv_flag_size]
    for (t0, _, _), (t1, _, m1) in zip(acks, acks[1:], strict=False):
        if t1 - t0 < ACK_GAP_MIN and not any(t0 <= w <= t1 for w in window_hits):
            yield _v("receiver", m1, f"ACK {(t1 - t0) * 1000:.1f} ms after the previous one: not every 100 ms")
            return


__all__ = ["INHERITED", "RULES", "rule_by_id", "rules_for"]
