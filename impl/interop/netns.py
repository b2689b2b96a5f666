"""Network namespaces for the interop tests and the comparison benchmark: where a sender (a)
and a receiver (b) run, and two namespaces joined by a veth pair."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Net:
    """Where the sender (a) and the receiver (b) run and which addresses they use."""

    name: str
    addr_a: str
    addr_b: str
    ns_a: str | None = None
    ns_b: str | None = None

    def wrap(self, ns: str | None, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv] if ns else argv


LOOPBACK = Net("lo", "127.0.0.1", "127.0.0.1")


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def create_veth_namespaces(ns_a: str, ns_b: str, addr_a: str, addr_b: str, prefix: int = 24) -> None:
    """Two namespaces joined by a veth pair; deletes whatever it made if a step fails."""
    made: list[str] = []
    try:
        for ns in (ns_a, ns_b):
            _run("ip", "netns", "add", ns)
            made.append(ns)
        # Created directly inside the namespaces: no name is ever used in the root namespace.
        _run("ip", "link", "add", "veth0", "netns", ns_a, "type", "veth", "peer", "name", "veth0", "netns", ns_b)
        for ns, addr in ((ns_a, addr_a), (ns_b, addr_b)):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/{prefix}", "dev", "veth0")
            _run("ip", "-n", ns, "link", "set", "veth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
    except BaseException:
        delete_namespaces(made)
        raise


def delete_namespaces(names: list[str]) -> None:
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextmanager
def veth_namespaces(ns_prefix: str, addr_a: str, addr_b: str) -> Iterator[Net]:
    """Namespaces ``<ns_prefix><pid>-a`` and ``-b`` joined by a veth pair, deleted on exit even
    after a failure. The pid in the names keeps parallel runs apart and lets
    :func:`sweep_stale_namespaces` find those of runs that were killed."""
    pid = os.getpid()
    ns_a, ns_b = f"{ns_prefix}{pid}-a", f"{ns_prefix}{pid}-b"
    create_veth_namespaces(ns_a, ns_b, addr_a, addr_b)
    try:
        yield Net("veth", addr_a, addr_b, ns_a, ns_b)
    finally:
        delete_namespaces([ns_a, ns_b])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_namespaces(ns_prefix: str) -> None:
    """Deletes ``<ns_prefix><pid>-a|b`` namespaces left behind by runs that were killed."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for ns in (line.split()[0] for line in out.splitlines() if line.strip()):
        m = re.fullmatch(rf"{re.escape(ns_prefix)}(\d+)-[ab]", ns)
        if m and not _pid_alive(int(m.group(1))):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
