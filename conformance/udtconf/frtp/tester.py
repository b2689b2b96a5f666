"""The active tester for FRTP stacks (``docs/spec/FRTP.md``), on the SABUL tester's machinery
(:mod:`udtconf.sabul.tester`: the recorded control connection, the abort verdict): the suite's
own endpoint plays the other side of a session with FRTP's 52-byte block and misbehaves on
purpose. The stack runs ``TESTCASE=transfer`` through its adapter, as the **sender**
(``ROLE=server``; the tester connects as a receiver asking for :data:`RATE_BPS` with its data
address on 127.0.0.2) or as the **receiver** (``ROLE=client``; the tester listens as a sender).

A bad block or a refused rate ends in an abort (§2 step 3, §9 TC 10: a reset, exit ≠ 0, no
echo); a cut control connection ends both sides non-zero, promptly (SABUL.md §10.2); an ERR
flood and injected SYN frames must neither break the session nor push the sender above the
negotiated rate (§3.2 TC, §4). Each probe leaves ``probe.log`` and ``probe.pcap``.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from udtharness.stacks import Stack

from .. import active
from ..active import Outcome, Probe, ProbeEnv, ProbeResult, Probes, ended
from ..sabul import tester as sabul_tester
from ..sabul.tester import ControlConnection, abort_verdict, ending, wait_for_ack
from ..sabul.wire import (
    Ack,
    Control,
    ControlReader,
    Data,
    Err,
    OptionBlock,
    SabulWireError,
    describe,
    encode_raw_control,
)
from .wire import FRTP_BLOCK_LEN, FrtpOptionBlock, decode_frtp_block, ip_word

PAYLOAD = sabul_tester.PAYLOAD
PACKETS = sabul_tester.INPUT_BYTES // PAYLOAD  # 300 full packets
RATE_BPS = 20_000_000  # IPT 600 µs: 300 packets in 0.18 s
DATA_IP = "127.0.0.2"
RATE_TOLERANCE = 0.05  # as the capture rule frtp/4/rate-not-exceeded
BURST = 16  # packets a late-waking sender may send back to back to catch up (§9 TC 11)

FrtpProbe = Probe[ProbeEnv]
PROBES: Probes[ProbeEnv] = Probes()
probe = PROBES.probe


# ---------------------------------------------------------------------------------------------
# The stack as the sender: the tester is its receiver


class _AsSender(sabul_tester.AsSender):
    """SABUL's (the stack started as the sender with 300 full packets), taking DATA on 127.0.0.2
    and sending the 52-byte block (§3.3)."""

    data_ip = DATA_IP
    block_len = FRTP_BLOCK_LEN

    def __init__(self, env: ProbeEnv) -> None:
        super().__init__(env)
        self.data = self.input.read_bytes()

    def block(self, rate_bps: int = RATE_BPS) -> FrtpOptionBlock:
        return FrtpOptionBlock(OptionBlock(self.udp.getsockname()[1], self.port), ip_word(DATA_IP), rate_bps)

    def own_block(self) -> bytes:
        """The valid block: the tester's data address, :data:`RATE_BPS`."""
        return self.block().encode()

    def refused(self, block: bytes, what: str) -> ProbeResult:
        """Sends ``block``; the verdict for a sender that must refuse it: no echo, an abort."""
        tcp = self.connect(block)
        try:
            echo = tcp.recv_exact(FRTP_BLOCK_LEN, 3)
            closed = tcp.how_closed(3) if echo else "fin"
        except ConnectionResetError:
            echo, closed = b"", "reset"
        if echo:
            return self.env.result(Outcome.FAIL, f"echoed {what} ({len(echo)} bytes): the sender must refuse it")
        return abort_verdict(self.env, ended(self.proc, 10), closed, what, [])

    def set_up_frtp(self) -> ControlConnection:
        """The valid block and its echo, which must decode as a valid block (§3.3)."""
        tcp, echo = self.handshake()
        decode_frtp_block(echo)
        return tcp

    def receive(
        self, tcp: ControlConnection, inject: Callable[[int, int], bytes | None], timeout: float = 10.0
    ) -> tuple[dict[int, bytes], list[float], int]:
        """A minimal FRTP receiver: takes DATA, writes ``inject(seq, i)`` after the i-th datagram
        (seq: its number) unless that is None, ACKs the in-order point every 50 ms; returns the packets and the
        arrival times once everything is acknowledged, or what it had at ``timeout``."""
        got: dict[int, bytes] = {}
        times: list[float] = []
        point, acked, injected = 0, 0, 0
        next_ack = time.monotonic() + 0.05
        deadline = time.monotonic() + timeout
        self.udp.settimeout(0.01)
        while time.monotonic() < deadline and acked < PACKETS:
            try:
                raw, src = self.udp.recvfrom(65536)
            except TimeoutError:
                raw = b""
            now = time.monotonic()
            if raw:
                self.env.recorder.write(time.time(), src, self.udp.getsockname(), raw)
                times.append(now)
                seq = struct.unpack_from("!I", raw)[0]
                got.setdefault(seq, raw[4:])
                while point in got:
                    point += 1
                frame = inject(seq, len(times) - 1)
                if frame is not None:
                    tcp.send(frame)
                    injected += 1
            if now >= next_ack or point == PACKETS:
                if point > acked:
                    tcp.send(Ack(point).encode())
                    acked = point
                next_ack = now + 0.05
        return got, times, injected


def _not_an_abort(rc: int | None) -> bool:
    """Exit 0, a hang (None) or a crash: not the non-zero exit an abort owes."""
    return rc is None or rc < 0 or rc >= 128 or rc == 0


def _rate_note(times: list[float]) -> tuple[bool, str]:
    """Whether the DATA arrivals kept to the negotiated rate (with a catch-up burst's slack)."""
    if len(times) < 2:
        return True, f"{len(times)} DATA datagrams"
    ipt = (PAYLOAD + 4 + 28) * 8 / RATE_BPS
    span = times[-1] - times[0]
    ok = (len(times) - 1 - BURST) * ipt <= span * (1 + RATE_TOLERANCE)
    rate = (len(times) - 1) * ipt / span * RATE_BPS / 1e6 if span > 0 else float("inf")
    return ok, f"{len(times)} DATA datagrams in {span * 1000:.0f} ms ({rate:.1f} Mbit/s, negotiated {RATE_BPS / 1e6:g})"


def _survives(env: ProbeEnv, what: str, inject: Callable[[int, int], bytes | None]) -> ProbeResult:
    """Set-up, then ``inject`` written on the control connection during the transfer: the
    session must complete (every byte, FIN, exit 0) at the negotiated rate."""
    with _AsSender(env) as s:
        tcp = s.set_up_frtp()
        got, times, injected = s.receive(tcp, inject)
        closed = tcp.how_closed(5)
        tcp.close()
        rc = ended(s.proc, 10)
        ok_rate, note = _rate_note(times)
        notes = [note, f"{injected} injections", f"sender's close: {closed}"]
        data = b"".join(got.get(i, b"") for i in range(PACKETS))
        if rc is None or rc < 0 or rc >= 128:
            return env.result(Outcome.FAIL, f"{ending(rc)} after {what}", notes)
        if rc != 0 or closed != "fin":
            return env.result(Outcome.FAIL, f"{what} broke the session ({ending(rc)}, control {closed})", notes)
        if data != s.data:
            return env.result(Outcome.FAIL, f"after {what} the data is not the input ({len(got)} packets)", notes)
        if not ok_rate:
            return env.result(Outcome.FAIL, f"{what} pushed the sender above the negotiated rate", notes)
        return env.result(Outcome.PASS, f"ignored {what}: complete transfer at the negotiated rate, exit 0", notes)


@probe(
    "sender/rate-above-maximum",
    "2, 9",
    "sender",
    "a block asking for 2^63 bit/s, above any sender's maximum: no echo, an abort (reset, exit ≠ 0), no hang",
)
def _impossible_rate(env: ProbeEnv) -> ProbeResult:
    with _AsSender(env) as s:
        return s.refused(s.block(1 << 63).encode(), "a rate of 2^63 bit/s")


@probe("sender/zero-rate", "3.3, 9", "sender", "a block asking for 0 bit/s: no echo, an abort (reset, exit ≠ 0)")
def _zero_rate(env: ProbeEnv) -> ProbeResult:
    with _AsSender(env) as s:
        return s.refused(s.block(0).encode(), "a rate of 0 bit/s")


@probe(
    "sender/err-flood",
    "4, 5",
    "sender",
    "1000 ERRs: ten listing the packet just received after each of the first 100 DATA datagrams; the "
    "retransmissions stay within the fixed rate and the transfer completes",
)
def _err_flood(env: ProbeEnv) -> ProbeResult:
    return _survives(env, "an ERR flood", lambda seq, i: encode_raw_control(2, 1, [seq]) * 10 if i < 100 else None)


@probe(
    "sender/syn-ignored",
    "3.2, 9",
    "sender",
    "SYN frames (type 4, SABUL's rate-control feedback) during the transfer: ignored, no rate change",
)
def _syn_ignored(env: ProbeEnv) -> ProbeResult:
    attrs = (0, 1, 100, 0xFFFFFFFF)
    return _survives(env, "injected SYN frames", lambda seq, i: encode_raw_control(4, attrs[i % 4]) if i < 40 else None)


@probe(
    "sender/control-cut-mid-transfer",
    "1, 9",
    "sender",
    "the control connection reset after the first DATA packets: the sender exits ≠ 0 promptly, no hang",
)
def _sender_cut(env: ProbeEnv) -> ProbeResult:
    with _AsSender(env) as s:
        tcp = s.set_up_frtp()
        s.udp.settimeout(5)
        s.udp.recvfrom(65536)
        tcp.reset()
        t0 = time.monotonic()
        rc = ended(s.proc, 10)
        notes = [f"ended {time.monotonic() - t0:.1f} s after the reset"]
        if _not_an_abort(rc):
            return env.result(Outcome.FAIL, f"{ending(rc)} after the control connection was cut", notes)
        return env.result(Outcome.PASS, f"exit {rc} after the control connection was cut", notes)


@probe(
    "sender/ipt-after-idle",
    "4, 9",
    "sender",
    "all 300 packets received, no ACK, 50 ms of quiet, then an ERR listing 40 of them: the 40 "
    "retransmissions keep the IPT (span ≥ 80 % of 39 IPTs, no catch-up burst); then ACK, FIN, exit 0",
)
def _after_idle(env: ProbeEnv) -> ProbeResult:
    with _AsSender(env) as s:
        tcp = s.set_up_frtp()
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 5
        s.udp.settimeout(0.05)
        while len(got) < PACKETS and time.monotonic() < deadline:
            try:
                raw, _ = s.udp.recvfrom(65536)
            except TimeoutError:
                continue
            got.setdefault(struct.unpack_from("!I", raw)[0], raw[4:])
        if len(got) < PACKETS:
            return env.result(
                Outcome.FAIL, f"only {len(got)} of {PACKETS} packets within 5 s at {RATE_BPS / 1e6:g} Mbit/s"
            )
        time.sleep(0.05)
        tcp.send(Err.from_losses(range(100, 140)).encode())
        times: list[float] = []
        while len(times) < 40 and time.monotonic() < deadline + 1:
            try:
                raw, src = s.udp.recvfrom(65536)
            except TimeoutError:
                continue
            times.append(time.monotonic())
            s.env.recorder.write(time.time(), src, s.udp.getsockname(), raw)
        tcp.send(Ack(PACKETS).encode())
        ipt = (PAYLOAD + 4 + 28) * 8 / RATE_BPS
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        notes = [f"{len(times)} retransmissions in {span * 1000:.1f} ms (39 IPTs = {39 * ipt * 1000:.1f} ms)"]
        closed = tcp.how_closed(5)
        rc = ended(s.proc, 10)
        notes.append(f"sender's close: {closed}, {ending(rc)}")
        if len(times) < 40:
            return env.result(Outcome.FAIL, "the ERR's 40 numbers were not all sent again within 1 s", notes)
        if span < 0.8 * 39 * ipt:
            return env.result(
                Outcome.FAIL, "the retransmissions after idle left faster than the IPT (a catch-up burst)", notes
            )
        if rc != 0 or closed != "fin":
            return env.result(Outcome.FAIL, "the session did not end with a FIN and exit 0", notes)
        return env.result(Outcome.PASS, "the schedule restarted after idle: retransmissions one IPT apart", notes)


# ---------------------------------------------------------------------------------------------
# The stack as the receiver: the tester is its sender


class _AsReceiver(sabul_tester.AsReceiver):
    """SABUL's (the stack started as the receiver), told to take DATA on 127.0.0.2."""

    def __init__(self, env: ProbeEnv) -> None:
        super().__init__(env, DATA_ADDR=DATA_IP)

    def accept_frtp(self) -> tuple[ControlConnection, FrtpOptionBlock]:
        """The control connection and the stack's 52-byte block (within 5 s, validated: §3.3)."""
        tcp = self.accept_control()
        return tcp, decode_frtp_block(tcp.recv_exact(FRTP_BLOCK_LEN, 5))

    def send_to_data_path(self, tcp: ControlConnection, block: FrtpOptionBlock, seq: int, payload: bytes) -> None:
        raw = Data(seq, payload).encode()
        dest = block.data_address(tcp.peer[0])
        self.udp.sendto(raw, dest)
        self.env.recorder.write(time.time(), self.udp.getsockname(), dest, raw)


@probe(
    "receiver/rate-refused",
    "2, 9",
    "receiver",
    "the sender refuses the block (a reset, no echo): the receiver exits ≠ 0 promptly, nothing written",
)
def _rate_refused(env: ProbeEnv) -> ProbeResult:
    with _AsReceiver(env) as r:
        tcp, _ = r.accept_frtp()
        tcp.reset()
        rc = ended(r.proc, 10)
        if _not_an_abort(rc):
            return env.result(Outcome.FAIL, f"{ending(rc)} after its block was refused")
        if r.written():
            return env.result(Outcome.FAIL, "wrote data although the session never started")
        return env.result(Outcome.PASS, f"exit {rc} after its block was refused")


@probe(
    "receiver/control-cut-mid-transfer",
    "1, 9",
    "receiver",
    "50 packets on the data path, their ACK, then the control connection reset: exit ≠ 0 promptly with "
    "exactly those 50 packets in OUTPUT",
)
def _receiver_cut(env: ProbeEnv) -> ProbeResult:
    with _AsReceiver(env) as r:
        tcp, block = r.accept_frtp()
        tcp.send(block.encode())
        chunks = [os.urandom(PAYLOAD) for _ in range(50)]
        for seq, c in enumerate(chunks):
            r.send_to_data_path(tcp, block, seq, c)
            time.sleep(block.ipt())
        if not wait_for_ack(tcp, 50, 5):
            return env.result(Outcome.FAIL, "no ACK 50 for 50 contiguous packets within 5 s (FRTP.md §5: every 100 ms)")
        tcp.reset()
        rc = ended(r.proc, 10)
        got, want = r.written(), b"".join(chunks)
        notes = [f"OUTPUT {len(got)} bytes, {len(want)} delivered before the reset"]
        if _not_an_abort(rc):
            return env.result(Outcome.FAIL, f"{ending(rc)} after the control connection was cut", notes)
        if got != want:
            return env.result(Outcome.FAIL, "OUTPUT is not exactly the 50 packets delivered before the cut", notes)
        return env.result(Outcome.PASS, f"exit {rc}, kept the 50 delivered packets", notes)


@probe(
    "receiver/echo-changes-the-rate",
    "9",
    "receiver",
    "an echo with half the rate the block asked for: an abort (reset, exit ≠ 0), nothing written",
)
def _echo_rate(env: ProbeEnv) -> ProbeResult:
    with _AsReceiver(env) as r:
        tcp, block = r.accept_frtp()
        tcp.send(replace(block, rate_bps=block.rate_bps // 2).encode())
        closed = tcp.how_closed(5)
        res = abort_verdict(env, ended(r.proc, 10), closed, "an echo with another rate", [])
        if not res.failed and r.written():
            return env.result(Outcome.FAIL, "wrote data although the session never started")
        return res


def _frames(tcp: ControlConnection, reader: ControlReader, seconds: float) -> list[tuple[float, Control]]:
    """The control frames the receiver writes within ``seconds`` (monotonic arrival times)."""
    out: list[tuple[float, Control]] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            chunk = tcp.recv(65536, left)
        except TimeoutError:
            break
        if not chunk:
            break
        now = time.monotonic()
        out += [(now, f) for f in reader.feed(chunk)]
    return out


def _finish(env: ProbeEnv, r: _AsReceiver, tcp: ControlConnection, want: bytes, notes: list[str]) -> ProbeResult | None:
    """The tester's FIN after everything was acknowledged: None if the receiver then exits 0 with
    exactly ``want`` in OUTPUT, else the failure."""
    tcp.sock.shutdown(socket.SHUT_WR)
    closed = tcp.how_closed(5)
    rc = ended(r.proc, 10)
    got = r.written()
    notes.append(f"receiver's close: {closed}; OUTPUT {len(got)} of {len(want)} bytes")
    if rc != 0:
        return env.result(Outcome.FAIL, f"{ending(rc)} after a complete session", notes)
    if got != want:
        return env.result(Outcome.FAIL, "OUTPUT is not the data sent", notes)
    return None


@probe(
    "receiver/whole-loss-list-split",
    "5, 9",
    "receiver",
    "every other packet of 0…1599 missing (799 single losses, 799 words): the periodic ERRs list the whole "
    "list in messages of at most max_loss_length (366) words; then the rest, its ACK, a FIN: exit 0",
)
def _split(env: ProbeEnv) -> ProbeResult:
    with _AsReceiver(env) as r:
        tcp, block = r.accept_frtp()
        tcp.send(block.encode())
        chunks = [os.urandom(64) for _ in range(1600)]
        for seq in range(0, 1600, 2):
            r.send_to_data_path(tcp, block, seq, chunks[seq])
        missing = set(range(1, 1599, 2))
        reader = ControlReader(block.sabul.max_loss_length)
        try:
            frames = _frames(tcp, reader, 0.15)
        except SabulWireError as e:
            return env.result(Outcome.FAIL, f"an invalid control frame: {e}")
        errs = [f for _, f in frames if isinstance(f, Err)]
        listed = {n for e in errs for a, b in e.ranges() for n in range(a, b + 1)}
        biggest = max((len(e.words) for e in errs), default=0)
        whole = sum(len(e.words) > 1 for e in errs)
        notes = [f"{len(errs)} ERRs in 150 ms ({whole} of more than one word), the largest {biggest} words"]
        if not missing <= listed:
            return env.result(
                Outcome.FAIL, f"the ERRs of 150 ms do not list {len(missing - listed)} missing numbers", notes
            )
        for seq in range(1, 1600, 2):
            r.send_to_data_path(tcp, block, seq, chunks[seq])
        if not wait_for_ack(tcp, 1600, 5):
            return env.result(Outcome.FAIL, "no ACK 1600 within 5 s of the retransmissions", notes)
        failed = _finish(env, r, tcp, b"".join(chunks), notes)
        return failed or env.result(Outcome.PASS, "the whole loss list, split within max_loss_length; exit 0", notes)


@probe(
    "receiver/beyond-window-acked",
    "5, 9",
    "receiver",
    "10 packets and their ACK, then one packet recv_flag_size + 5 beyond the ACK point: an ACK at once "
    "(within 80 ms, though the ACK point did not move), the packet dropped; the rest, a FIN: exit 0",
)
def _beyond_window(env: ProbeEnv) -> ProbeResult:
    with _AsReceiver(env) as r:
        tcp, block = r.accept_frtp()
        tcp.send(block.encode())
        chunks = [os.urandom(PAYLOAD) for _ in range(20)]
        for seq in range(10):
            r.send_to_data_path(tcp, block, seq, chunks[seq])
        if not wait_for_ack(tcp, 10, 5):
            return env.result(Outcome.FAIL, "no ACK 10 for 10 contiguous packets within 5 s")
        r.send_to_data_path(tcp, block, 10 + block.sabul.recv_flag_size + 5, os.urandom(PAYLOAD))
        frames = _frames(tcp, ControlReader(block.sabul.max_loss_length), 0.08)
        acks = [f for _, f in frames if isinstance(f, Ack)]
        notes = [f"within 80 ms: {', '.join(describe(f) for _, f in frames) or 'nothing'}"]
        if not acks:
            return env.result(Outcome.FAIL, "no ACK within 80 ms of a packet beyond the resequencing window", notes)
        for seq in range(10, 20):
            r.send_to_data_path(tcp, block, seq, chunks[seq])
        if not wait_for_ack(tcp, 20, 5):
            return env.result(Outcome.FAIL, "no ACK 20 after the beyond-window packet", notes)
        failed = _finish(env, r, tcp, b"".join(chunks), notes)
        return failed or env.result(Outcome.PASS, "ACKed the overflow at once and dropped the packet; exit 0", notes)


def run_probe(stack: Stack, p: FrtpProbe, workdir: Path) -> ProbeResult:
    """Run one probe against a fresh process of ``stack`` in ``workdir`` (emptied first); writes
    ``probe.log`` and ``probe.pcap`` there."""
    side = "server" if p.role == "sender" else "client"
    plays = f"the {p.role} (ROLE={side})"
    return active.run_probe(stack, p, workdir, ProbeEnv, spec="FRTP.md", side=side, plays=plays, errors=(OSError,))


__all__ = ["PROBES", "FrtpProbe", "run_probe"]
