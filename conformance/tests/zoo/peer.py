"""The zoo's one program: a small UDT4 endpoint on the suite's own Python peer (udtconf.udt.peer's
``Wire`` and ``connect``), run through the adapter contract as ``peer.py DEFECT``, with the one
defect named on its command line (the list is in :mod:`zoo`; ``healthy`` has none).

Either role speaks UDT4.md as far as the handshake, data, ACK/ACK2, NAK and shutdown of a
STREAM transfer need: the client sends INPUT with a fixed window of 16 packets (§7, §11),
answers every full ACK with an ACK2 (§8.6), retransmits what a NAK lists and, after 0.3 s
without progress, everything unacknowledged (§8.7, §9.4), then sends a Shutdown (§5.6); the
server answers the cookie round by echoing the request (§6.1), ACKs every 10 ms while it has
something new to acknowledge (§8.3), NAKs gaps (§8.2), and writes OUTPUT as data arrives.
"""

from __future__ import annotations

import mmap
import os
import random
import resource
import signal
import socket
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # conformance/: udtconf

from udtconf.seq import MAX as MAX_SEQ  # noqa: E402
from udtconf.seq import incseq, seqcmp, seqoff  # noqa: E402
from udtconf.udt.peer import Wire, connect  # noqa: E402
from udtconf.udt.wire import (  # noqa: E402
    Ack,
    Ack2,
    AckKind,
    DataPacket,
    Handshake,
    KeepAlive,
    Nak,
    Packet,
    Shutdown,
    WireError,
    encode_loss_list,
    peer_ip_field,
)

CASES = ("handshake", "transfer", "dgram", "loss")
PAYLOAD = 1456  # MSS 1500 − 44 (§3.1)
WINDOW = 16  # CUDTCC's initial window (§11); the zoo never grows it
IDLE_EXIT = 20.0  # s without a packet: a role gives up
NO_PROGRESS = 8.0  # s without an ACK moving: the client gives up
MEMORY_BACKSTOP = 2 << 30  # RLIMIT_DATA when the suite set no cap: the zoo never takes the host's memory
CRASH_MARK = "zoo: the defect strikes now"
MIN_MSS = 76  # the smallest MSS a listener may accept (§6.1 TC, §13)
ACCEPTS_MSS_0_RESPONSE = 16 + 28  # accepts-mss-0's response to an MSS below MIN_MSS: cut to 44 bytes
SHORT_HANDSHAKE = 16 + 28  # another handshake's datagram: the header and 7 words, no cookie or peer IP (§5.1 has 12)


def fatal_dump() -> None:
    """What a managed runtime prints when it dies: the fatal error first, then every thread."""
    lines = ["fatal error: out of memory", "", "runtime stack:"]
    for g in range(1, 22):
        lines += [f"goroutine {g} [{'running' if g == 1 else 'chan receive'}]:"]
        for f in range(5):
            lines += [
                f"udtzoo/core.(*Conn).step{f}(0xc000{g:03x}{f:03x})",
                f"\t/src/udtzoo/core/conn.go:{40 + f} +0x{f}f",
            ]
        lines.append("")
    print("\n".join(lines), file=sys.stderr, flush=True)
    os._exit(2)


class Defect:
    """What the one defect changes, read where each behaviour happens."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.hoard: list[mmap.mmap] = []
        self.server_wire: DefectWire | None = None

    def strike(self) -> None:
        """The crashing defects' moment: the first data packet (server) or the first ACK (client)."""
        if self.name in ("fatal-exit-2", "traceback-exit-1", "memory-growth"):
            print(CRASH_MARK, f"({self.name})", file=sys.stderr, flush=True)
        if self.name == "fatal-exit-2":
            fatal_dump()
        if self.name == "traceback-exit-1":
            losses: dict[int, int] = {}
            losses[len(losses) + 1] += 1  # KeyError: the loss list's first lookup
        if self.name == "memory-growth":
            caps = [resource.getrlimit(r)[0] for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA)]
            if all(c == resource.RLIM_INFINITY for c in caps):  # the suite set none: ours
                resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_BACKSTOP, resource.getrlimit(resource.RLIMIT_DATA)[1]))
            while True:  # a loss list that loops, growing until the process dies of it
                # 32 MiB of private memory mapped at once, one page in 16 touched: the process
                # reaches a memory cap in well under a second, whatever the host's load
                try:
                    chunk = mmap.mmap(-1, 32 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                except OSError:
                    raise MemoryError(f"loss list: {len(self.hoard) * 32} MiB and growing") from None
                for page in range(0, 32 << 20, 16 << 12):
                    chunk[page] = 0xA5
                self.hoard.append(chunk)

    def wire(self, bind: tuple[str, int]) -> Wire:
        """The server's socket: where the defects of the listener's socket live (:class:`DefectWire`)."""
        if self.name in ("bound-v6-only", "always-sending", "accepts-mss-0"):
            self.server_wire = DefectWire(bind, self.name)
            return self.server_wire
        return Wire(bind)

    def go_on(self) -> None:
        """always-sending: whatever ended the role, its socket goes on sending, until killed."""
        if self.name == "always-sending" and self.server_wire is not None:
            while True:
                time.sleep(1)

    def hang(self) -> None:
        """hang-on-close: close() never returns, and SIGTERM does not help."""
        if self.name == "hang-on-close":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("zoo: closing …", file=sys.stderr, flush=True)
            while True:
                time.sleep(1)


class DefectWire(Wire):
    """The listener's socket with the defect of issue 41 that lives there:

    * ``bound-v6-only``: an AF_INET6 socket on ``::`` (dual-stack, as Java binds by default),
      so the port shows in ``/proc/net/udp6`` only and IPv4 peers arrive as ``::ffff:a.b.c.d``;
    * ``always-sending`` (never stops sending): every address it ever heard from (a packet decodable or not)
      gets a keep-alive every 20 ms, from then on, forever — addressed to the socket ID the
      address last named in a handshake, 0 if none;
    * ``accepts-mss-0``: takes a request's MSS as is, even below 76 (no floor, §6.1 TC); its
      final response to one comes out cut to 44 bytes (its datagram buffer is sized from the
      MSS), and from then on it ACKs that address every 10 ms, data or not.
    """

    def __init__(self, bind: tuple[str, int], name: str) -> None:
        self.name = name
        if name == "bound-v6-only":
            super().__init__(("127.0.0.1", 0))
            self.sock.close()
            self.sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self.sock.bind(("::", bind[1]))
            self.addr = self.sock.getsockname()[:2]
        else:
            super().__init__(bind)
        self.lock = threading.Lock()
        self.acking: set[tuple[str, int]] = set()
        if name == "always-sending":
            threading.Thread(target=self.babble, daemon=True).start()

    def send(self, pkt: Packet | bytes, to: tuple[str, int]) -> None:
        if self.name == "accepts-mss-0" and isinstance(pkt, Handshake) and pkt.req_type == -1 and pkt.mss < MIN_MSS:
            with self.lock:
                super().send(pkt.encode()[:ACCEPTS_MSS_0_RESPONSE], to)
            print(f"zoo: accepted MSS {pkt.mss}", file=sys.stderr, flush=True)
            if to not in self.acking:  # the response again, to a repeated request: the ACKs run already
                self.acking.add(to)
                threading.Thread(target=self.ack_forever, args=(pkt, to), daemon=True).start()
            return
        with self.lock:
            super().send(pkt, to)

    def babble(self) -> None:
        heard: dict[tuple[str, int], int] = {}
        seen = 0
        while True:
            for _, src, p in self.log[seen:]:
                heard[src] = p.socket_id if isinstance(p, Handshake) else heard.get(src, 0)
                seen += 1
            for addr, dst in list(heard.items()):
                try:
                    with self.lock:
                        super().send(KeepAlive(dst_id=dst), addr)
                except OSError:
                    pass
            time.sleep(0.02)

    def ack_forever(self, resp: Handshake, to: tuple[str, int]) -> None:
        for k in range(1, 1 << 30):
            try:
                with self.lock:
                    ack = Ack(
                        dst_id=resp.dst_id,
                        ack_seq_no=k,
                        ack_no=resp.isn,
                        rtt=10_000,
                        rtt_var=5_000,
                        avail_buffer=8192,
                        arrival_speed=0,
                        link_capacity=0,
                    )
                    super().send(ack, to)
            except OSError:
                return
            time.sleep(0.01)


# ---------------------------------------------------------------------------------------------
# Server: the listener and receiver


class Receiver:
    """The server role: one connection accepted, its data written to OUTPUT in order."""

    def __init__(self, wire: Wire, defect: Defect, output: Path) -> None:
        self.wire, self.defect, self.output = wire, defect, output
        self.my_id = 0x1000 + os.getpid()
        self.cookie = 0x5EED0000 | (os.getpid() & 0xFFFF)
        self.peer: tuple[str, int] | None = None
        self.peer_id = 0
        self.response: Handshake | bytes | None = None
        self.next = 0  # the next sequence number in order (the ACK number)
        self.ahead: dict[int, bytes] = {}
        self.buffer: list[bytes] = []
        self.ack_sub = 0
        self.acks: dict[int, int] = {}  # ACK sequence number → ACK number
        self.acked = -1  # the ACK number the peer confirmed with an ACK2
        self.last_ack = 0.0
        self.last_sent = time.monotonic()
        self.struck = False
        self.out = open(output, "wb")

    def send(self, pkt: Handshake | Ack | Nak | KeepAlive | bytes) -> None:
        assert self.peer
        self.wire.send(pkt, self.peer)
        self.last_sent = time.monotonic()

    def cookie_reply(self, req: Handshake) -> Handshake:
        if self.defect.name == "zeroed-cookie":  # built fresh, not echoed (§6.1 listener rule 3)
            return Handshake(
                isn=req.isn, mss=0, flight_flag_size=0, req_type=1, cookie=self.cookie, peer_ip=req.peer_ip
            )
        return replace(req, cookie=self.cookie, dst_id=req.socket_id)

    def accept(self) -> None:
        deadline = time.monotonic() + IDLE_EXIT
        while time.monotonic() < deadline:
            got = self.wire.recv(deadline - time.monotonic())
            if got is None:
                continue
            h, src = got
            if not isinstance(h, Handshake):
                continue
            if self.defect.name == "other-handshake" and h.req_type in (1, -1):  # no cookie round
                self.peer, self.peer_id, self.next = src, h.socket_id, h.isn
                self.response = self.final_response(h, src)
                self.send(self.response)
                return
            if h.req_type == 1:
                self.wire.send(self.cookie_reply(h), src)
            elif h.req_type == -1 and h.cookie == self.cookie:
                self.peer, self.peer_id, self.next = src, h.socket_id, h.isn
                self.response = self.final_response(h, src)
                self.send(self.response)
                return
        raise SystemExit("zoo: nobody connected")

    def final_response(self, req: Handshake, src: tuple[str, int]) -> Handshake | bytes:
        """The listener's response to ``req`` (§6.1); the first 44 bytes of it where the defect
        is a short one: another handshake's 28-byte body, or 4.x's cut after the socket ID."""
        resp = replace(
            req,
            req_type=-1,
            socket_id=self.my_id,
            dst_id=req.socket_id,
            mss=min(req.mss, 1500),
            peer_ip=peer_ip_field(src[0]),
        )
        if self.defect.name in ("other-handshake", "short-response"):
            return resp.encode()[:SHORT_HANDSHAKE]
        return resp

    def deliver(self, seq: int, payload: bytes) -> None:
        if seqcmp(seq, self.next) < 0 or seq in self.ahead:
            return
        if seqcmp(seq, self.next) > 0:
            lost = [
                incseq(self.next, k) for k in range(seqoff(self.next, seq)) if incseq(self.next, k) not in self.ahead
            ]
            if lost:
                self.send(Nak(dst_id=self.peer_id, words=tuple(encode_loss_list(lost))))
        self.ahead[seq] = payload
        while self.next in self.ahead:
            data = self.ahead.pop(self.next)
            if self.defect.name == "buffered-output":
                self.buffer.append(data)
            else:
                self.out.write(data)
                self.out.flush()
            self.next = incseq(self.next)

    def serve(self) -> None:
        last_heard = time.monotonic()
        while time.monotonic() - last_heard < IDLE_EXIT:
            got = self.wire.recv(0.005)
            now = time.monotonic()
            if got is not None and got[1] == self.peer:
                p, last_heard = got[0], now
                if isinstance(p, DataPacket):
                    if not self.struck:
                        self.struck = True
                        self.defect.strike()
                    self.deliver(p.seq, p.payload)
                elif isinstance(p, Ack2):
                    self.acked = self.acks.get(p.addl, self.acked)
                elif isinstance(p, Handshake) and p.req_type == -1 and self.response:
                    self.send(self.response)  # our response was lost: the client asks again
                elif isinstance(p, Handshake) and self.defect.name == "other-handshake" and self.response:
                    self.send(self.response)  # no cookie round: every request gets the response
                elif isinstance(p, Shutdown):
                    return
            if self.defect.name != "no-ack" and self.next != self.acked and now - self.last_ack >= 0.01 and self.struck:
                self.ack_sub += 1
                self.acks[self.ack_sub] = self.next
                self.send(
                    Ack(
                        dst_id=self.peer_id,
                        ack_seq_no=self.ack_sub,
                        ack_no=self.next,
                        rtt=10_000,
                        rtt_var=5_000,
                        avail_buffer=8192,
                        arrival_speed=5000,
                        link_capacity=50_000,
                    )
                )
                self.last_ack = now
            if now - self.last_sent >= 1.0:
                self.send(KeepAlive(dst_id=self.peer_id))
        raise SystemExit("zoo: the peer went silent")

    def close(self) -> None:
        for data in self.buffer:
            self.out.write(data)
        self.out.close()


def server(defect: Defect) -> int:
    wire = defect.wire((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
    rcv = Receiver(wire, defect, Path(os.environ["OUTPUT"]))
    rcv.accept()
    rcv.serve()
    rcv.close()
    print(f"zoo: connection closed by the peer after {rcv.output.stat().st_size} bytes", file=sys.stderr)
    defect.hang()
    return 0


# ---------------------------------------------------------------------------------------------
# Client: the sender


def other_handshake_client(wire: Wire, server_addr: tuple[str, int]) -> int:
    """Another handshake version: requests with a 28-byte body and no cookie round, every 0.5 s
    for 10 s. A UDT4 listener cannot decode them (§5.1) and rightly stays silent."""
    req = Handshake(
        isn=random.randint(0, MAX_SEQ),
        socket_id=0x2000 + os.getpid(),
        req_type=1,
        peer_ip=peer_ip_field(server_addr[0]),
    )
    raw = req.encode()[:SHORT_HANDSHAKE]
    n = 20
    for _ in range(n):
        wire.send(raw, server_addr)
        got = wire.recv(0.5)
        if got is not None and isinstance(got[0], Handshake):
            print(f"zoo: an answer in a handshake we do not speak: {got[0]}", file=sys.stderr)
            return 1
    print(f"zoo: no answer to {n} handshakes, giving up", file=sys.stderr)
    return 1


def client(defect: Defect) -> int:
    server_addr = (os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"]))
    wire = Wire()
    if defect.name == "other-handshake":
        return other_handshake_client(wire, server_addr)
    sess = connect(wire, server_addr, timeout=10.0)
    size = 1500 if defect.name == "oversize-payload" else PAYLOAD
    data = Path(os.environ["INPUT"]).read_bytes()
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    first = incseq(sess.isn) if defect.name == "wrong-isn" else sess.isn
    t0 = time.monotonic()

    def packet(k: int) -> DataPacket:
        stamp = int((time.monotonic() - t0) * 1e6)
        return DataPacket(seq=incseq(first, k), msg_no=k + 1, timestamp=stamp, dst_id=sess.peer_id, payload=chunks[k])

    acked = 0  # chunks acknowledged
    sent = 0
    struck = False
    progress = exp = time.monotonic()
    while acked < len(chunks):
        while sent < len(chunks) and sent - acked < WINDOW:
            wire.send(packet(sent), server_addr)
            sent += 1
        got = wire.recv(0.01)
        now = time.monotonic()
        if got is not None and got[1] == server_addr:
            p = got[0]
            if isinstance(p, Ack):
                if not struck:
                    struck = True
                    defect.strike()
                if p.kind is not AckKind.LIGHT and defect.name != "no-ack2":
                    wire.send(Ack2(dst_id=sess.peer_id, addl=p.ack_seq_no), server_addr)
                k = seqoff(first, p.ack_no)
                if acked < k <= sent:
                    acked, progress = k, now
            elif isinstance(p, Nak) and defect.name != "no-retransmit":
                try:
                    lost = p.losses()
                except WireError:
                    lost = []
                for s in lost:
                    k = seqoff(first, s)
                    if acked <= k < sent:
                        wire.send(packet(k), server_addr)
        if now - progress >= NO_PROGRESS:
            print(f"zoo: {acked} of {len(chunks)} packets acknowledged, giving up", file=sys.stderr)
            return 1
        if now - max(progress, exp) >= 0.3 and defect.name != "no-retransmit":
            exp = now
            for k in range(acked, sent):  # EXP: everything unacknowledged again (§9.4)
                wire.send(packet(k), server_addr)
    wire.send(Shutdown(dst_id=sess.peer_id), server_addr)
    print(f"zoo: {len(data)} bytes sent and acknowledged", file=sys.stderr)
    defect.hang()
    return 0


def main() -> int:
    defect = Defect(sys.argv[1])
    if os.environ.get("TESTCASE") not in CASES:
        return 127
    try:
        return server(defect) if os.environ["ROLE"] == "server" else client(defect)
    finally:
        defect.go_on()


if __name__ == "__main__":
    sys.exit(main())
