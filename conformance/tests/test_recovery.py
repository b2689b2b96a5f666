"""Recovery from a lost retransmission (udtconf.udt.recovery): every UDT stack pair against the
reference pair (libudt × libudt) measured in the same session, and the judging and measuring
functions on fabricated numbers and records."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from udtconf.runner import RunResult, RunStatus
from udtconf.selection import Selection
from udtconf.seq import MAX
from udtconf.udt.interop import UdtRunResult
from udtconf.udt.recovery import (
    RECOVERY_SLACK_S,
    REXMIT_AT,
    Recovery,
    RecoveryRunner,
    judge,
    measure,
)
from udtconf.udt.trace import Connection, Record
from udtconf.udt.wire import Ack, DataPacket, Handshake, Nak, Packet, encode_loss_list
from udtharness.stacks import Stack, reference_stack
from verdicts import RecordProperty

# ------------------------------------------------------------------------- judging and measuring

REF = Recovery(
    seq=1000,
    dropped_at=10.0,
    recovered_at=10.31,
    copies=3,
    sender_seconds=0.31,
    naks_naming=1,
    trigger="EXP",
    retransmissions=40,
    period_before_us=333.0,
    period_after_us=375.0,
)


def test_a_recovery_within_the_references_tolerance_passes() -> None:
    assert judge(REF, REF) == []
    # 1.5 × 310 ms + 300 ms = 765 ms
    assert judge(replace(REF, recovered_at=10.0 + 0.76, naks_naming=2), REF) == []


def test_a_recovery_that_waits_a_second_exp_round_fails() -> None:
    late = replace(REF, recovered_at=10.0 + 0.31 + 0.6)  # EXPCount 2: 600 ms more
    [problem] = judge(late, REF)
    assert "910 ms, over 765 ms" in problem and "§9.4" in problem


def test_a_packet_never_recovered_fails() -> None:
    lost = replace(REF, recovered_at=None, sender_seconds=None, copies=7, trigger="-")
    assert judge(lost, REF) == [f"N={REF.seq:#010x} never got through (7 copies sent)"]


def test_more_naks_for_one_loss_than_the_reference_plus_one_fail() -> None:
    [problem] = judge(replace(REF, naks_naming=3), REF)
    assert problem.startswith("3 NAKs named N, the reference's 1 + 1") and "§12.4" in problem


def test_a_reference_that_never_recovered_judges_nothing() -> None:
    [problem] = judge(REF, replace(REF, recovered_at=None))
    assert "nothing to judge against" in problem


def test_the_slack_is_one_exp_floor() -> None:
    assert RECOVERY_SLACK_S == 0.3  # UDT4.md §9.4: max(…, EXPCount · 300 ms), EXPCount = 1


def _record(frame: int, t: float, sender: str, pkt: Packet) -> Record:
    return Record(frame, t, sender, pkt.encode(), pkt, None)


def _legs(isn: int, events: list[tuple[float, str, Packet, bool]]) -> tuple[Connection, Connection]:
    """Both legs of a relay from (time, sender, packet, forwarded) events."""
    client = Connection(("127.0.0.1", 9000), ("127.0.0.1", 5000))
    server = Connection(("127.0.0.1", 9001), ("127.0.0.1", 6000))
    hs = Handshake(isn=isn, socket_id=7)
    client.records.append(_record(1, 0.0, "client", hs))
    for n, (t, sender, pkt, forwarded) in enumerate(events, start=2):
        client.records.append(_record(n, t, sender, pkt))
        if forwarded:
            server.records.append(_record(n, t + 0.0001, sender, pkt))
    return client, server


def test_measure_reads_the_recovery_off_both_legs() -> None:
    isn = MAX - 500  # N lies across the 2^31 wrap from the ISN
    n = (isn + REXMIT_AT) & MAX

    def data(off: int, ts_us: int) -> DataPacket:
        return DataPacket(seq=(isn + off) & MAX, msg_no=1, timestamp=ts_us, dst_id=9)

    nak = Nak(dst_id=7, words=tuple(encode_loss_list([n, (n + 1) & MAX])))
    events: list[tuple[float, str, Packet, bool]] = [
        *((1.0 + i * 0.001, "client", data(REXMIT_AT - 10 + i, 1_000_000 + i * 1000), True) for i in range(10)),
        (1.010, "client", data(REXMIT_AT, 1_010_000), False),  # the original, dropped
        (1.011, "client", data(REXMIT_AT + 1, 1_011_000), False),
        (1.012, "client", data(REXMIT_AT + 2, 1_012_000), True),
        (1.0125, "server", nak, True),
        (1.013, "client", data(REXMIT_AT, 1_013_000), False),  # first retransmission, dropped
        (1.0131, "client", data(REXMIT_AT + 1, 1_013_100), True),
        *((1.014 + i * 0.0011, "client", data(REXMIT_AT + 3 + i, 1_014_000 + i * 1100), True) for i in range(10)),
        (1.0140, "server", Ack(dst_id=7, ack_no=n, ack_seq_no=5), True),
        (1.330, "client", data(REXMIT_AT, 1_329_000), True),  # after 300 ms of silence: EXP
    ]
    rec = measure(*_legs(isn, sorted(events, key=lambda e: e[0])))
    assert rec.seq == n and rec.copies == 3 and rec.naks_naming == 1 and rec.trigger == "EXP"
    assert rec.seconds == pytest.approx(0.3201) and rec.sender_seconds == pytest.approx(0.319)
    assert rec.retransmissions == 3  # N twice, N + 1 once
    assert rec.period_before_us == pytest.approx(1000.0) and rec.period_after_us == pytest.approx(1100.0)


def test_measure_tells_a_nak_recovery_from_an_exp_one() -> None:
    isn = 100
    n = isn + REXMIT_AT

    def data(ts: int) -> DataPacket:
        return DataPacket(seq=n, msg_no=1, timestamp=ts, dst_id=9)

    nak = Nak(dst_id=7, words=(n,))
    events: list[tuple[float, str, Packet, bool]] = [
        (1.0, "client", data(0), False),
        (1.001, "server", nak, True),
        (1.002, "client", data(2000), False),
        (1.301, "server", nak, True),  # a periodic NAK (draft mode, §8.4)
        (1.302, "client", data(302_000), True),
    ]
    rec = measure(*_legs(isn, events))
    assert rec.trigger == "NAK" and rec.naks_naming == 2 and rec.seconds == pytest.approx(0.3021)


def test_measure_needs_the_packet() -> None:
    with pytest.raises(ValueError, match="never sent"):
        measure(*_legs(5, []))


def test_a_run_with_nothing_to_measure_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 41: every reason (no handshake on the client leg, N never sent, no connection) was
    # reported as "the relay's record shows no copy of N"
    runner = RecoveryRunner(tmp_path)
    stack = Stack("s", tmp_path, "0", "", ("loss",))
    res = UdtRunResult("s", "s", "loss", RunStatus.PASS, "", tmp_path)
    monkeypatch.setattr(runner, "run", lambda server, client, case: res)
    assert runner.recovery(stack, stack)[1] == "the relay recorded nothing from the client"
    client_leg, server_leg = _legs(5, [])
    res.client_leg = client_leg
    assert runner.recovery(stack, stack)[1] == "the relay recorded no connection to the server"
    res.conns = [server_leg]
    assert runner.recovery(stack, stack)[1] == f"the client never sent N={5 + REXMIT_AT:#010x} (offset {REXMIT_AT})"
    res.client_leg = Connection(("127.0.0.1", 9000), ("127.0.0.1", 5000))
    assert runner.recovery(stack, stack)[1] == "the client leg has no handshake from the client"


# ------------------------------------------------------------------------------ against stacks


@pytest.fixture(scope="session")
def recovery_runner(results_dir: Path) -> RecoveryRunner:
    return RecoveryRunner(results_dir / "recovery")


@pytest.fixture(scope="session")
def reference_recovery(recovery_runner: RecoveryRunner, selection: Selection) -> tuple[RunResult, Recovery | str]:
    """The reference stack (libudt) × itself through the same fault, once per session (whether or not the
    selection's cells include that pair: a third party's session is judged against it too)."""
    name = reference_stack("udt", selection.registry)
    ref = selection.registry[name]
    if ref.missing():
        pytest.skip(f"the reference stack {name} is not built: {ref.build}")
    return recovery_runner.recovery(ref, ref)


def _write(res: RunResult, rec: Recovery | None, ref: Recovery | None, problems: list[str]) -> None:
    out = {
        "server": res.server,
        "client": res.client,
        "status": res.status,
        "recovery": asdict(rec) | {"seconds": rec.seconds} if rec else None,
        "reference": asdict(ref) | {"seconds": ref.seconds} if ref else None,
        "problems": problems,
    }
    (res.logdir / "recovery.json").write_text(json.dumps(out, indent=2, ensure_ascii=False))


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.protocols("udt")
def test_lost_retransmission_is_recovered_as_promptly_as_the_reference(
    recovery_pair: tuple[Stack, Stack],
    recovery_runner: RecoveryRunner,
    reference_recovery: tuple[RunResult, Recovery | str],
    record_property: RecordProperty,
) -> None:
    server, client = recovery_pair
    res, rec = recovery_runner.recovery(server, client)
    record_property("udtc_logdir", str(res.logdir))
    record_property("udtc_pcap", str(res.pcap or ""))
    if res.status in (RunStatus.SKIPPED, RunStatus.UNSUPPORTED):
        pytest.skip(f"{res.status}: {res.reason}")
    ref_res, ref = reference_recovery
    where = f"server {server.name} × client {client.name} (logs: {res.logdir})"
    if res.status != RunStatus.PASS:
        pytest.fail(f"{where}: {res.reason}", pytrace=False)
    if isinstance(rec, str):
        pytest.fail(f"{where}: no recovery of N (ISN + {REXMIT_AT}) to measure: {rec}", pytrace=False)
    if isinstance(ref, str) or ref_res.status != RunStatus.PASS:
        why = ref_res.reason if ref_res.status != RunStatus.PASS else ref
        pytest.skip(f"the reference {ref_res.server} × itself did not complete: {why} ({ref_res.logdir})")
    problems = judge(rec, ref)
    _write(res, rec, ref, problems)
    verdict = f"{rec.describe()}; reference {ref_res.server} × itself: {ref.describe()}"
    record_property("udtc_verdict", "; ".join(problems) or verdict)
    if problems:
        pytest.fail(f"{where}: {'; '.join(problems)} — {verdict}", pytrace=False)
