"""Ports on this host: one that is free now, and whether one is bound (UDP) or listening (TCP).

The interop runner, the active tester and the interop tests of ``impl/interop`` pick ports
this way; a UDT server counts as ready once its port shows in ``/proc/net/udp``, a SABUL
sender once its TCP port is listening in ``/proc/net/tcp``.
"""

from __future__ import annotations

import socket


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port free on ``host`` right now (a race is possible but harmless: the run fails loudly)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def udp_port_bound(port: int) -> bool:
    """Whether some socket of this network namespace is bound to UDP ``port`` (IPv4 or IPv6)."""
    needle = f":{port:04X} "
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                if any(needle in line.split("\n")[0][:40] for line in f):
                    return True
        except OSError:
            pass
    return False


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


TCP_LISTEN = "0A"  # st column of /proc/net/tcp


def tcp_port_listening(port: int) -> bool:
    """Whether some socket of this network namespace listens on TCP ``port`` (IPv4 or IPv6)."""
    needle = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)  # header
                for line in f:
                    fields = line.split()
                    if len(fields) > 3 and fields[1].endswith(needle) and fields[3] == TCP_LISTEN:
                        return True
        except OSError:
            pass
    return False
