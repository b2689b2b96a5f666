"""The wire rules on hand-made traces: each can pass and each can fail."""

from __future__ import annotations

import crafted
import pytest
from crafted import CID, ISN, SID, conn_of
from udtconf.checks import Inconclusive
from udtconf.udt.cases import CASES
from udtconf.udt.checks import Context, rule_by_id, transfer_completed
from udtconf.udt.trace import Connection
from udtconf.udt.wire import Ack, Ack2, DataPacket, Handshake, KeepAlive, Nak, Shutdown, peer_ip_field


def handshake(cookie_ok: bool = True, echo_isn: bool = True) -> list[tuple[str, float, bytes]]:
    return crafted.handshake(client_cookie=77 if cookie_ok else 0, response_isn=ISN if echo_isn else 5)


def data(seq: int, t: float) -> tuple[str, float, bytes]:
    return ("client", t, DataPacket(seq=seq, msg_no=1, dst_id=SID, payload=b"x" * 100).encode())


def run(rule_id: str, conn: Connection, case: str = "transfer", dropped: set[int] | None = None) -> list[str]:
    return [v.message for v in rule_by_id(rule_id).run(conn, Context(case, dropped or set()))]


def test_cookie_round_passes_and_fails() -> None:
    assert run("udt4/6.1/cookie-round", conn_of(*handshake())) == []
    assert run("udt4/6.1/cookie-round", conn_of(*handshake(cookie_ok=False)))
    bad = run("udt4/6.1/cookie-round", conn_of(*handshake(echo_isn=False)))
    assert any("does not echo client ISN" in m for m in bad)


def test_a_client_that_stops_at_an_invalid_cookie_reply_is_not_charged() -> None:
    # §6.1 listener rule 3 broken first (socket ID, MSS and window zeroed): the client's missing
    # second round follows from it; only the listener is charged
    ip = peer_ip_field("127.0.0.1")
    req = Handshake(isn=ISN, socket_id=CID, req_type=1, peer_ip=ip).encode()
    zeroed = Handshake(isn=ISN, socket_id=0, mss=0, flight_flag_size=0, req_type=1, cookie=77, dst_id=CID, peer_ip=ip)
    found = rule_by_id("udt4/6.1/cookie-round").run(
        conn_of(("client", 0, req), ("server", 0.001, zeroed.encode())), Context("handshake")
    )
    assert [v.party for v in found] == ["server"]
    # a faithful reply left unanswered is the client's fault
    reply = Handshake(isn=ISN, socket_id=CID, req_type=1, cookie=77, dst_id=CID, peer_ip=ip).encode()
    found = rule_by_id("udt4/6.1/cookie-round").run(
        conn_of(("client", 0, req), ("server", 0.001, reply)), Context("handshake")
    )
    assert [v.party for v in found] == ["client"]


def test_ack_beyond_sent_is_a_violation() -> None:
    ok = conn_of(*handshake(), data(ISN, 0.01), ("server", 0.02, Ack(dst_id=CID, ack_no=ISN + 1).encode()))
    assert run("udt4/5.4/no-ack-or-nak-beyond-sent", ok) == []
    bad = conn_of(*handshake(), data(ISN, 0.01), ("server", 0.02, Ack(dst_id=CID, ack_no=ISN + 5).encode()))
    assert run("udt4/5.4/no-ack-or-nak-beyond-sent", bad)


def test_nak_beyond_sent_and_compression() -> None:
    c = conn_of(
        *handshake(),
        data(ISN, 0.01),
        data(ISN + 3, 0.011),
        ("server", 0.012, Nak(dst_id=CID, words=(ISN + 1, ISN + 2)).encode()),
        ("server", 0.013, Nak(dst_id=CID, words=(ISN + 9,)).encode()),
    )
    assert any("beyond" in m for m in run("udt4/5.4/no-ack-or-nak-beyond-sent", c))
    assert len(run("udt4/5.4/nak-run-as-range", c)) == 1  # two singles for a run of 2


def test_nak_on_gap_timing() -> None:
    prompt = conn_of(
        *handshake(),
        data(ISN, 0.01),
        data(ISN + 2, 0.02),
        ("server", 0.021, Nak(dst_id=CID, words=(ISN + 1,)).encode()),
    )
    assert run("udt4/8.2/nak-on-gap", prompt, case="loss") == []
    late = conn_of(
        *handshake(), data(ISN, 0.01), data(ISN + 2, 0.02), ("server", 0.2, Nak(dst_id=CID, words=(ISN + 1,)).encode())
    )
    assert run("udt4/8.2/nak-on-gap", late, case="loss")


def test_ack2_must_echo_a_full_ack() -> None:
    full = Ack(
        dst_id=CID, ack_seq_no=1, ack_no=ISN + 1, rtt=1, rtt_var=1, avail_buffer=10, arrival_speed=1, link_capacity=1
    )
    ok = conn_of(
        *handshake(),
        data(ISN, 0.01),
        ("server", 0.02, full.encode()),
        ("client", 0.021, Ack2(dst_id=SID, addl=1).encode()),
    )
    assert run("udt4/5.7/ack2-echoes-ack", ok) == []
    light = Ack(dst_id=CID, ack_no=ISN + 1)
    bad = conn_of(
        *handshake(),
        data(ISN, 0.01),
        ("server", 0.02, light.encode()),
        ("client", 0.021, Ack2(dst_id=SID, addl=0).encode()),
    )
    assert run("udt4/5.7/ack2-echoes-ack", bad)


def test_destination_id_and_sequence_gaps() -> None:
    c = conn_of(*handshake(), data(ISN, 0.01), ("client", 0.02, DataPacket(seq=ISN + 1, msg_no=1, dst_id=0).encode()))
    assert run("udt4/3.3/destination-id", c)
    gap = conn_of(*handshake(), data(ISN, 0.01), data(ISN + 3, 0.02))
    assert run("udt4/3.1/sequence-contiguous", gap)
    assert run("udt4/3.1/sequence-contiguous", gap, dropped={ISN + 1, ISN + 2}) == []


def test_undecodable_packet_is_reported() -> None:
    c = conn_of(*handshake(), ("server", 0.02, bytes.fromhex("80020000000000010000000000000011") + bytes(8)))
    (msg,) = run("udt4/2/decodable", c)
    assert "§5.3" in msg


def ack(no: int, t: float) -> tuple[str, float, bytes]:
    return ("server", t, Ack(dst_id=CID, ack_seq_no=1, ack_no=no, rtt=1, rtt_var=1, avail_buffer=100).encode())


def whole_input(case: str, t: float = 0.01) -> list[tuple[str, float, bytes]]:
    """The case's whole input in 1000-byte data packets from ISN, then the ACK of all of them."""
    size = CASES[case].bytes
    pk = [
        ("client", t, DataPacket(seq=ISN + i, msg_no=1, dst_id=SID, payload=b"x" * min(1000, size - off)).encode())
        for i, off in enumerate(range(0, size, 1000))
    ]
    return [*pk, ack(ISN + len(pk), t + 0.005)]


def test_shutdown_rule() -> None:
    done = conn_of(*handshake(), *whole_input("close"))
    assert run("udt4/5.6/shutdown-on-close", done, case="close")
    ok = conn_of(*handshake(), data(ISN, 0.01), ("client", 0.02, Shutdown(dst_id=SID).encode()))
    assert run("udt4/5.6/shutdown-on-close", ok, case="close") == []


def test_missing_shutdown_is_inconclusive_when_the_transfer_never_completed() -> None:
    # A run stopped with the client's data unacknowledged: its close() was still lingering (§6.3),
    # so no Shutdown was due and the client is not to blame for its absence.
    unacked = conn_of(*handshake(), data(ISN, 0.01), data(ISN + 1, 0.02), ack(ISN + 1, 0.03))
    with pytest.raises(Inconclusive, match="close was never due"):
        run("udt4/5.6/shutdown-on-close", unacked, case="handshake")
    with pytest.raises(Inconclusive):
        run("udt4/5.6/shutdown-on-close", conn_of(*handshake()), case="handshake")  # no data at all
    assert transfer_completed(conn_of(*handshake(), data(ISN, 0.01), data(ISN + 1, 0.02), ack(ISN + 2, 0.03)), 200)
    assert not transfer_completed(unacked, 200)


def test_missing_shutdown_is_inconclusive_when_what_was_acknowledged_is_short_of_the_input() -> None:
    # Issue 41: one data packet sent and acknowledged, then the run was stopped (close() never
    # called): every packet that reached the server was acknowledged, but not the case's input.
    for case in ("close", "transfer", "mss"):
        one = conn_of(*handshake(), data(ISN, 0.01), ack(ISN + 1, 0.015))
        with pytest.raises(Inconclusive, match=f"short of the case's {CASES[case].bytes} bytes"):
            run("udt4/5.6/shutdown-on-close", one, case=case)
        assert not transfer_completed(one, CASES[case].bytes)
    assert transfer_completed(conn_of(*handshake(), *whole_input("transfer")), CASES["transfer"].bytes)


def test_cookie_reply_may_echo_the_clients_control_time_stamp() -> None:
    # §6.1 listener rule 3: the cookie reply is the request sent back, header included, so a
    # client's non-zero time stamp comes back in it; the client alone broke the rule.
    ip = peer_ip_field("127.0.0.1")
    req = Handshake(isn=ISN, socket_id=CID, req_type=1, peer_ip=ip, timestamp=4242).encode()
    reply = Handshake(isn=ISN, socket_id=CID, req_type=1, cookie=77, dst_id=CID, peer_ip=ip, timestamp=4242)
    c = conn_of(("client", 0.0, req), ("server", 0.001, reply.encode()))
    (v,) = rule_by_id("udt4/3.2/control-timestamp-zero").run(c, Context("handshake"))
    assert v.party == "client" and "4242" in v.message
    # a time stamp the listener made up itself, or one on a packet it built (the final
    # response, an ACK), is its own
    own = Handshake(isn=ISN, socket_id=CID, req_type=1, cookie=77, dst_id=CID, peer_ip=ip, timestamp=99)
    final = Handshake(isn=ISN, socket_id=SID, req_type=-1, cookie=77, dst_id=CID, peer_ip=ip, timestamp=4242)
    c = conn_of(("client", 0.0, req), ("server", 0.001, own.encode()), ("server", 0.002, final.encode()))
    found = rule_by_id("udt4/3.2/control-timestamp-zero").run(c, Context("handshake"))
    assert [(v.party, v.frame) for v in found] == [("client", 1), ("server", 2), ("server", 3)]


def test_shutdown_copies_back_to_back_are_one_shutdown_and_a_later_one_a_repeat() -> None:
    shut = Shutdown(dst_id=SID).encode()
    copies = conn_of(*handshake(), data(ISN, 0.01), *[("client", 0.02 + i * 1e-5, shut) for i in range(3)])
    assert run("udt4/5.6/shutdown-on-close", copies, case="close") == []
    repeated = conn_of(*handshake(), data(ISN, 0.01), ("client", 0.02, shut), ("client", 0.5, shut))
    (msg,) = run("udt4/5.6/shutdown-on-close", repeated, case="close")
    assert "repeated 480 ms after the first" in msg


def test_late_cookie_reply_does_not_change_the_servers_socket_id() -> None:
    # 4.11 client repeats its first request; the listener answers with a cookie reply (client's
    # ID) after its final response — the connection's server ID is still the final response's.
    hs = handshake()
    late = ("server", 0.004, Handshake(isn=ISN, socket_id=CID, req_type=1, cookie=77, dst_id=CID).encode())
    c = conn_of(*hs, late, data(ISN, 0.01))
    assert c.socket_id("server") == SID
    assert run("udt4/3.3/destination-id", c) == []


def test_data_timestamps_must_count_microseconds() -> None:
    def stamped(unit: float) -> Connection:
        pk = [
            ("client", 0.01 * i, DataPacket(seq=ISN + i, msg_no=1, dst_id=SID, timestamp=int(0.01 * i * unit)).encode())
            for i in range(40)
        ]
        return conn_of(*handshake(), *pk)

    assert run("udt4/3.1/data-timestamp-us", stamped(1e6)) == []
    assert run("udt4/3.1/data-timestamp-us", stamped(1e3))  # milliseconds: wrong unit


# ---------------------------------------------------------------------------------------------
# The party a violation names is the side the rule constrains (issue 9), not necessarily the
# sender of the packet that shows the symptom.


def parties(rule_id: str, conn: Connection, case: str = "transfer") -> list[str]:
    return [v.party for v in rule_by_id(rule_id).run(conn, Context(case))]


def data_from(sender: str, seq: int, t: float) -> tuple[str, float, bytes]:
    dst = SID if sender == "client" else CID
    return (sender, t, DataPacket(seq=seq, msg_no=1, dst_id=dst, payload=b"x" * 100).encode())


def full_ack_from(sender: str, t: float, ack_no: int, sub: int = 1) -> tuple[str, float, bytes]:
    dst = CID if sender == "server" else SID
    ack = Ack(
        dst_id=dst, ack_seq_no=sub, ack_no=ack_no, rtt=1, rtt_var=1, avail_buffer=10, arrival_speed=1, link_capacity=1
    )
    return (sender, t, ack.encode())


def light_ack_from(sender: str, t: float, ack_no: int) -> tuple[str, float, bytes]:
    return (sender, t, Ack(dst_id=CID if sender == "server" else SID, ack_no=ack_no).encode())


def keepalive_from(sender: str, t: float) -> tuple[str, float, bytes]:
    return (sender, t, KeepAlive(dst_id=CID if sender == "server" else SID).encode())


@pytest.mark.parametrize("culprit", ["client", "server"])
def test_missing_ack2_blames_the_side_that_received_the_ack(culprit: str) -> None:
    acker = "server" if culprit == "client" else "client"  # the data receiver sends the ACK
    unanswered = conn_of(
        *handshake(), data_from(culprit, ISN, 0.01), full_ack_from(acker, 0.02, ISN + 1), keepalive_from(acker, 0.5)
    )
    assert parties("udt4/8.6/ack2-for-every-ack", unanswered) == [culprit]
    ack2 = (culprit, 0.021, Ack2(dst_id=CID if culprit == "server" else SID, addl=1).encode())
    answered = conn_of(
        *handshake(),
        data_from(culprit, ISN, 0.01),
        full_ack_from(acker, 0.02, ISN + 1),
        ack2,
        keepalive_from(acker, 0.5),
    )
    assert parties("udt4/8.6/ack2-for-every-ack", answered) == []


@pytest.mark.parametrize("culprit", ["client", "server"])
def test_missing_nak_blames_the_silent_receiver(culprit: str) -> None:
    source = "server" if culprit == "client" else "client"
    gap = conn_of(*handshake(), data_from(source, ISN, 0.01), data_from(source, ISN + 2, 0.02))
    assert parties("udt4/8.2/nak-on-gap", gap, case="loss") == [culprit]
    dst = CID if culprit == "server" else SID
    naked = conn_of(
        *handshake(),
        data_from(source, ISN, 0.01),
        data_from(source, ISN + 2, 0.02),
        (culprit, 0.021, Nak(dst_id=dst, words=(ISN + 1,)).encode()),
    )
    assert parties("udt4/8.2/nak-on-gap", naked, case="loss") == []


BAD_ID = 0x80000001  # negative as a signed 32-bit integer


def handshake_ids(cid: int, sid: int) -> list[tuple[str, float, bytes]]:
    return [
        *crafted.handshake(cid=cid, sid=sid),
        ("client", 0.010, DataPacket(seq=ISN, msg_no=1, dst_id=sid, payload=b"x").encode()),
        ("server", 0.020, Ack(dst_id=cid, ack_no=ISN + 1).encode()),
    ]


def test_socket_id_range_blames_only_the_side_that_chose_the_id() -> None:
    # The client chose an out-of-range ID; the listener echoes it in its cookie reply and as
    # destination (§6.1 requires that): only the client's own requests are violations.
    assert parties("udt4/3.3/socket-id-range", conn_of(*handshake_ids(BAD_ID, SID))) == ["client", "client"]
    # The listener chose one for the accepted socket; the client echoes it as destination.
    assert parties("udt4/3.3/socket-id-range", conn_of(*handshake_ids(CID, BAD_ID))) == ["server"]
    assert parties("udt4/3.3/socket-id-range", conn_of(*handshake_ids(CID, 0))) == ["server"]
    assert parties("udt4/3.3/socket-id-range", conn_of(*handshake_ids(CID, SID))) == []


def test_handshake_fields_echoed_in_the_cookie_reply_are_the_clients() -> None:
    ip = peer_ip_field("127.0.0.1")
    c = conn_of(
        ("client", 0.000, Handshake(version=5, isn=ISN, socket_id=CID, req_type=1, peer_ip=ip).encode()),
        (
            "server",
            0.001,
            Handshake(version=5, isn=ISN, socket_id=CID, req_type=1, cookie=77, dst_id=CID, peer_ip=ip).encode(),
        ),
    )
    assert parties("udt4/5.1/handshake-fields", c) == ["client"]


def early_data(sender: str, n: int) -> list[tuple[str, float, bytes]]:
    """``n`` data packets within 10 ms of the first (0.1 ms apart), then one more 15 ms later."""
    pk = [data_from(sender, ISN + i, 0.010 + 0.0001 * i) for i in range(n)]
    return [*pk, data_from(sender, ISN + n, 0.025)]


@pytest.mark.parametrize("receiver", ["client", "server"])
def test_light_first_ack_blames_the_receiver_when_fewer_than_64_arrived(receiver: str) -> None:
    source = "server" if receiver == "client" else "client"
    light_first = conn_of(*handshake(), *early_data(source, 63), light_ack_from(receiver, 0.026, ISN + 64))
    assert parties("udt4/5.3/first-ack-full", light_first) == [receiver]
    full_first = conn_of(*handshake(), *early_data(source, 63), full_ack_from(receiver, 0.026, ISN + 64))
    assert parties("udt4/5.3/first-ack-full", full_first) == []


@pytest.mark.parametrize("receiver", ["client", "server"])
def test_light_first_ack_is_fine_after_64_packets_in_10_ms(receiver: str) -> None:
    # §9.3: 4.11 itself sends a light ACK when 64 packets arrive before its first ACK timer
    source = "server" if receiver == "client" else "client"
    c = conn_of(*handshake(), *early_data(source, 64)[:64], light_ack_from(receiver, 0.017, ISN + 64))
    assert parties("udt4/5.3/first-ack-full", c) == []


# ---------------------------------------------------------------------------------------------
# §9.2: the ACK timer is looked at when a packet arrives and restarts at every due check.


def steady_flow(n: int, t0: float = 0.01, gap: float = 0.001) -> list[tuple[str, float, bytes]]:
    """``n`` in-order data packets 1 ms apart, each SYN-spaced check answered by a full ACK, and a
    last ACK for all of them."""
    out, next_ack, sub = [], t0 + 0.010, 1
    for i in range(n):
        t = t0 + gap * i
        out.append(data_from("client", ISN + i, t))
        if t >= next_ack:
            out.append(full_ack_from("server", t + 0.0001, ISN + i + 1, sub))
            next_ack, sub = t + 0.010, sub + 1
    out.append(full_ack_from("server", t0 + gap * n + 0.0001, ISN + n, sub))
    return out


def test_ack_timer_restarted_by_a_check_that_found_a_gap_owes_nothing_until_syn_later() -> None:
    # As in the `loss` capture of both shipped stacks: the due check runs on the packet after a
    # drop (ACK number unchanged, no ACK), so the retransmission 1.3 ms later is not owed an ACK
    # before SYN has passed again; the next packet 55 ms later gets one.
    flow = steady_flow(60)
    t, n = 0.09, ISN + 60
    tail = [
        data_from("client", n + 2, t),  # n and n+1 dropped: a due check, nothing to acknowledge
        data_from("client", n, t + 0.0013),  # the ACK number moves, but the timer restarted at t
        data_from("client", n + 1, t + 0.055),
        full_ack_from("server", t + 0.0551, n + 3, 99),
        keepalive_from("server", t + 0.5),
    ]
    assert parties("udt4/9.2/full-ack-every-syn", conn_of(*handshake(), *flow, *tail)) == []


def test_ack_timer_due_with_a_moved_ack_number_and_no_ack_blames_the_receiver() -> None:
    flow = steady_flow(60)
    t, n = 0.09, ISN + 60
    tail = [
        data_from("client", n, t),  # due and the ACK number moves: an ACK is owed now
        data_from("client", n + 1, t + 0.050),
        full_ack_from("server", t + 0.0501, n + 2, 99),
    ]
    assert parties("udt4/9.2/full-ack-every-syn", conn_of(*handshake(), *flow, *tail)) == ["server"]


def test_ack_timer_after_a_100ms_pause_may_have_been_restarted_by_an_idle_check() -> None:
    # As in libudt's `loss` capture: a retransmission 310 ms after the last packet moves the ACK
    # number, but a silent idle check just before it may have restarted the timer (§9).
    flow = steady_flow(60)
    t, n = 0.4, ISN + 60
    tail = [
        data_from("client", n, t),
        data_from("client", n + 1, t + 0.050),
        full_ack_from("server", t + 0.0501, n + 2, 99),
    ]
    assert parties("udt4/9.2/full-ack-every-syn", conn_of(*handshake(), *flow, *tail)) == []


# The defects a pure-Java stack showed that the rules missed (issue 41): each is a rule now.


def test_a_payload_past_the_clients_own_mss_is_too_long_without_a_response() -> None:
    ip = peer_ip_field("127.0.0.1")
    request = ("client", 0.0, Handshake(isn=ISN, socket_id=CID, req_type=1, mss=1400, peer_ip=ip).encode())
    long = ("client", 0.01, DataPacket(seq=ISN, msg_no=1, dst_id=SID, payload=b"x" * 1376).encode())
    fits = ("client", 0.01, DataPacket(seq=ISN, msg_no=1, dst_id=SID, payload=b"x" * 1356).encode())
    (v,) = run("udt4/3.1/payload-size", conn_of(request, long))
    assert "1376 > the client's requested MSS − 44" in v and "= 1356" in v, v
    assert run("udt4/3.1/payload-size", conn_of(request, fits)) == []


def test_a_repeated_request_keeps_its_isn() -> None:
    ip = peer_ip_field("127.0.0.1")
    again = [
        ("client", 0.25 * i, Handshake(isn=ISN + i, socket_id=CID, req_type=1, peer_ip=ip).encode()) for i in range(3)
    ]
    assert parties("udt4/6.1/request-repeated-unchanged", conn_of(*again)) == ["client", "client"]
    assert run("udt4/6.1/request-repeated-unchanged", conn_of(*handshake(), *handshake())) == []
    # A new socket (a new connect) may choose a new ISN.
    retry = crafted.handshake(isn=ISN + 7, cid=CID + 1)
    assert run("udt4/6.1/request-repeated-unchanged", conn_of(*handshake(), *retry)) == []


def test_a_repeated_request_is_answered_from_the_same_session() -> None:
    ip = peer_ip_field("127.0.0.1")
    second = Handshake(isn=ISN, socket_id=SID + 1, req_type=-1, cookie=77, dst_id=CID, peer_ip=ip).encode()
    assert parties("udt4/6.1/one-session-per-request", conn_of(*handshake(), ("server", 0.3, second))) == ["server"]
    # The same response again (listener rule 6) is one session.
    assert run("udt4/6.1/one-session-per-request", conn_of(*handshake(), *handshake()[3:])) == []


def test_an_ack_before_any_data_or_with_rtt_0_is_reported() -> None:
    early = full_ack_from("server", 0.005, ISN)
    assert parties("udt4/8.3/ack-after-data", conn_of(*handshake(), early, data(ISN, 0.01))) == ["server"]
    zero = Ack(dst_id=CID, ack_seq_no=1, ack_no=ISN + 1, rtt=0, rtt_var=0, avail_buffer=10).encode()
    (v,) = run("udt4/8.3/ack-after-data", conn_of(*handshake(), data(ISN, 0.01), ("server", 0.02, zero)))
    assert "RTT 0" in v, v
    assert run("udt4/8.3/ack-after-data", conn_of(*handshake(), data(ISN, 0.01), ack(ISN + 1, 0.02))) == []
