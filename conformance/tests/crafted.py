"""Hand-made captures for the tests of the wire rules and the diagnosis: a connection built
from ``(sender, time, datagram)`` triples, and the four-packet listener handshake (UDT4.md §6.1)."""

from __future__ import annotations

from typing import TypeVar

from udtconf.udt.trace import Connection, Record
from udtconf.udt.wire import Handshake, Packet, WireError, decode, peer_ip_field

CID, SID, ISN = 0x11, 0x22, 1000
COOKIE = 77

P = TypeVar("P", bound=Packet)


def decode_as(kind: type[P], raw: bytes) -> P:
    """``raw`` decoded, asserting that it is a ``kind``."""
    p = decode(raw)
    assert isinstance(p, kind), f"a {type(p).__name__}, not a {kind.__name__}"
    return p


def conn_of(*pkts: tuple[str, float, bytes], t0: float = 0.0) -> Connection:
    """A connection whose records are ``pkts`` in order, at ``t0`` + each one's time; a datagram
    the codec rejects becomes a record with its error, as in a real capture."""
    c = Connection(server=("127.0.0.1", 9000), client=("127.0.0.1", 5000))
    for i, (sender, t, raw) in enumerate(pkts, start=1):
        try:
            p: Packet | None = decode(raw)
            e: WireError | None = None
        except WireError as err:  # what udtconf.udt.trace keeps; any other error is the test's
            p, e = None, err
        c.records.append(Record(i, t0 + t, sender, raw, p, e))
    return c


def handshake(
    isn: int = ISN,
    cid: int = CID,
    sid: int = SID,
    client_cookie: int = COOKIE,
    response_isn: int | None = None,
    ffs: int = 8192,
) -> list[tuple[str, float, bytes]]:
    """Request, cookie reply, request with the cookie, response (§6.1), 1 ms apart. The listener's
    cookie reply echoes the client's socket ID; its response carries ``sid``."""
    ip = peer_ip_field("127.0.0.1")
    resp_isn = isn if response_isn is None else response_isn
    return [
        ("client", 0.000, Handshake(isn=isn, socket_id=cid, req_type=1, peer_ip=ip).encode()),
        (
            "server",
            0.001,
            Handshake(isn=isn, socket_id=cid, req_type=1, cookie=COOKIE, dst_id=cid, peer_ip=ip).encode(),
        ),
        ("client", 0.002, Handshake(isn=isn, socket_id=cid, req_type=-1, cookie=client_cookie, peer_ip=ip).encode()),
        (
            "server",
            0.003,
            Handshake(
                isn=resp_isn, socket_id=sid, req_type=-1, cookie=COOKIE, dst_id=cid, peer_ip=ip, flight_flag_size=ffs
            ).encode(),
        ),
    ]
