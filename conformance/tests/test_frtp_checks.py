"""Each FRTP wire rule (udtconf.frtp.checks) on hand-built sessions: silent on a correct FRTP
session, naming the side and the frame on one that breaks it. The sessions are the decoded form
udtconf.sabul.trace produces (the pcap reassembly itself is test_sabul_checks' business)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from udtconf.checks import Inconclusive
from udtconf.frtp.checks import INHERITED, RULES, rule_by_id, rules_for
from udtconf.frtp.wire import FrtpOptionBlock, ip_word
from udtconf.sabul.checks import SabulContext
from udtconf.sabul.trace import ControlRecord, DataRecord, Mark, SabulSession, Stream
from udtconf.sabul.wire import Ack, Control, Data, Err, OptionBlock, Syn

RATE = 20_000_000
IPT = 1500 * 8 / RATE
BLOCK = FrtpOptionBlock(OptionBlock(41000, 7000), ip_word("127.0.0.2"), RATE)


class Builder:
    def __init__(self) -> None:
        self.frame = 10
        self.data: list[DataRecord] = []
        self.controls: list[ControlRecord] = []

    def _mark(self, t: float) -> Mark:
        self.frame += 1
        return Mark(self.frame, t)

    def send(self, t: float, seq: int) -> Builder:
        pkt = Data(seq, b"x" * 100)
        self.data.append(DataRecord(self._mark(t), pkt.encode(), pkt, None))
        return self

    def ctrl(self, t: float, c: Control) -> Builder:
        self.controls.append(ControlRecord(self._mark(t), c))
        return self

    def session(self, echo: FrtpOptionBlock = BLOCK, receiver_ip: str = "127.0.0.1", fin: float = 10.0) -> SabulSession:
        self.data.sort(key=lambda d: d.mark.time)
        self.controls.sort(key=lambda c: c.mark.time)
        s = SabulSession(
            ("127.0.0.1", 7000),
            (receiver_ip, 40000),
            Stream(fin=Mark(1, fin + 0.01)),
            Stream(fin=Mark(2, fin)),
            head_len=52,
            block=BLOCK.sabul,
            block_mark=Mark(3, 0.001),
            echo=echo.sabul,
            echo_mark=Mark(4, 0.002),
            profile_block=BLOCK,
            profile_echo=echo,
            data=self.data,
            controls=self.controls,
        )
        s.data_addr = BLOCK.data_address(receiver_ip)
        return s


def good(n: int = 400, lost: dict[int, int] | None = None) -> Builder:
    """n packets one IPT apart from 10 ms; each number in ``lost`` stays missing for that many
    20 ms ERR ticks (listed at once on the gap, then every 20 ms), resent after each; an ACK every
    100 ms; the sender's FIN at the end."""
    b = Builder()
    lost = lost or {}
    t0 = 0.010
    sends = [(t0 + i * IPT, i) for i in range(n) if i not in lost]
    arrival: dict[int, float] = {}
    for seq, ticks in lost.items():
        gap_seen = t0 + (seq + 1) * IPT
        b.ctrl(gap_seen, Err.from_losses([seq]))
        for k in range(1, ticks + 1):
            b.ctrl(gap_seen + 0.020 * k, Err.from_losses([seq]))
        arrival[seq] = gap_seen + 0.020 * ticks + 0.001
        sends.append((arrival[seq], seq))
    for t, seq in sends:
        b.send(t, seq)
    end = max(t for t, _ in sends)
    t, got = 0.1, 0
    while t < end + 0.2:
        point = 0
        have = {seq for ts, seq in sends if ts <= t}
        while point in have:
            point += 1
        if point > got:
            b.ctrl(t, Ack(point))
            got = point
        t += 0.1
    return b


def run(rule_id: str, b: Builder, case: str = "transfer", **kw: object) -> list[str]:
    s = b.session(**kw)  # type: ignore[arg-type]
    return [v.message for v in rule_by_id(rule_id).run(s, SabulContext(case))]


def test_rule_ids_cite_frtp_sections_and_inherit_sabuls() -> None:
    assert len({r.id for r in RULES}) == len(RULES)
    for r in RULES:
        assert r.id.startswith("frtp/") and r.grade in ("MUST", "SHOULD") and r.side in ("sender", "receiver")
    ids = [r.id for r in rules_for("loss")]
    assert ids[: len(INHERITED)] == list(INHERITED) and "sabul/6/syn-period" not in ids
    assert rules_for("mss") == []


@pytest.mark.parametrize("lost", [None, {37: 2, 120: 3}])
def test_a_correct_session_breaks_no_frtp_rule(lost: dict[int, int] | None) -> None:
    s = good(400, lost).session()
    for rule in rules_for("loss"):
        if rule.id.startswith("frtp/"):
            try:
                assert rule.run(s, SabulContext("loss")) == [], rule.id
            except Inconclusive:
                assert rule.id == "frtp/5/err-every-20ms" and not lost


def test_a_sender_at_twice_the_rate_breaks_the_ipt_and_the_rate() -> None:
    b = Builder()
    for i in range(300):
        b.send(0.01 + i * IPT / 2, i)
    assert run("frtp/4/fixed-ipt", b) == [
        "median DATA gap 300 µs; the negotiated 20000000 bit/s fixes IPT 600 µs (±20%)"
    ]
    assert "20.0 Mbit/s" not in run("frtp/4/rate-not-exceeded", b)[0]


def test_bursts_that_catch_up_keep_the_rate_but_not_the_median() -> None:
    b = Builder()
    for i in range(300):  # pairs back to back, one pair every two IPTs: the rate holds
        b.send(0.01 + (i // 2) * 2 * IPT + (i % 2) * 1e-6, i)
    assert run("frtp/4/rate-not-exceeded", b) == []
    assert run("frtp/4/fixed-ipt", b)


def test_few_packets_are_inconclusive_for_the_ipt() -> None:
    with pytest.raises(Inconclusive):
        run("frtp/4/fixed-ipt", good(20))


def test_a_syn_breaks_no_syn() -> None:
    assert run("frtp/3.2/no-syn", good(50).ctrl(0.05, Syn(12))) == ["SYN 12: FRTP has no SYN"]


def test_data_to_the_control_address_breaks_the_path_rule() -> None:
    b = good(50)
    s = b.session()
    s.misaddressed = [b.data[0]]
    found = rule_by_id("frtp/2/data-to-the-data-address").run(s, SabulContext("transfer"))
    assert [v.message for v in found] == ["1 DATA datagram(s) to the control address 127.0.0.1"]
    s.data, s.misaddressed = [], []
    assert rule_by_id("frtp/2/data-to-the-data-address").run(s, SabulContext("transfer"))


def test_a_control_connection_on_the_data_address_breaks_the_separation() -> None:
    assert run("frtp/2/control-off-the-data-path", good(10), receiver_ip="127.0.0.2")
    assert run("frtp/2/control-off-the-data-path", good(10)) == []


def test_an_echo_that_changes_the_rate_is_reported() -> None:
    assert run("frtp/3.3/echo", good(10), echo=replace(BLOCK, rate_bps=RATE * 2)) == [
        f"echo changed rate_bps: {RATE} → {RATE * 2}"
    ]


def test_acks_every_10_ms_break_the_100_ms_period() -> None:
    b = good(400)
    b.controls = [c for c in b.controls if not isinstance(c.control, Ack)]
    for k in range(1, 20):
        b.ctrl(0.01 + k * 0.010, Ack(int(k * 0.010 / IPT)))
    assert "not every 100 ms" in run("frtp/5/ack-every-100ms", b)[0]


def test_no_ack_for_half_a_second_breaks_the_100_ms_period() -> None:
    b = good(900)
    b.controls = [c for c in b.controls if not isinstance(c.control, Ack) or c.mark.time > 0.55]
    assert "not acknowledged within 250 ms" in run("frtp/5/ack-every-100ms", b)[0]


def test_a_loss_reported_again_only_after_100_ms_breaks_the_20_ms_period() -> None:
    b = good(400, {37: 1})
    b.controls = [c for c in b.controls if not isinstance(c.control, Err)]
    b.ctrl(0.01 + 38 * IPT, Err.from_losses([37])).ctrl(0.01 + 38 * IPT + 0.1, Err.from_losses([37]))
    assert run("frtp/5/err-every-20ms", b, case="loss") == [
        "37 still missing 60 ms after this ERR and not listed again"
    ]


def test_a_silent_sender_with_unacknowledged_data_breaks_exp() -> None:
    b = Builder()
    for i in range(10):
        b.send(0.01 + i * IPT, i)
    b.send(3.5, 9)  # EXP only after 3.5 s of silence
    b.ctrl(3.6, Ack(10))
    assert "without sending while packets up to 9 were unacknowledged" in run("frtp/4/exp", b, fin=3.7)[0]
