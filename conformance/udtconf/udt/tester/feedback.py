"""Probes of the sender under crafted feedback: NAKs valid, early, repeated and malformed (§5.4,
§8.7), an ACK beyond what was sent and medium ACKs (§5.3, §8.6).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import active
from ...active import Outcome, ProbeResult
from ...seq import incseq, seqoff
from ..peer import ListenerSession
from ..wire import Ack, Ack2, encode_loss_list
from .probe import ProbeEnv, _exit_desc, _StackClient

PROBES: active.Probes[ProbeEnv] = active.Probes()
probe = PROBES.probe


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
