"""Decoded captures: UDP datagrams turned into per-connection UDT packet records.

A :class:`Connection` is every datagram between two UDP endpoints, in capture order, each
decoded by :mod:`udtconf.udt.wire` (or carrying the :class:`~udtconf.udt.wire.WireError` it raised).
The endpoints are labelled ``server`` (the listener / rendezvous receiver, the data sink in
this suite) and ``client`` (the data source).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from udtharness.capture import SENTINEL
from udtharness.pcap import UdpDatagram

from .wire import Ack, DataPacket, Handshake, Packet, WireError, decode

Endpoint = tuple[str, int]
P = TypeVar("P")


@dataclass(frozen=True)
class Record:
    frame: int  # 1-based frame number of the datagram in the capture file
    time: float
    sender: str  # "client" | "server"
    raw: bytes
    packet: Packet | None
    error: WireError | None

    def where(self) -> str:
        receiver = "server" if self.sender == "client" else "client"
        return f"frame {self.frame} (t={self.time:.6f}, {self.sender}→{receiver}, {len(self.raw)} B)"


@dataclass
class Connection:
    server: Endpoint
    client: Endpoint
    records: list[Record] = field(default_factory=list)

    def by(self, sender: str) -> list[Record]:
        return [r for r in self.records if r.sender == sender]

    def of_type(self, cls: type[P], sender: str | None = None) -> Iterator[tuple[Record, P]]:
        for r in self.records:
            if isinstance(r.packet, cls) and (sender is None or r.sender == sender):
                yield r, r.packet

    def handshakes(self, sender: str | None = None) -> list[tuple[Record, Handshake]]:
        return list(self.of_type(Handshake, sender))

    def data(self, sender: str = "client") -> list[tuple[Record, DataPacket]]:
        return list(self.of_type(DataPacket, sender))

    def acks(self, sender: str = "server") -> list[tuple[Record, Ack]]:
        return list(self.of_type(Ack, sender))

    def socket_id(self, side: str) -> int | None:
        """The socket ID ``side`` announced for the connection: from its last handshake that is not
        a first-round request/cookie reply (a listener's cookie reply echoes the *client's* ID and
        4.11 may send one after its final response when the client repeats its first request)."""
        hs = [h for _, h in self.handshakes(side)]
        settled = [h.socket_id for h in hs if h.req_type != 1]
        ids = settled or [h.socket_id for h in hs]
        return ids[-1] if ids else None

    @property
    def start(self) -> float:
        return self.records[0].time if self.records else 0.0


def connections(datagrams: list[UdpDatagram], server: Endpoint) -> list[Connection]:
    """Split a capture into one :class:`Connection` per remote endpoint talking to ``server``."""
    out: dict[Endpoint, Connection] = {}
    for frame, dg in enumerate(datagrams, start=1):
        if dg.payload == SENTINEL:
            continue  # the capture's own start marker
        if _same(dg.dst, server):
            peer, sender = dg.src, "client"
        elif _same(dg.src, server):
            peer, sender = dg.dst, "server"
        else:
            continue
        conn = out.setdefault(peer, Connection(server=server, client=peer))
        try:
            pkt: Packet | None = decode(dg.payload)
            err = None
        except WireError as e:
            pkt, err = None, e
        conn.records.append(Record(frame, dg.time, sender, dg.payload, pkt, err))
    return list(out.values())


def _same(a: Endpoint, b: Endpoint) -> bool:
    return a[1] == b[1] and (a[0] == b[0] or b[0] in ("0.0.0.0", "::"))
