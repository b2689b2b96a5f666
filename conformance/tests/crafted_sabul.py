"""Hand-made SABUL captures: a session written as a real pcap (TCP segments of both directions of
the control connection, UDP DATA) from a list of events, then read back through
udtconf.sabul.trace — so the rule tests also exercise the reassembly."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from udtconf.sabul import trace
from udtconf.sabul.wire import Ack, Data, Err, OptionBlock, Syn
from udtharness.pcap import TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, PcapWriter, read_frames

SENDER = ("127.0.0.1", 7000)
RECEIVER = ("127.0.0.1", 40000)
SENDER_UDP = ("127.0.0.1", 7001)
DATA_PORT = 41000
BLOCK = OptionBlock(DATA_PORT, 7000)


@dataclass
class Capture:
    """Events in time order; ``session()`` writes them as a pcap and decodes it."""

    events: list[tuple[float, str, bytes]] = field(default_factory=list)

    def add(self, t: float, kind: str, raw: bytes = b"") -> Capture:
        self.events.append((t, kind, raw))
        return self

    def without(self, *kinds: str) -> Capture:
        """A copy without the events of these kinds."""
        return Capture(events=[e for e in self.events if e[1] not in kinds])

    def session(self, tmp: Path, judges: frozenset[str] = trace.BOTH) -> trace.SabulSession:
        path = tmp / "crafted.pcap"
        seq = {"up": 1000, "down": 5000}
        with PcapWriter(path) as w:
            w.write_tcp(0.0, RECEIVER, SENDER, seq["up"] - 1, TCP_SYN)
            w.write_tcp(0.0, SENDER, RECEIVER, seq["down"] - 1, TCP_SYN | TCP_ACK)
            for t, kind, raw in sorted(self.events, key=lambda e: e[0]):
                if kind == "data":
                    w.write(t, SENDER_UDP, (RECEIVER[0], DATA_PORT), raw)
                    continue
                way = "up" if kind.startswith("r-") else "down"
                src, dst = (RECEIVER, SENDER) if way == "up" else (SENDER, RECEIVER)
                flags = {"fin": TCP_FIN | TCP_ACK, "rst": TCP_RST}.get(kind[2:], TCP_PSH | TCP_ACK)
                w.write_tcp(t, src, dst, seq[way], flags, raw)
                seq[way] += len(raw) + (1 if flags & TCP_FIN else 0)
        (s,) = trace.sessions(read_frames(path), SENDER[1], judges)
        return s


def good(packets: int = 10, lost: tuple[int, ...] = ()) -> Capture:
    """A correct session: block, echo, ``packets`` DATA 1 ms apart — those in ``lost`` missing
    where they were due (as a receiver's leg behind a lossy relay shows them), reported by one ERR
    right after the packet that reveals the gap and resent 0.4 ms later — a SYN every 10 ms, the
    final ACK, the sender's FIN, then the receiver's."""
    c = Capture().add(0.001, "r-ctrl", BLOCK.encode()).add(0.002, "s-ctrl", BLOCK.encode())
    t = 0.003
    pending: list[int] = []
    for seq in range(packets):
        if seq in lost:
            pending.append(seq)
        else:
            c.add(t, "data", Data(seq, b"x" * 100).encode())
            if pending:
                c.add(t + 0.0001, "r-ctrl", Err.from_losses(pending).encode())
                for n in pending:
                    c.add(t + 0.0004, "data", Data(n, b"x" * 100).encode())
                pending = []
        t += 0.001
    for k in range(1, int((t + 0.01) / 0.01) + 1):
        c.add(0.002 + 0.01 * k, "r-ctrl", Syn(1).encode())
    end = t + 0.012
    c.add(end, "r-ctrl", Ack(packets).encode())
    c.add(end + 0.001, "s-fin").add(end + 0.002, "r-fin")
    return c
