"""Network namespaces for the interop tests and the comparison benchmark: where a sender (a)
and a receiver (b) run, and two namespaces joined by a veth pair."""

from __future__ import annotations

import subprocess
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
