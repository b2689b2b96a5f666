"""Each SABUL wire rule (udtconf.sabul.checks) on hand-made captures (crafted_sabul): silent on a
correct session, and naming the side and frame on one that breaks it. Also the reassembly of
the control stream (udtconf.sabul.trace)."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted_sabul import BLOCK, DATA_PORT, Capture, good
from udtconf.checks import Inconclusive, Violation
from udtconf.sabul import trace
from udtconf.sabul.checks import RULES, SabulContext, rule_by_id, rules_for
from udtconf.sabul.wire import Ack, Data, Err, OptionBlock, Syn, encode_raw_control

RECEIVER = frozenset({"receiver"})


def run(
    rule_id: str,
    cap: Capture,
    tmp: Path,
    case: str = "loss",
    judges: frozenset[str] = trace.BOTH,
    mss: dict[str, int] | None = None,
) -> list[Violation]:
    s = cap.session(tmp, judges)
    return rule_by_id(rule_id).run(s, SabulContext(case, mss or {}))


def test_rule_ids_cite_sections_and_grades() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.id.startswith("sabul/") and r.grade in ("MUST", "SHOULD") and r.side in ("sender", "receiver")
        assert r.requirement and r.section


@pytest.mark.parametrize("lost", [(), (3, 4), (2, 5, 6, 7)])
def test_a_correct_session_breaks_no_rule(lost: tuple[int, ...], tmp_path: Path) -> None:
    # with losses the capture is a receiver's leg behind the relay: only the receiver is judged there
    s = good(12, lost).session(tmp_path, RECEIVER if lost else trace.BOTH)
    for rule in rules_for("loss"):
        assert rule.run(s, SabulContext("loss")) == [], rule.id
    assert sorted(d.seq for d in s.data if d.seq is not None) == list(range(12))


def test_reassembly_decodes_frames_split_across_segments(tmp_path: Path) -> None:
    frames = Ack(7).encode() + Err.from_losses([1, 2]).encode() + Syn(9).encode()
    cap = Capture().add(0.001, "r-ctrl", BLOCK.encode()[:13]).add(0.0011, "r-ctrl", BLOCK.encode()[13:] + frames[:3])
    cap.add(0.002, "s-ctrl", BLOCK.encode()).add(0.003, "r-ctrl", frames[3:11]).add(0.004, "r-ctrl", frames[11:])
    s = cap.session(tmp_path)
    assert s.block == BLOCK and s.echo == BLOCK
    assert [c.control for c in s.controls] == [Ack(7), Err.from_losses([1, 2]), Syn(9)]
    assert [c.mark.frame for c in s.controls] == [6, 7, 7]  # the segment that completed each frame


def test_a_hole_in_the_captured_stream_makes_the_stream_rules_inconclusive(tmp_path: Path) -> None:
    cap = good(3)
    s = cap.session(tmp_path)
    s.to_sender.hole = "40 bytes missing"
    with pytest.raises(Inconclusive):
        rule_by_id("sabul/3.2/control-decodable").run(s, SabulContext("transfer"))


def _one(violations: list[Violation], side: str) -> str:
    assert violations, "expected a violation"
    assert {v.party for v in violations} == {side}
    assert violations[0].frame is not None
    return str(violations[0].message)


def test_data_decodable(tmp_path: Path) -> None:
    msg = _one(run("sabul/3.1/data-decodable", good(3).add(0.0035, "data", b"\x80\x00\x00\x05xx"), tmp_path), "sender")
    assert "bit 31" in msg


def test_control_decodable(tmp_path: Path) -> None:
    cap = good(3).add(0.0036, "r-ctrl", encode_raw_control(9, 0))
    assert "unknown control type 9" in _one(run("sabul/3.2/control-decodable", cap, tmp_path), "receiver")
    huge = good(3).add(0.0036, "r-ctrl", encode_raw_control(2, 1_000_000_000))
    assert "claims 1000000000" in _one(run("sabul/3.2/control-decodable", huge, tmp_path), "receiver")


def test_nothing_after_echo(tmp_path: Path) -> None:
    cap = good(3).add(0.0021, "s-ctrl", Ack(1).encode())
    assert "8 bytes written after" in _one(run("sabul/3.2/nothing-after-echo", cap, tmp_path), "sender")


def test_option_block_and_echo(tmp_path: Path) -> None:
    bad = OptionBlock(DATA_PORT, 7000, reserved=1)
    cap = Capture().add(0.001, "r-ctrl", bad.encode()).add(0.002, "s-ctrl", bad.encode())
    assert "reserved" in _one(run("sabul/3.4/option-block", cap, tmp_path), "receiver")
    changed = Capture().add(0.001, "r-ctrl", BLOCK.encode()).add(0.002, "s-ctrl", OptionBlock(DATA_PORT, 7001).encode())
    assert "echo changed ctrl_port" in _one(run("sabul/3.4/echo", changed, tmp_path), "sender")


def test_mss_honoured(tmp_path: Path) -> None:
    block = OptionBlock.for_packet_size(1252, DATA_PORT, 7000)
    mss = {"server": 1052, "client": 1280}
    ok = Capture().add(0.001, "r-ctrl", block.encode()).add(0.002, "s-ctrl", block.echo(1024).encode())
    assert run("sabul/3.4/mss-honoured", ok, tmp_path, case="mss", mss=mss) == []
    kept = Capture().add(0.001, "r-ctrl", block.encode()).add(0.002, "s-ctrl", block.encode())
    assert "echo pkt_size 1252, expected 1024" in _one(
        run("sabul/3.4/mss-honoured", kept, tmp_path, "mss", mss=mss), "sender"
    )


def test_data_after_echo(tmp_path: Path) -> None:
    cap = good(3).add(0.0015, "data", Data(0, b"early").encode())
    assert "before the echo" in _one(run("sabul/2/data-after-echo", cap, tmp_path), "sender")


def test_new_data_in_order(tmp_path: Path) -> None:
    cap = Capture().add(0.001, "r-ctrl", BLOCK.encode()).add(0.002, "s-ctrl", BLOCK.encode())
    for t, seq in ((0.003, 0), (0.004, 1), (0.005, 3)):
        cap.add(t, "data", Data(seq, b"x").encode())
    assert "new DATA 3, expected 2" in _one(run("sabul/5/new-data-in-order", cap, tmp_path), "sender")


def test_window(tmp_path: Path) -> None:
    small = OptionBlock(DATA_PORT, 7000, recv_flag_size=4)
    cap = Capture().add(0.001, "r-ctrl", small.encode()).add(0.002, "s-ctrl", small.encode())
    for seq in range(6):
        cap.add(0.003 + seq / 1000, "data", Data(seq, b"x").encode())
    assert "DATA 4 with LastAck 0" in _one(run("sabul/5/window", cap, tmp_path), "sender")
    cap.add(0.0065, "r-ctrl", Ack(3).encode())  # an ACK in time opens the window
    assert run("sabul/5/window", cap, tmp_path) == []


def test_retransmit_what_was_reported(tmp_path: Path) -> None:
    cap = good(6).add(0.0095, "data", Data(2, b"x" * 100).encode())
    assert "DATA 2 sent again" in _one(run("sabul/5/retransmit-what-was-reported", cap, tmp_path), "sender")


def test_err_on_gap(tmp_path: Path) -> None:
    silent = Capture().add(0.001, "r-ctrl", BLOCK.encode()).add(0.002, "s-ctrl", BLOCK.encode())
    for t, seq in ((0.003, 0), (0.004, 1), (0.005, 4), (0.6, 2), (0.6, 3)):
        silent.add(t, "data", Data(seq, b"x").encode())
    assert "gap 2…3 before DATA 4" in _one(run("sabul/6/err-on-gap", silent, tmp_path, judges=RECEIVER), "receiver")
    partial = silent.add(0.0051, "r-ctrl", Err((2,)).encode())
    assert run("sabul/6/err-on-gap", partial, tmp_path, judges=RECEIVER), "the ERR must list exactly the gap"


def test_err_lists_missing_only(tmp_path: Path) -> None:
    got = good(6).add(0.0055, "r-ctrl", Err((1,)).encode())
    assert "lists 1, which had arrived" in _one(run("sabul/6/err-lists-missing-only", got, tmp_path), "receiver")
    beyond = good(6).add(0.0055, "r-ctrl", Err((50,)).encode())
    assert "lists 50, not below LRSN" in _one(run("sabul/6/err-lists-missing-only", beyond, tmp_path), "receiver")


def test_ack_increases(tmp_path: Path) -> None:
    cap = good(6).add(0.0061, "r-ctrl", Ack(3).encode()).add(0.0062, "r-ctrl", Ack(3).encode())
    assert "ACK 3 after ACK 3" in _one(run("sabul/6/ack-increases", cap, tmp_path), "receiver")


def test_ack_covers_received(tmp_path: Path) -> None:
    cap = good(8, lost=(3, 4)).add(0.0059, "r-ctrl", Ack(6).encode())
    msg = _one(run("sabul/6/ack-covers-received", cap, tmp_path, judges=RECEIVER), "receiver")
    assert "ACK 6 but 3 had not arrived" in msg


def test_syn_count(tmp_path: Path) -> None:
    cap = good(3).add(0.0045, "r-ctrl", Syn(1000).encode())
    assert "SYNs count 1000" in _one(run("sabul/6/syn-count", cap, tmp_path), "receiver")


def test_syn_period(tmp_path: Path) -> None:
    cap = Capture(events=[e for e in good(20).events if e[2][:4] != b"\x00\x00\x00\x04"])
    assert "no SYN" in _one(run("sabul/6/syn-period", cap, tmp_path), "receiver")
    open_ = cap.without("s-fin", "r-fin")
    sparse = open_.add(0.012, "r-ctrl", Syn(3).encode()).add(0.2, "r-ctrl", Syn(0).encode())
    assert "ms without a SYN" in _one(run("sabul/6/syn-period", sparse, tmp_path), "receiver")


def _close_instead(side: str, t: float, how: str, rule_id: str, tmp: Path) -> str:
    """The one violation of ``rule_id`` when ``side``'s FIN in ``good(3)`` is replaced by ``how``
    (``fin``, ``rst``) at ``t``."""
    prefix = {"sender": "s", "receiver": "r"}[side]
    cap = good(3).without(f"{prefix}-fin").add(t, f"{prefix}-{how}")
    return _one(run(rule_id, cap, tmp), side)


def test_sender_half_closes_after_the_last_ack(tmp_path: Path) -> None:
    rule_id = "sabul/10.1/sender-half-closes-after-the-last-ack"
    assert "reset the control connection" in _close_instead("sender", 0.03, "rst", rule_id, tmp_path)
    assert "FIN with ACK 0" in _close_instead("sender", 0.0055, "fin", rule_id, tmp_path)


def test_receiver_closes_after_the_sender(tmp_path: Path) -> None:
    rule_id = "sabul/10.1/receiver-closes-after-the-sender"
    assert "before the sender's FIN" in _close_instead("receiver", 0.0051, "fin", rule_id, tmp_path)
    assert "reset" in _close_instead("receiver", 0.5, "rst", rule_id, tmp_path)
