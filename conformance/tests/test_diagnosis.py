"""The diagnosis of failed runs on hand-made logs and captures: crash lines, exits, log tails,
stats, what the capture says about how far a connection got, deaf roles, and the live watch."""

from __future__ import annotations

import json
from pathlib import Path

import crafted
import pytest
from script_stack import script_stack
from udtconf.diagnosis import Role, crash_line, exit_text, last_stats, log_tail, stats_text
from udtconf.family import RUNS
from udtconf.runner import InteropRunner, RunStatus
from udtconf.seq import MAX, incseq
from udtconf.udt.checks import Context
from udtconf.udt.diagnosis import DEAF_AFTER, STARTUP, WireWatch, deaf_findings, diagnose, wire_findings, wrap_note
from udtconf.udt.trace import Connection
from udtconf.udt.wire import Ack, DataPacket, Handshake, KeepAlive, Nak, peer_ip_field
from udtharness.capture import can_capture
from udtharness.pcap import PcapWriter
from udtharness.stacks import REPO_ROOT, load

CID, SID = 0x11, 0x22
NAMES = {"server": "srvstack", "client": "clistack"}
T0 = 1000.0  # the run's start (wall clock)


def conn_of(*pkts: tuple[str, float, bytes]) -> Connection:
    return crafted.conn_of(*pkts, t0=T0)


def handshake(isn: int) -> list[tuple[str, float, bytes]]:
    return crafted.handshake(isn=isn, cid=CID, sid=SID)


def data(seq: int, t: float) -> tuple[str, float, bytes]:
    return ("client", t, DataPacket(seq=seq, msg_no=1, dst_id=SID, payload=b"x" * 100).encode())


def ack(no: int, t: float, sub: int = 1) -> tuple[str, float, bytes]:
    return ("server", t, Ack(dst_id=CID, ack_seq_no=sub, ack_no=no, rtt=1, rtt_var=1, avail_buffer=100).encode())


# ---------------------------------------------------------------------------------------------
# processes


def test_exit_text_names_signals_and_shell_codes() -> None:
    assert exit_text(3) == "exit 3"
    assert exit_text(-11) == "killed by SIGSEGV"
    assert exit_text(134) == "exit 134 (128 + SIGABRT: a shell reporting a signal)"
    assert "still running" in exit_text(None)


def test_crash_line_joins_a_rust_panic_with_its_message() -> None:
    log = "listening on 127.0.0.1:9\nthread 'main' panicked at src/ack.rs:42:9:\nindex out of bounds: the len is 16\n"
    assert crash_line(log) == "thread 'main' panicked at src/ack.rs:42:9: index out of bounds: the len is 16"


def test_crash_line_recognises_other_runtimes_and_not_clean_logs() -> None:
    assert crash_line("a\nSegmentation fault (core dumped)\n") == "Segmentation fault (core dumped)"
    assert crash_line("terminate called after throwing an instance of 'CUDTException'") is not None
    assert crash_line("panic: runtime error: index out of range [16]\n\ngoroutine 1") is not None
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyError: 5\n'
    assert crash_line(tb) == "Python exception: KeyError: 5"
    assert crash_line("accepted 127.0.0.1:5000\nreceived 1024 bytes\n") is None


def test_log_tail_keeps_the_last_non_empty_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(40)))
    assert log_tail(log, 3) == ["line 37", "line 38", "line 39"]
    assert log_tail(tmp_path / "missing.log") == []


def test_last_stats_skips_a_torn_last_line_and_orders_known_keys(tmp_path: Path) -> None:
    p = tmp_path / "stats-server.jsonl"
    lines = [{"t": 0.1, "bytes": 10}, {"extra": 3, "t": 0.2, "bytes": 144144, "pkts_recv": 99, "name": "x"}]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"t": 0.3, "by')
    s = last_stats(p)
    assert s is not None and stats_text(s) == "t=0.2 bytes=144144 pkts_recv=99 extra=3"


# ---------------------------------------------------------------------------------------------
# the capture


def test_wrap_note_places_numbers_around_two_to_the_31() -> None:
    assert wrap_note(MAX) == " (the 2^31 wrap)" and wrap_note(0) == " (the 2^31 wrap)"
    assert wrap_note(MAX - 3) == " (3 before the 2^31 wrap)"
    assert wrap_note(5) == " (5 after the 2^31 wrap)"
    assert wrap_note(0x1234567) == ""


def test_receiver_that_stops_acking_at_the_wrap_is_named() -> None:
    isn = MAX - 4
    seqs = [incseq(isn, i) for i in range(10)]  # 0x7ffffffb … 0x00000004
    c = conn_of(
        *handshake(isn),
        *[data(s, 0.01 + 0.001 * i) for i, s in enumerate(seqs)],
        ack(MAX, 0.012),  # acknowledges up to 0x7ffffffe, then nothing more
        *[data(s, 1.5 + 0.3 * i) for i, s in enumerate(seqs[4:])],  # the client's retransmissions
    )
    f = wire_findings(c, NAMES, T0)
    stalled = next(x for x in f if x.startswith("receiver"))
    assert "receiver (server srvstack) stopped ACKing at 0x7fffffff (the 2^31 wrap)" in stalled
    assert "3.0 s before the client's last data packet" in stalled
    assert any("up to 0x00000004 (4 after the 2^31 wrap)" in x for x in f)


def test_hole_naked_but_never_retransmitted_blames_the_sender() -> None:
    c = conn_of(
        *handshake(100),
        data(100, 0.01),
        data(102, 0.02),
        ("server", 0.021, Nak(dst_id=CID, words=(101,)).encode()),
        ack(101, 0.03),
        data(103, 0.04),
    )
    f = wire_findings(c, NAMES, T0)
    assert any("waits at 0x00000065" in x and "never retransmitted by the client clistack (§8.7)" in x for x in f)


def test_hole_never_naked_blames_the_receiver() -> None:
    c = conn_of(*handshake(100), data(100, 0.01), data(102, 0.02), ack(101, 0.03), data(103, 0.04))
    assert any("which the server srvstack never NAKed (§8.2)" in x for x in wire_findings(c, NAMES, T0))


def test_unanswered_handshake_and_silent_side() -> None:
    ip = peer_ip_field("127.0.0.1")
    req = Handshake(isn=1, socket_id=CID, req_type=1, peer_ip=ip).encode()
    c = conn_of(("client", 0.0, req), ("client", 0.25, req))
    assert wire_findings(c, NAMES, T0) == [
        "the server srvstack never answered the 2 handshake(s) of the client clistack (§6.1)",
        "the server srvstack sent nothing",
    ]


def test_complete_transfer_and_who_went_silent_first() -> None:
    c = conn_of(*handshake(100), data(100, 0.01), data(101, 0.02), ack(102, 0.03), ack(102, 0.5, 2))
    f = wire_findings(c, NAMES, T0)
    assert any(x.startswith("every data packet that reached the server was acknowledged (ACK 0x00000066") for x in f)
    assert f[-1].endswith("the client went silent first")


# the culprit, from the cell's wire rules and the order of events

HS_CTX = Context("handshake")
IP = peer_ip_field("127.0.0.1")


def big(seq: int, t: float, size: int = 1500) -> tuple[str, float, bytes]:
    return ("client", t, DataPacket(seq=seq, msg_no=1, dst_id=SID, payload=b"x" * size).encode())


def test_first_data_packet_off_the_isn_names_the_sender_not_the_silent_receiver() -> None:
    c = conn_of(*handshake(100), data(101, 0.01), data(101, 0.5))
    f = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert f[0].startswith(
        "the client clistack's first data packet was invalid (udt4/4/first-data-is-isn: first data sequence 0x65 ≠ "
        "ISN 0x64 (frame 5, t=0.01 s)): the server srvstack had nothing it could acknowledge"
    )
    assert not any("received data but sent no ACK" in x for x in f)
    # without the wire rules the old reading stands: a receiver that never ACKed
    assert wire_findings(c, NAMES, T0)[0] == "the server srvstack received data but sent no ACK at all (§8.3)"


def test_oversize_first_payload_names_the_sender() -> None:
    c = conn_of(*handshake(100), big(100, 0.01))
    (first, *_) = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert first.startswith("the client clistack's first data packet was invalid (udt4/3.1/payload-size: payload 1500")


def test_oversize_payload_acknowledged_by_a_truncating_receiver_still_names_the_sender() -> None:
    # 4.11 stores the head of an oversize packet and ACKs it (§8.2 step 0): the output differs,
    # every packet was acknowledged, and the sender's payload is the fault
    c = conn_of(*handshake(100), big(100, 0.01), ack(101, 0.02))
    f = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert f[0].startswith("the client clistack sent invalid data: udt4/3.1/payload-size: payload 1500 > MSS − 44")
    assert any(x.startswith("every data packet that reached the server was acknowledged") for x in f)


def test_ack_waiting_at_an_oversize_packet_names_the_sender() -> None:
    c = conn_of(*handshake(100), data(100, 0.01), big(101, 0.02), data(102, 0.03), ack(101, 0.04), big(101, 0.3))
    (first, *_) = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert first.startswith("the ACK number waits at 0x00000065 after invalid data from the client clistack (")
    assert "udt4/3.1/payload-size" in first


def test_valid_data_left_unacknowledged_still_blames_the_receiver() -> None:
    c = conn_of(*handshake(100), data(100, 0.01), data(101, 0.02))
    assert (
        wire_findings(c, NAMES, T0, ctx=HS_CTX)[0] == "the server srvstack received data but sent no ACK at all (§8.3)"
    )


def test_no_final_response_only_when_the_second_round_request_was_sent() -> None:
    request, reply, second, _ = handshake(100)
    asked = wire_findings(conn_of(request, reply, second), NAMES, T0, ctx=HS_CTX)
    assert asked[0] == (
        "the handshake stopped after the server srvstack's first-round reply (§6.1): no final response to the "
        "second-round request the client clistack sent at t=0.00 s"
    )
    never = wire_findings(conn_of(request, reply), NAMES, T0, ctx=HS_CTX)
    assert never[0] == (
        "the client clistack never sent the second-round request after the server srvstack's cookie reply at "
        "t=0.00 s (§6.1)"
    )


def test_a_second_round_request_without_the_cookie_is_the_clients_fault() -> None:
    request, reply, _, _ = handshake(100)
    wrong = ("client", 0.002, Handshake(isn=100, socket_id=CID, req_type=-1, cookie=5, peer_ip=IP).encode())
    (first, *_) = wire_findings(conn_of(request, reply, wrong), NAMES, T0, ctx=HS_CTX)
    assert first.startswith("the client clistack's second-round request did not echo the server srvstack's cookie")


def test_a_zeroed_cookie_reply_names_the_listener_for_the_missing_second_round() -> None:
    request, _, _, _ = handshake(100)
    zeroed = Handshake(isn=100, socket_id=0, mss=0, flight_flag_size=0, req_type=1, cookie=77, dst_id=CID, peer_ip=IP)
    (first, *_) = wire_findings(conn_of(request, ("server", 0.001, zeroed.encode())), NAMES, T0, ctx=HS_CTX)
    assert first.startswith(
        "the server srvstack's cookie reply was invalid (udt4/6.1/cookie-round: cookie reply changed fields other "
        "than the cookie (frame 2, t=0.00 s)): the client clistack never sent the second-round request (§6.1)"
    )


def test_an_invalid_request_left_unanswered_names_the_client() -> None:
    bad = ("client", 0.0, Handshake(version=5, isn=1, socket_id=CID, req_type=1, peer_ip=IP).encode())
    (first, *_) = wire_findings(conn_of(bad), NAMES, T0, ctx=HS_CTX)
    assert first.startswith(
        "the client clistack sent an invalid handshake request (udt4/5.1/handshake-fields: version 5"
    )
    assert "the server srvstack did not answer its 1 handshake(s)" in first


# Another handshake version (issue 41: a pure-Java UDT): a 28-byte body, 44-byte datagrams, no
# cookie round. The codec rejects them (udt4/2/decodable), which makes them the sender's fault.
def short(h: Handshake) -> bytes:
    return h.encode()[:44]


SHORT_REQ = short(Handshake(isn=1, socket_id=CID, req_type=1, peer_ip=IP))
SHORT_RESP = short(Handshake(isn=1, socket_id=SID, req_type=-1, dst_id=CID, peer_ip=IP))


def test_requests_the_server_could_not_decode_name_the_client_not_a_deaf_server() -> None:
    c = conn_of(*(("client", 0.5 * i, SHORT_REQ) for i in range(11)))
    first, silent = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert first.startswith(
        "the client clistack sent 11 handshake(s) the server srvstack could not decode (udt4/2/decodable: "
        "handshake control information is 28 bytes, not 48"
    )
    assert "(frame 1, t=0.00 s, 44 bytes)" in first and "sent no handshake" not in first
    assert silent == "the server srvstack sent nothing"


def test_a_response_the_client_could_not_decode_is_an_answer_not_silence() -> None:
    req = Handshake(isn=1, socket_id=CID, req_type=1, peer_ip=IP).encode()
    c = conn_of(*(p for i in range(12) for p in (("client", 0.25 * i, req), ("server", 0.25 * i + 0.001, SHORT_RESP))))
    (first, *_) = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert first.startswith(
        "the server srvstack answered the client clistack's request with 12 handshake(s) the client could not "
        "decode (udt4/2/decodable: handshake control information is 28 bytes, not 48"
    )
    assert "never answered" not in first


def test_a_short_final_response_after_a_valid_cookie_round_names_the_listener() -> None:
    request, reply, second, _ = handshake(100)
    c = conn_of(request, reply, second, ("server", 0.003, SHORT_RESP), ("client", 0.25, second[2]))
    (first, *_) = wire_findings(c, NAMES, T0, ctx=HS_CTX)
    assert first.startswith(
        "the server srvstack answered the client clistack's second-round request with 1 handshake(s) the client "
        "could not decode"
    )


def test_a_crash_that_followed_the_peers_malformed_response_does_not_lead(tmp_path: Path) -> None:
    # libudt 4.11 aborts on a 44-byte response (UDT4.md §5.1): the packet is the cause
    (tmp_path / "c.log").write_text("terminate called after throwing an instance of 'CUDTException'\n")
    req = Handshake(isn=1, socket_id=CID, req_type=1, peer_ip=IP).encode()
    c = conn_of(("client", 0.0, req), ("server", 0.001, SHORT_RESP))
    server = Role("server", "srvstack", None, tmp_path / "s.log", ended=T0 + 10.0)
    after = diagnose([server, Role("client", "clistack", -6, tmp_path / "c.log", ended=T0 + 0.01)], [c], T0, ctx=HS_CTX)
    assert after.culprit is not None and after.culprit.startswith("the server srvstack answered the client")
    assert after.findings[0] == (
        "client clistack killed by SIGABRT: terminate called after throwing an instance of 'CUDTException'"
    )
    # a crash before the packet (or at a time unknown) is not its consequence: it leads, as before
    before = diagnose([server, Role("client", "clistack", -6, tmp_path / "c.log", ended=T0 - 1.0)], [c], T0, ctx=HS_CTX)
    assert before.culprit is None
    # nor does the sender's own crash give way to its packet
    (tmp_path / "s.log").write_text("thread 'main' panicked at src/hs.rs:1:1:\nboom\n")
    own = diagnose(
        [
            Role("server", "srvstack", 101, tmp_path / "s.log", ended=T0 + 1.0),
            Role("client", "clistack", 1, tmp_path / "x"),
        ],
        [c],
        T0,
        ctx=HS_CTX,
    )
    assert own.culprit is None and own.findings[0].startswith("server srvstack exit 101")


def test_a_listener_that_ignores_undecodable_requests_is_not_deaf(tmp_path: Path) -> None:
    roles = [
        Role("server", "srvstack", None, tmp_path / "s.log", ended=T0 + 12.0),
        Role("client", "clistack", None, tmp_path / "c.log", ended=T0 + 12.0),
    ]
    c = conn_of(*(("client", 0.5 * i, SHORT_REQ) for i in range(20)))
    d = diagnose(roles, [c], T0, ctx=HS_CTX)
    assert d.culprit is not None and d.culprit.startswith("the client clistack sent 20 handshake(s)")
    assert not [f for f in d.findings if "deaf" in f and "server" in f.split(":")[0]]


def test_watch_names_a_client_whose_packets_the_server_cannot_decode(tmp_path: Path) -> None:
    path = tmp_path / "cap.pcap"
    with PcapWriter(path) as w:
        for i in range(12):
            w.write(T0 + 0.5 * i, CLI, SRV, SHORT_REQ)
    watch = WireWatch(path, SRV, names={"server": "srvstack", "client": "clistack"})
    watch.poll()
    why = watch.verdict({"server": T0 - 0.5, "client": T0 - 0.1}, T0 + DEAF_AFTER + 0.1)
    assert why is not None and "deaf" not in why
    assert why.startswith("the client clistack sent 12 packet(s) in 5.1 s, none of which the server could decode")
    # one packet it could decode, and a silent server is deaf again
    with PcapWriter(path) as w:
        w.write(T0, CLI, SRV, Handshake(isn=1, socket_id=CID, req_type=1).encode())
    watch = WireWatch(path, SRV)
    watch.poll()
    again = watch.verdict({"server": T0 - 0.5, "client": T0 - 0.1}, T0 + DEAF_AFTER + 0.1)
    assert again is not None and again.startswith("server alive but deaf")


def test_diagnose_leads_with_the_spoiler_and_marks_the_peers_silence_as_what_followed(tmp_path: Path) -> None:
    # the server, stopped by the suite, went quiet 10 s before the end: after the client's bad
    # first packet, which is the culprit the one-line reason leads with (udtconf.udt.interop)
    roles = [
        Role("server", "srvstack", None, tmp_path / "s.log", ended=T0 + 12.0),
        Role("client", "clistack", None, tmp_path / "c.log", ended=T0 + 12.0),
    ]
    c = conn_of(*handshake(100), data(101, 0.01), data(101, 11.5))
    d = diagnose(roles, [c], T0, ctx=HS_CTX)
    assert d.culprit is not None and d.culprit.startswith("the client clistack's first data packet was invalid")
    deaf = [f for f in d.findings if "alive but deaf" in f]
    assert deaf and all(f.startswith("then server srvstack alive but deaf") for f in deaf)
    assert diagnose(roles, [c], T0).culprit is None  # without the wire rules: no culprit read from them


def test_a_crash_leads_rather_than_a_bad_packet(tmp_path: Path) -> None:
    (tmp_path / "s.log").write_text("thread 'main' panicked at src/rx.rs:3:1:\nboom\n")
    roles = [Role("server", "srvstack", 101, tmp_path / "s.log"), Role("client", "clistack", 0, tmp_path / "c.log")]
    d = diagnose(roles, [conn_of(*handshake(100), data(101, 0.01))], T0, ctx=HS_CTX)
    assert d.culprit is None and d.findings[0].startswith("server srvstack exit 101: thread 'main' panicked")


def test_a_role_stopped_while_silent_is_deaf_one_that_exited_is_not(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    stopped = Role("server", "srvstack", None, log, ended=T0 + 12.0)
    exited = Role("client", "clistack", 5, log, ended=T0 + 12.0)
    out = deaf_findings([stopped, exited], {"server": T0 + 2.0, "client": T0 + 11.0}, {"client": T0}, T0)
    assert out == [
        "server srvstack alive but deaf: still running, yet it had sent nothing for 10.0 s (last packet at t=2.00 s)"
    ]
    never = deaf_findings([stopped], {}, {"client": T0 + 1.0}, T0)
    assert never and "it never sent a packet" in never[0]
    assert deaf_findings([Role("server", "s", None, log, ended=T0 + DEAF_AFTER / 2)], {"server": T0}, {}, T0) == []


def test_diagnose_puts_the_crash_first_and_keeps_tails_and_stats(tmp_path: Path) -> None:
    (tmp_path / "client.log").write_text("connecting\nthread 'main' panicked at src/nak.rs:7:5:\nattempt to subtract\n")
    (tmp_path / "server.log").write_text("listening\n")
    (tmp_path / "stats-server.jsonl").write_text('{"t": 1.0, "bytes": 2048, "acks_sent": 3}\n')
    roles = [
        Role("server", "srvstack", None, tmp_path / "server.log", T0 + 3, tmp_path / "stats-server.jsonl"),
        Role("client", "clistack", 101, tmp_path / "client.log", T0 + 1),
    ]
    c = conn_of(*handshake(100), data(100, 0.01), ack(101, 0.02))
    d = diagnose(roles, [c], T0)
    assert d.findings[0] == "client clistack exit 101: thread 'main' panicked at src/nak.rs:7:5: attempt to subtract"
    assert d.stats == {"server srvstack": "t=1.0 bytes=2048 acks_sent=3"}
    assert d.tails["server srvstack"] == ["listening"]
    assert "client clistack log, last 3 lines:" in d.lines()
    assert d.headline(1) == d.findings[0]


def test_diagnose_without_a_capture_says_so(tmp_path: Path) -> None:
    d = diagnose([Role("server", "s", 1, tmp_path / "none.log", T0)], [], T0)
    assert any("no capture" in f for f in d.findings)


@pytest.mark.slow
def test_a_run_ended_before_its_capture_was_read_says_so_not_that_capturing_needs_root(tmp_path: Path) -> None:
    # issue 41: a server that never bound its port ended the run before a client started, and
    # the line said "capturing needs root" on a run that captured as root
    stack = script_stack(
        tmp_path, "nobind", 'print("cannot bind: no such address")\nraise SystemExit(1)\n', ["handshake"]
    )
    res = InteropRunner(RUNS, tmp_path / "results").run(stack, stack, "handshake")
    assert res.status == RunStatus.FAIL and "did not bind UDP port" in res.reason
    assert res.diagnosis is not None
    if can_capture():
        assert any("ended before a client started, so its capture was not read" in f for f in res.diagnosis.findings)
        assert not any("needs root" in f for f in res.diagnosis.findings)
    else:
        assert any("capturing needs root" in f for f in res.diagnosis.findings)


# ---------------------------------------------------------------------------------------------
# the live watch

SRV, CLI = ("127.0.0.1", 9000), ("127.0.0.1", 5000)


def test_watch_reads_a_growing_capture_and_calls_a_silent_server_deaf(tmp_path: Path) -> None:
    path = tmp_path / "cap.pcap"
    with PcapWriter(path) as w:
        w.write(T0 + 0.0, CLI, SRV, Handshake(isn=1, socket_id=CID, req_type=1).encode())
        w.write(T0 + 0.1, SRV, CLI, Handshake(isn=1, socket_id=CID, req_type=1, cookie=7).encode())
        watch = WireWatch(path, SRV)
        watch.poll()
        assert watch.last == {"client": T0, "server": T0 + 0.1}
        started = {"server": T0 - 0.5, "client": T0 - 0.1}
        assert watch.verdict(started, T0 + 3.0) is None
        for i in range(10):  # the client keeps trying, the server says nothing more
            w.write(T0 + 0.5 + i * 0.5, CLI, SRV, KeepAlive(dst_id=SID).encode())
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)  # a record still being written
    watch.poll()
    why = watch.verdict(started, T0 + 0.1 + DEAF_AFTER + 0.2)
    assert why is not None and why.startswith("server alive but deaf")


def test_watch_gives_a_client_time_to_start_then_calls_it_deaf(tmp_path: Path) -> None:
    path = tmp_path / "cap.pcap"
    PcapWriter(path).close()  # nothing captured yet
    watch = WireWatch(path, SRV)
    watch.poll()
    started = {"server": T0 - 1.0, "client": T0}
    assert watch.verdict(started, T0 + DEAF_AFTER + 1.0) is None
    why = watch.verdict(started, T0 + STARTUP + 0.1)
    assert why == "client alive but deaf: running for 10.1 s without sending a packet"


def test_watch_sees_a_stalled_ack_number_behind_a_relay(tmp_path: Path) -> None:
    relay, upstream = ("127.0.0.1", 7000), ("127.0.0.1", 7001)
    path = tmp_path / "relay.pcap"
    with PcapWriter(path) as w:
        for i in range(60):  # data keeps arriving, the ACK number never moves past 0x7fffffff
            t = T0 + 0.2 * i
            seq = incseq(MAX - 3, i)
            w.write(t, CLI, relay, DataPacket(seq=seq, msg_no=1, dst_id=SID).encode())
            w.write(t, upstream, SRV, DataPacket(seq=seq, msg_no=1, dst_id=SID).encode())
            w.write(t + 0.01, SRV, upstream, Ack(dst_id=CID, ack_no=MAX if i > 3 else incseq(MAX - 3, i)).encode())
    watch = WireWatch(path, SRV, relay)
    watch.poll()
    started = {"server": T0, "client": T0}
    assert watch.verdict(started, T0 + 5.0) is None
    why = watch.verdict(started, T0 + 12.0)
    assert why is not None and "stayed at 0x7fffffff (the 2^31 wrap)" in why


def test_watch_stays_quiet_on_a_healthy_run(tmp_path: Path) -> None:
    path = tmp_path / "cap.pcap"
    with PcapWriter(path) as w:
        for i in range(100):
            w.write(T0 + 0.1 * i, CLI, SRV, DataPacket(seq=i, msg_no=1, dst_id=SID).encode())
            w.write(T0 + 0.1 * i + 0.01, SRV, CLI, Ack(dst_id=CID, ack_no=i + 1).encode())
    watch = WireWatch(path, SRV)
    watch.poll()
    assert watch.verdict({"server": T0, "client": T0}, T0 + 10.0) is None
    assert watch.verdict({"server": T0}, T0 + 60.0) is None  # the client has exited: not the watch's call


# ---------------------------------------------------------------------------------------------
# a real failing run

DEAF_SERVER = r"""#!/usr/bin/env bash
# udt-rs whose receiver freezes (SIGSTOP) once 100 kB arrived: the process lives on, deaf
[ "$TESTCASE" = loss ] || exit 127
bin="$REPO_ROOT/impl/target/release/udt"
export UDT_OFFLOAD=0
if [ "$ROLE" = client ]; then exec "$bin" send --connect "$SERVER_ADDR:$SERVER_PORT" --input "$INPUT"; fi
"$bin" recv --listen "$SERVER_ADDR:$SERVER_PORT" --output "$OUTPUT" &
pid=$!
while [ "$(stat -c %s "$OUTPUT" 2>/dev/null || echo 0)" -lt 100000 ]; do kill -0 $pid || exit 1; sleep 0.002; done
kill -STOP $pid
echo "froze udt recv"
wait $pid
"""


@pytest.mark.slow
@pytest.mark.interop
def test_a_deaf_server_stops_the_run_early_and_is_named(tmp_path: Path) -> None:
    if not (REPO_ROOT / "impl/target/release/udt").is_file():
        pytest.skip("impl/target/release/udt not built (make build)")
    d = tmp_path / "udt-deaf"
    d.mkdir()
    (d / "meta.toml").write_text('name = "udt-deaf"\nversion = "0"\ntestcases = ["loss"]\n')
    (d / "entrypoint").write_text(DEAF_SERVER)
    (d / "entrypoint").chmod(0o755)
    stack = load(d)
    res = InteropRunner(RUNS, tmp_path / "results").run(stack, stack, "loss")
    assert res.status == RunStatus.FAIL
    assert res.stopped is not None and res.stopped.startswith("server udt-deaf alive but deaf")
    assert res.reason.startswith("stopped early after")
    assert res.diagnosis is not None
    assert any(f.endswith("the server went silent first") for f in res.diagnosis.findings)
    assert res.diagnosis.tails["server udt-deaf"][-1] == "froze udt recv"
