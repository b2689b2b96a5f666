"""Ports on this host: one that is free now, and whether one is bound (UDP) or listening (TCP).

The interop runner, the active tester and the interop tests of ``impl/interop`` pick ports
this way; a UDT server counts as ready once its port shows in ``/proc/net/udp`` or
``/proc/net/udp6`` (bound to any address: ``0.0.0.0``, ``127.0.0.1``, ``[::]`` dual-stack, an
IPv4-mapped one), a SABUL sender once its TCP port is listening in ``/proc/net/tcp`` or
``/proc/net/tcp6``.
"""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv4Address, IPv6Address, ip_address


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port free on ``host`` right now (a race is possible but harmless: the run fails loudly)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def local_address(column: str) -> tuple[IPv4Address | IPv6Address, int]:
    """The ``local_address`` column of a ``/proc/net/{udp,tcp}{,6}`` line as (address, port): the
    address in hex as 32-bit words in host byte order (8 digits for IPv4, 32 for IPv6), a colon,
    the port in hex. ``00000000000000000000000000000000:1F90`` is ``(::, 8080)``."""
    addr, port = column.rsplit(":", 1)
    raw = b"".join(struct.pack("=I", int(addr[i : i + 8], 16)) for i in range(0, len(addr), 8))
    return ip_address(raw), int(port, 16)


def _local_addresses(tables: tuple[str, ...]) -> list[tuple[IPv4Address | IPv6Address, int, str]]:
    """(address, port, state) of each socket in ``tables`` (a table missing is left out)."""
    found: list[tuple[IPv4Address | IPv6Address, int, str]] = []
    for table in tables:
        try:
            with open(table) as f:
                next(f, None)  # header
                for line in f:
                    fields = line.split()
                    if len(fields) > 3:
                        found.append((*local_address(fields[1]), fields[3]))
        except OSError:
            pass
    return found


def udp_bound() -> list[tuple[IPv4Address | IPv6Address, int]]:
    """The local address and port of every UDP socket of this network namespace, IPv4 and IPv6."""
    return [(a, p) for a, p, _ in _local_addresses(("/proc/net/udp", "/proc/net/udp6"))]


def udp_port_bound(port: int) -> bool:
    """Whether some socket of this network namespace is bound to UDP ``port`` (IPv4 or IPv6)."""
    return any(p == port for _, p in udp_bound())


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


TCP_LISTEN = "0A"  # st column of /proc/net/tcp


def tcp_port_listening(port: int) -> bool:
    """Whether some socket of this network namespace listens on TCP ``port`` (IPv4 or IPv6)."""
    found = _local_addresses(("/proc/net/tcp", "/proc/net/tcp6"))
    return any(p == port and st == TCP_LISTEN for _, p, st in found)
