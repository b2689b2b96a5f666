"""SABUL interop: our Rust `sabul` against the suite's Python SABUL peer (written from the
spec, not from the Rust code), each way, and against itself.

SABUL's roles are UDT's the other way round (docs/cli.md, `sabul`): the sender listens on TCP
in namespace a, the receiver connects from namespace b and the data comes back over UDP. Each
case is one file transfer checked byte for byte, with both stats summaries; over the loopback,
across a veth pair, and through `udt-linkem` with loss on the data path and on the control
path's packets (SABUL.md §5–§6: ERR, its k·RTT re-reports and EXP recover every loss).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SABUL_SIZES, Proc, TransferResult, check_transfer, pick_port, run_processes, stack_binary
from udtharness import netns
from udtharness.cli import read_stats, sabul_recv_argv, sabul_send_argv
from udtharness.netns import Net, linkem_namespaces
from udtharness.testdata import random_file

# (sender, receiver)
PAIRS = [
    pytest.param(("sabul", "sabul-py"), id="sabul_to_py"),
    pytest.param(("sabul-py", "sabul"), id="py_to_sabul"),
    pytest.param(("sabul", "sabul"), id="sabul_to_sabul"),
]
NETS = [pytest.param("lo", id="lo"), pytest.param("veth", id="veth", marks=pytest.mark.needs_root)]
GIB = 1 << 30


def sabul_cmd(stack: str) -> list[str]:
    """The `sabul` contract's command of either stack."""
    return [str(stack_binary(stack))] if stack == "sabul" else [sys.executable, "-m", "udtconf.sabul"]


def sabul_transfer(
    *, sender: str, receiver: str, net: Net, input_path: Path, output_path: Path, workdir: Path, timeout: float = 30
) -> TransferResult:
    """The sender listens in net.ns_a, the receiver connects from net.ns_b; both must exit 0."""
    addr = f"{net.addr_a}:{pick_port(net)}"
    send_stats, recv_stats = workdir / "send-stats.jsonl", workdir / "recv-stats.jsonl"
    tx = Proc(
        "sender",
        sender,
        net.wrap(net.ns_a, sabul_send_argv(sabul_cmd(sender), addr, input_path, stats=send_stats)),
        workdir / "send.stderr",
    )
    rx = Proc(
        "receiver",
        receiver,
        net.wrap(net.ns_b, sabul_recv_argv(sabul_cmd(receiver), addr, output_path, stats=recv_stats)),
        workdir / "recv.stderr",
    )
    seconds = run_processes([tx, rx], listener=tx, timeout=timeout)
    return TransferResult(tx, rx, seconds, read_stats(send_stats), read_stats(recv_stats))


@pytest.mark.parametrize("size", SABUL_SIZES)
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("net", NETS, indirect=True)
def test_sabul_transfer(
    net: Net, pair: tuple[str, str], size: int, small_files: dict[int, Path], tmp_path: Path
) -> None:
    sender, receiver = pair
    src, dst = small_files[size], tmp_path / "out"
    result = sabul_transfer(
        sender=sender, receiver=receiver, net=net, input_path=src, output_path=dst, workdir=tmp_path
    )
    check_transfer(result, src, dst, size)


@pytest.mark.slow
@pytest.mark.parametrize("net", NETS, indirect=True)
def test_sabul_one_gib(net: Net, tmp_path: Path) -> None:
    gib = random_file(tmp_path / "in-1GiB", GIB)
    dst = tmp_path / "out"
    try:
        result = sabul_transfer(
            sender="sabul", receiver="sabul", net=net, input_path=gib, output_path=dst, workdir=tmp_path, timeout=120
        )
        check_transfer(result, gib, dst, GIB)
        s = result.summary("recv")
        print(f"{net.name} sabul->sabul: 1 GiB in {s['seconds']:.2f} s, {s['mbps']:.0f} Mb/s")
    finally:
        gib.unlink(missing_ok=True)
        dst.unlink(missing_ok=True)


# Impairments on both directions of a path with a little delay: random loss, and reordering
# (frames held back 1 ms: a gap the receiver reports at once, then the late packet) with
# duplication (copies it must count and drop). The control connection is TCP: what it loses
# costs it retransmissions, not frames.
IMPAIRMENTS = [
    pytest.param("delay=2ms,rate=200mbit,loss=1%,seed=3", id="loss1"),
    pytest.param("delay=2ms,rate=200mbit,loss=5%,seed=5", id="loss5"),
    pytest.param("delay=2ms,rate=200mbit,reorder=2%,reorder_delay=1ms,duplicate=2%,loss=1%,seed=7", id="reorder-dup"),
]


# Apart from the session's veth pair (NS_PREFIX), which lives while these come and go.
LINKEM_PREFIX = "udtl-"


@pytest.fixture
def impaired(request: pytest.FixtureRequest) -> Iterator[Net]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces")
    netns.cleanup(LINKEM_PREFIX, live=False)
    spec = request.param
    with linkem_namespaces(LINKEM_PREFIX, "10.232.0.1", "10.232.0.2", spec, spec) as net:
        yield net


@pytest.mark.needs_root
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("impaired", IMPAIRMENTS, indirect=True)
def test_sabul_recovers_every_loss_through_linkem(
    impaired: Net, pair: tuple[str, str], file_8mb: Path, tmp_path: Path
) -> None:
    sender, receiver = pair
    dst = tmp_path / "out"
    result = sabul_transfer(
        sender=sender,
        receiver=receiver,
        net=impaired,
        input_path=file_8mb,
        output_path=dst,
        workdir=tmp_path,
        timeout=90,
    )
    check_transfer(result, file_8mb, dst, file_8mb.stat().st_size)
    recv = result.summary("recv")
    assert recv["losses"] > 0 and recv["naks_sent"] > 0, f"the path lost nothing? {recv}"
