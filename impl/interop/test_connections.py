"""`recv --connections N`: three senders at once to one listening port, one output file each.

The receiver accepts the three connections on one port, serves them concurrently and writes
connection K (accept order) to DIR/conn-K.bin (docs/cli.md). Accept order is not send order,
so each output file must equal exactly one input, and together they must cover all inputs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Proc, describe, pick_port, run_processes, stack_binary
from udtharness.cli import read_stats, recv_argv, send_argv
from udtharness.netns import Net
from udtharness.testdata import random_file, sha256_file

N = 3
# Distinct sizes (not multiples of the 1456-byte payload) so a mix-up shows as a size mismatch.
SIZES = [300_007, 1_000_003, 2_500_001]
TIMEOUT_S = 30.0

# (senders' stack, receiver's stack)
PAIRS = [
    pytest.param(("libudt", "libudt"), id="libudt_to_libudt"),
    pytest.param(("udt-rs", "libudt"), id="udt_to_libudt"),
    pytest.param(("libudt", "udt-rs"), id="libudt_to_udt"),
]
NETS = [pytest.param("lo", id="lo"), pytest.param("veth", id="veth", marks=pytest.mark.needs_root)]


def run_many(*, senders: str, receiver: str, net: Net, inputs: list[Path], outdir: Path, workdir: Path) -> list[Proc]:
    """Starts `receiver recv --connections N`, then N senders at once; all must exit 0 in time."""
    send_bin, recv_bin = stack_binary(senders), stack_binary(receiver)
    port = pick_port(net)
    listen = f"{net.addr_b}:{port}"
    connections = ["--connections", str(len(inputs))]
    recv = recv_argv(recv_bin, listen, outdir, *connections, stats=workdir / "recv-stats.jsonl")
    rx = Proc("receiver", receiver, net.wrap(net.ns_b, recv), workdir / "recv.stderr")
    txs = [
        Proc(
            f"sender {i + 1}",
            senders,
            net.wrap(net.ns_a, send_argv(send_bin, listen, p)),
            workdir / f"send-{i + 1}.stderr",
        )
        for i, p in enumerate(inputs)
    ]
    procs = [rx, *txs]
    run_processes(procs, listener=rx, timeout=TIMEOUT_S, what="transfers")
    return procs


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("net", NETS, indirect=True)
def test_connections_three_senders_one_port(net: Net, pair: tuple[str, str], tmp_path: Path) -> None:
    senders, receiver = pair
    inputs = [random_file(tmp_path / f"in-{i + 1}", n) for i, n in enumerate(SIZES)]
    outdir = tmp_path / "out" / "conns"  # does not exist yet: recv creates it
    procs = run_many(senders=senders, receiver=receiver, net=net, inputs=inputs, outdir=outdir, workdir=tmp_path)

    names = sorted(p.name for p in outdir.iterdir()) if outdir.is_dir() else []
    want_names = [f"conn-{k}.bin" for k in range(1, N + 1)]
    if names != want_names:
        pytest.fail(describe(procs, f"output files {names}, expected {want_names}"), pytrace=False)
    want = sorted((p.stat().st_size, sha256_file(p)) for p in inputs)
    got = sorted(((outdir / n).stat().st_size, sha256_file(outdir / n)) for n in names)
    if got != want:
        pytest.fail(describe(procs, f"outputs (size, sha256) {got} != inputs {want}"), pytrace=False)

    # --stats: one summary per connection, tagged "conn": K, its bytes = conn-K.bin's size.
    lines = read_stats(tmp_path / "recv-stats.jsonl")
    summaries = {s.get("conn"): s for s in lines if s.get("summary")}
    for k in range(1, N + 1):
        s = summaries.get(k)
        size = (outdir / f"conn-{k}.bin").stat().st_size
        if not s or s.get("bytes") != size or s.get("stack") != receiver or s.get("role") != "recv":
            pytest.fail(describe(procs, f"stats summary for conn {k}: {s} (want bytes={size})"), pytrace=False)


@pytest.mark.parametrize("stack", ["udt-rs", "libudt"])
@pytest.mark.parametrize(
    "extra", [["--dgram"], ["--rendezvous", "127.0.0.1:9"], []], ids=["dgram", "rendezvous", "stdout"]
)
def test_connections_usage_errors(stack: str, extra: list[str], tmp_path: Path) -> None:
    out = "-" if not extra else str(tmp_path / "never")
    argv = [str(stack_binary(stack)), "recv", "--listen", "127.0.0.1:0", "--connections", "2", "--output", out, *extra]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, f"{argv}: exit {r.returncode}, stderr {r.stderr}"
    assert "--connections" in r.stderr, r.stderr
