"""Recovery from a lost retransmission, judged against the reference stack in the same session
(issue 13).

The fault: the relay (:class:`~udtconf.udt.relay.LossRelay`, ``drop_rexmit``) drops data packet N
— :data:`REXMIT_AT` packets after the client's ISN, well after slow start — *and its first
retransmission*. The receiver NAKs the gap at once (UDT4.md §8.2 step 4), the sender
retransmits N at once (§8.7) and the relay drops that copy too. 4.11 then has nothing that
NAKs N again: its receiver sends no periodic NAK (§8.4) and, once an ACK2 has confirmed ACK
number N, no more ACKs either (§8.3), so the sender hears nothing until its EXP timer fires —
at least 300 ms after the last packet from the receiver (§9.4) — and puts everything
unacknowledged back into its loss list. The second retransmission gets through.

Earlier, offset :data:`SLOW_START_DROP` is dropped once: the NAK for it ends slow start (§12.4:
the first NAK in slow start only ends it, with no decrease), so the NAK for N falls in
congestion avoidance, where it opens a congestion period (one decrease, ×1.125).

The relay also forms a :data:`BOTTLENECK_PPS` drop-tail bottleneck. Unshaped, a sender on
loopback outruns the relay's Python thread: its socket then holds a backlog of data (measured:
up to 436 ms behind the sender's own time stamps), every copy of N and every ACK2 is seen that
much late, and the recovery time measured is the relay's, not the stack's. Behind the
bottleneck the relay keeps up and the sender's pacing shows; its queue
(:data:`BOTTLENECK_QUEUE`) is long enough that it seldom drops, so N's are nearly always the
only losses to recover (libudt's sender, which runs ahead of the bottleneck in bursts, overran
it in 2 of 9 libudt × libudt runs here: only the reference's time grows then, and the judgement
loosens). ``relay_drops`` says how many packets the relay dropped in all.

What the relay's own record (its pcap of both legs, with its receive times) gives, for any
stack (:func:`measure`):

* **recovery time** — from the drop of the original of N to the forwarding of the copy of N
  that got through;
* **NAKs naming N** that reached the sender — the wire's count of the sender's decreases for
  this loss: CUDTCC decreases only in ``onLoss``, once per NAK at most (§12.4), never on EXP
  (§12.5);
* what triggered the copy that got through (a NAK naming N since the previous copy, or EXP),
  how many packets the sender retransmitted in all, and the sender's **sending period** (the
  median gap between new data packets as the relay receives them, before its queue) just
  before and just after the NAK of N. The period is reported, not judged: one decrease is only
  12.5 %, and the medians here move either way by up to 3× from run to run (a sender that runs
  ahead of the bottleneck until its window closes sends in bursts whose gaps are not ``P``;
  behind a slower bottleneck, 3000 packet/s, udt-rs's paced sender did show ×1.12–1.13).

:func:`judge` compares a stack pair's numbers with the reference pair's (libudt × libudt)
measured in the same session; :data:`CASES` puts the comparison into the catalogue.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from udtharness.stacks import Stack

from ..runner import InteropRunner, RunResult
from ..seq import MAX, seqcmp
from .cases import CASES as INTEROP_CASES
from .interop import UdtRun, UdtRunResult
from .relay import LossRelay
from .trace import Connection
from .wire import Nak

ADAPTER_CASE = "loss"  # what the stacks play: a STREAM transfer through the suite's relay
REXMIT_BYTES = 4 * 1024 * 1024  # 2881 full packets at MSS 1500
SLOW_START_DROP = 200  # dropped once: its NAK ends slow start
REXMIT_AT = 1000  # N: the original and the first retransmission dropped
# The bottleneck: ≈ 60 Mb/s, which the relay's thread keeps up with (≈ 30–60 ms behind at most),
# and 100 ms of queue, which shapes rather than drops. With ``loss``'s 3000 packet/s and 64
# packets, a sender overshooting in slow start lost dozens more, and when one of their
# retransmissions was lost too, EXP's go-back-N (§9.4) from that earlier hole reached N only
# after 0.9–1.9 s; with 1000 packets (333 ms) the queue's delay went into every recovery time
# (EXP counts from the last ACK, which waits behind the queue: 310–690 ms for one pair).
BOTTLENECK_PPS = 5000.0
BOTTLENECK_QUEUE = 500
PERIOD_SAMPLES = 50  # new data packets on each side of the NAK of N for the sending period

# Tolerances of :func:`judge`. The recovery time of 4.11 is one EXP (≥ 300 ms, §9.4) after the
# receiver fell silent, plus up to 100 ms of timer-check granularity (§9): a stack may take
# half as long again (its own timer granularity, a loaded host) and one more EXP floor — an EXP
# that just missed its check waits one more EXP interval — but not two EXP rounds more.
RECOVERY_FACTOR = 1.5
RECOVERY_SLACK_S = 0.3  # one EXP floor (§9.4: EXPCount · 300 ms with EXPCount = 1)
# One NAK more than the reference: draft mode's periodic NAK (§8.4 MAY) re-sends the loss list
# at most once per NAK interval (≥ 300 ms), so at most once before a 4.11-timed EXP.
EXTRA_NAKS = 1


@dataclass(frozen=True)
class ComparisonCase:
    """A case judged against the reference stack in the same session (for the catalogue)."""

    id: str
    section: str
    summary: str


CASES = [
    ComparisonCase(
        "udt4/9.4/lost-retransmission-recovery",
        "8.4, 9.4, 12.4",
        f"through the relay ({BOTTLENECK_PPS:.0f} packet/s, {BOTTLENECK_QUEUE}-packet queue: it shapes, seldom "
        f"drops), data packet N = ISN + {REXMIT_AT} and its first retransmission are dropped (ISN + "
        f"{SLOW_START_DROP} once before, to end slow start), {REXMIT_BYTES >> 20} MiB byte-exact "
        f"(TESTCASE={ADAPTER_CASE}), for every UDT stack pair and for the reference stack × itself: recovery time "
        f"(drop of N's original to the forwarding of the copy that gets through) at most "
        f"{RECOVERY_FACTOR} × the reference's + {RECOVERY_SLACK_S} s (one EXP floor), and NAKs naming N "
        f"(the sender's rate decreases for it, §12.4) at most the reference's + {EXTRA_NAKS}",
    )
]


@dataclass(frozen=True)
class Recovery:
    """One run's recovery of N, from the relay's record (times in the capture's clock, s)."""

    seq: int  # N, in the client's numbering
    dropped_at: float  # the original of N reached the relay (and was dropped)
    recovered_at: float | None  # the copy of N that got through was forwarded; None: never
    copies: int  # copies of N the sender sent, the original included
    sender_seconds: float | None  # the same on the sender's clock: the copies' time stamps (§3.1)
    naks_naming: int  # NAKs listing N that reached the sender
    trigger: str  # what made the sender send the copy that got through: "NAK", "EXP" or "-"
    retransmissions: int  # data packets the sender sent with a number it had sent before
    period_before_us: float | None  # median gap between new data packets before the NAK of N
    period_after_us: float | None  # … and after it
    relay_drops: int = 0  # packets the relay dropped in all: the 3 chosen, more from its queue

    @property
    def seconds(self) -> float | None:
        return None if self.recovered_at is None else self.recovered_at - self.dropped_at

    def describe(self) -> str:
        took = "never recovered"
        if self.seconds is not None:
            took = f"recovered in {self.seconds * 1000:.0f} ms"
            if self.sender_seconds is not None:
                took += f" ({self.sender_seconds * 1000:.0f} ms by the sender's time stamps)"
        period = ""
        if self.period_before_us is not None and self.period_after_us is not None:
            period = f", sending period {self.period_before_us:.1f} → {self.period_after_us:.1f} µs"
        return (
            f"N={self.seq:#010x} {took} by {self.trigger}, {self.copies} copies, {self.naks_naming} NAK(s) naming N, "
            f"{self.retransmissions} retransmissions in all{period}, {self.relay_drops} dropped by the relay"
        )


def _names(nak: Nak, seq: int) -> bool:
    return any(seqcmp(first, seq) <= 0 <= seqcmp(last, seq) for first, last in nak.ranges())


def _median_gap_us(times: list[float]) -> float | None:
    if len(times) < 3:
        return None
    return statistics.median(b - a for a, b in zip(times, times[1:], strict=False)) * 1e6


def measure(client_leg: Connection, server_leg: Connection, offset: int = REXMIT_AT) -> Recovery:
    """The recovery of the packet ``offset`` after the client's ISN: ``client_leg`` is the
    client ↔ relay connection (every copy the sender sent, the NAKs it got), ``server_leg``
    the relay ↔ server one (the copies forwarded). The relay must not shift sequence numbers.
    Raises ``ValueError`` when the legs show no handshake or no copy of N."""
    hs = client_leg.handshakes("client")
    if not hs:
        raise ValueError("the client leg has no handshake from the client")
    seq = (hs[0][1].isn + offset) & MAX
    sent = [(r.time, d.timestamp) for r, d in client_leg.data("client") if d.seq == seq]
    copies = [t for t, _ in sent]
    if not copies:
        raise ValueError(f"the client never sent N={seq:#010x} (offset {offset})")
    through = [r.time for r, d in server_leg.data("client") if d.seq == seq]
    naks = [r.time for r, n in client_leg.of_type(Nak, "server") if _names(n, seq)]
    recovered = through[0] if through else None

    trigger = "-"
    sender_seconds = None
    if recovered is not None:
        # the copy that got through: the last one the relay had received when it forwarded it
        k = max(i for i, t in enumerate(copies) if t <= recovered)
        prev = copies[k - 1] if k else float("-inf")
        trigger = "NAK" if any(prev < t <= copies[k] for t in naks) else "EXP"
        sender_seconds = ((sent[k][1] - sent[0][1]) & 0xFFFFFFFF) / 1e6

    seen: set[int] = set()
    fresh: list[float] = []
    retransmissions = 0
    for r, d in client_leg.data("client"):
        if d.seq in seen:
            retransmissions += 1
        else:
            seen.add(d.seq)
            fresh.append(r.time)
    pivot = naks[0] if naks else copies[0]
    before = [t for t in fresh if t < pivot][-PERIOD_SAMPLES:]
    after = [t for t in fresh if t > pivot][:PERIOD_SAMPLES]
    return Recovery(
        seq,
        copies[0],
        recovered,
        len(copies),
        sender_seconds,
        len(naks),
        trigger,
        retransmissions,
        _median_gap_us(before),
        _median_gap_us(after),
    )


def judge(measured: Recovery, reference: Recovery) -> list[str]:
    """What is wrong with ``measured`` judged against ``reference`` (the reference pair in the
    same session); empty when it passes. A reference that never recovered judges nothing."""
    problems = []
    if reference.seconds is None:
        return [f"the reference never recovered N ({reference.describe()}): nothing to judge against"]
    if measured.seconds is None:
        problems.append(f"N={measured.seq:#010x} never got through ({measured.copies} copies sent)")
    else:
        limit = RECOVERY_FACTOR * reference.seconds + RECOVERY_SLACK_S
        if measured.seconds > limit:
            problems.append(
                f"recovery took {measured.seconds * 1000:.0f} ms, over {limit * 1000:.0f} ms "
                f"({RECOVERY_FACTOR} × the reference's {reference.seconds * 1000:.0f} ms + "
                f"{RECOVERY_SLACK_S * 1000:.0f} ms, one EXP floor, §9.4)"
            )
    if measured.naks_naming > reference.naks_naming + EXTRA_NAKS:
        problems.append(
            f"{measured.naks_naming} NAKs named N, the reference's {reference.naks_naming} + {EXTRA_NAKS} at most: "
            f"each is an onLoss call, a rate decrease (§12.4), for one lost packet"
        )
    return problems


class RecoveryRunner(InteropRunner):
    """Interop runs (TESTCASE=:data:`ADAPTER_CASE`) of UDT stacks through the lost-retransmission
    relay, each recorded by the relay itself (no packet capture: the relay's receive times are
    the ones measured, with or without root)."""

    def __init__(self, results_dir: Path) -> None:
        cases = dict(INTEROP_CASES, **{ADAPTER_CASE: replace(INTEROP_CASES[ADAPTER_CASE], bytes=REXMIT_BYTES)})
        run = UdtRun(cases, relay=_relay)
        super().__init__({"udt": run}, results_dir, capture=False)

    def recovery(self, server: Stack, client: Stack) -> tuple[RunResult, Recovery | str]:
        """The run of ``server`` × ``client`` (once per session) and its recovery of N, or why
        the run leaves none to measure (skipped, unsupported, no connection through the relay,
        N never sent)."""
        res = self.run(server, client, ADAPTER_CASE)
        if not isinstance(res, UdtRunResult):
            return res, f"the run left no UDT record ({res.status}: {res.reason})"
        if res.client_leg is None:
            return res, "the relay recorded nothing from the client"
        if not res.conns:
            return res, "the relay recorded no connection to the server"
        try:
            return res, replace(measure(res.client_leg, res.conns[0]), relay_drops=len(res.dropped))
        except ValueError as e:
            return res, str(e)


def _relay(case: str, server: tuple[str, int], capture: Path | None) -> LossRelay:
    """The lost-retransmission relay in front of ``server``: a bottleneck, one packet dropped in
    slow start, N and its first retransmission dropped."""
    relay = LossRelay(
        server,
        drop=[SLOW_START_DROP],
        drop_rexmit=[REXMIT_AT],
        capture=capture,
        rate_pps=BOTTLENECK_PPS,
        queue=BOTTLENECK_QUEUE,
    )
    return relay.__enter__()
