"""Readiness: a port counts as bound (UDP) or listening (TCP) whatever the address, IPv4 or IPv6,
its socket is bound to: read from the local address column of /proc/net/{udp,tcp}{,6}."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address, IPv6Address

import pytest
from udtharness.ports import free_udp_port, local_address, tcp_port_listening, udp_bound, udp_port_bound

needs_ipv6 = pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 in this kernel")


@contextmanager
def bound(family: socket.AddressFamily, kind: socket.SocketKind, host: str) -> Iterator[int]:
    with socket.socket(family, kind) as s:
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # dual-stack, as Java's default
        s.bind((host, 0))
        if kind == socket.SOCK_STREAM:
            s.listen()
        yield s.getsockname()[1]


@needs_ipv6
def test_a_udp_socket_bound_to_the_ipv6_wildcard_is_bound() -> None:
    # issue 41: a stack bound to [::] was missed: only the first 40 characters of each
    # /proc/net/udp6 line were read, which cut its port off
    with bound(socket.AF_INET6, socket.SOCK_DGRAM, "::") as port:
        assert udp_port_bound(port)
        assert (IPv6Address("::"), port) in udp_bound()


@needs_ipv6
def test_an_ipv4_mapped_address_and_an_ipv4_one_are_read_as_they_are_bound() -> None:
    with bound(socket.AF_INET6, socket.SOCK_DGRAM, "::ffff:127.0.0.1") as port:
        assert udp_port_bound(port) and (IPv6Address("::ffff:127.0.0.1"), port) in udp_bound()
    with bound(socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1") as port:
        assert udp_port_bound(port) and (IPv4Address("127.0.0.1"), port) in udp_bound()


def test_a_port_nobody_bound_is_not_bound() -> None:
    assert not udp_port_bound(free_udp_port())


@needs_ipv6
def test_a_tcp_listener_on_the_ipv6_wildcard_is_listening() -> None:
    with bound(socket.AF_INET6, socket.SOCK_STREAM, "::") as port:
        assert tcp_port_listening(port)


def test_the_local_address_column_is_words_in_host_byte_order_then_the_port() -> None:
    assert local_address("00000000000000000000000000000000:1F90") == (IPv6Address("::"), 8080)
    word = int.from_bytes(bytes([127, 0, 0, 1]), sys.byteorder)
    assert local_address(f"{word:08X}:0050") == (IPv4Address("127.0.0.1"), 80)
