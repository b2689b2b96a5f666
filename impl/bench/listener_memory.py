#!/usr/bin/env python3
"""A listener's resident memory under completed handshakes: our `udt recv` beside libudt 4.11's,
measured back to back in one run (issue 14: a flood of clients completing the cookie round).

For each UDT stack of the registry with a `udt-cli` [bulk] table and each count of peers (1,
100, 2000 by default), one `recv --listen` on the loopback (a single-connection receiver: its
backlog is 1) and that many clients from the suite's Python UDT4 peer (`udtconf.udt.peer.connect`)
completing the handshake one after the other, each from its own UDP port. Prints how many were
accepted and rejected (request type 1002), the receiver's VmRSS before and after, and the
ratio ours / libudt of the growth. Nothing is asserted: the conformance probe
`server/completed-handshake-flood` is the test.

    .venv/bin/python impl/bench/listener_memory.py [--peers 1,100,2000]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The suite's Python UDT4 peer (udtconf.udt.peer) is the clients: a bench may drive the suite's
# peers as it drives any stack, and takes nothing else from the suite.
sys.path[:0] = [str(REPO / "harness"), str(REPO / "conformance")]
from udtconf.udt.peer import Wire, connect  # noqa: E402
from udtharness.stacks import StackError, registry  # noqa: E402

OURS = "udt-rs"


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flood(binary: Path, peers: int) -> tuple[int, int, int, float, float]:
    """(accepted, rejected, unanswered, RSS before, RSS after) for ``peers`` clients."""
    port = free_port()
    recv = subprocess.Popen(
        [str(binary), "recv", "--listen", f"127.0.0.1:{port}", "--output", "/dev/null"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        before = rss_mb(recv.pid)
        accepted = rejected = unanswered = 0
        wires: list[Wire] = []
        for _ in range(peers):
            wire = Wire()
            wires.append(wire)
            try:
                connect(wire, ("127.0.0.1", port), timeout=1.0)
                accepted += 1
            except ConnectionError:
                rejected += 1
            except TimeoutError:
                unanswered += 1
            if len(wires) >= 200:  # keep the open descriptors few; the peers stay silent
                for w in wires:
                    w.close()
                wires.clear()
        for w in wires:
            w.close()
        time.sleep(1.0)
        return accepted, rejected, unanswered, before, rss_mb(recv.pid)
    finally:
        recv.kill()
        recv.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="1,100,2000", help="comma-separated counts of handshaking peers")
    args = ap.parse_args()
    counts = [int(n) for n in args.peers.split(",")]
    stacks = {}
    for name, s in registry().items():
        if s.bulk is not None and s.bulk.contract == "udt-cli":
            try:
                stacks[name] = s.bulk_binary()
            except StackError as e:
                print(f"{name}: skipped ({e})")
    print(f"{'stack':<8} {'peers':>6} {'accepted':>9} {'rejected':>9} {'no answer':>10} {'RSS MB':>15}")
    growth: dict[tuple[str, int], float] = {}
    for n in counts:
        for name, binary in stacks.items():
            acc, rej, none, before, after = flood(binary, n)
            growth[(name, n)] = after - before
            print(f"{name:<8} {n:>6} {acc:>9} {rej:>9} {none:>10} {before:>6.1f} -> {after:>6.1f}")
    for n in counts:
        theirs = [g for (s, k), g in growth.items() if k == n and s != OURS]
        if (OURS, n) in growth and theirs:
            print(f"{n} peers: RSS growth {OURS} {growth[(OURS, n)]:+.1f} MB, libudt {theirs[0]:+.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
