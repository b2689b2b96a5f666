"""FRTP on a circuit: our Rust `frtp` against the suite's Python FRTP peer each way and against
itself, each file checked byte for byte, with its data on one path and its control on another
(FRTP.md §1).

The sender listens on its control address in namespace a; the receiver connects from b over the
control path and takes DATA on its circuit address (`--data-bind`). The circuit is `udt-linkem`
(rate, delay, loss, reordering, duplication), the control path a plain veth pair beside it
(`netns.linkem_namespaces(control=...)`); on the loopback the data goes to 127.0.0.2 and the
control to 127.0.0.1. Beside byte-exact transfers of 0 B … 1 GiB: a rate at or below the
circuit's loses nothing, one above it loses and recovers, and either path cut mid-transfer ends
both sides with an error that names it (docs/cli.md, `frtp`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    SABUL_SIZES,
    Proc,
    TransferResult,
    check_transfer,
    describe,
    kill_processes,
    pick_port,
    run_processes,
    stack_binary,
    start_processes,
    wait_processes,
)
from udtharness import netns
from udtharness.cli import read_stats, sabul_send_argv
from udtharness.netns import Net, linkem_namespaces
from udtharness.testdata import random_file

# (sender, receiver)
PAIRS = [
    pytest.param(("frtp", "frtp-py"), id="frtp_to_py"),
    pytest.param(("frtp-py", "frtp"), id="py_to_frtp"),
    pytest.param(("frtp", "frtp"), id="frtp_to_frtp"),
]
GIB = 1 << 30
LOOPBACK = Net("lo", "127.0.0.1", "127.0.0.2", ctrl_a="127.0.0.1", ctrl_b="127.0.0.1")
# Apart from the other interop tests' namespaces, which may live while these come and go.
PREFIX = "udtf-"
DATA = ("10.236.0.1", "10.236.0.2")
CONTROL = ("10.237.0.1", "10.237.0.2")
# The emulated circuit: 100 Mb/s with 2 ms each way and a queue of 1000 frames (120 ms).
CIRCUIT = "delay=2ms,rate=100mbit,queue=1000p"
CIRCUIT_MBIT = 100


def frtp_cmd(stack: str) -> list[str]:
    """The `frtp` contract's command of either stack: our binary, or the suite's Python FRTP
    peer (written from the spec, not from the Rust code)."""
    return [str(stack_binary(stack))] if stack == "frtp" else [sys.executable, "-m", "udtconf.frtp"]


def frtp_procs(
    *,
    sender: str,
    receiver: str,
    net: Net,
    rate: float,
    input_path: Path,
    output_path: Path,
    workdir: Path,
    extra: tuple[str, ...] = (),
) -> tuple[Proc, Proc]:
    """The sender listening on net.ctrl_a in net.ns_a; the receiver in net.ns_b connecting over
    the control path and binding its data socket on net.addr_b; ``extra`` options on both."""
    ctrl = f"{net.ctrl_a}:{pick_port(net)}"
    send = sabul_send_argv(frtp_cmd(sender), ctrl, input_path, *extra, stats=workdir / "send-stats.jsonl")
    tx = Proc("sender", sender, net.wrap(net.ns_a, send), workdir / "send.stderr")
    recv = [
        *frtp_cmd(receiver),
        "recv",
        "--connect",
        ctrl,
        "--data-bind",
        f"{net.addr_b}:0",
        "--rate",
        f"{rate:g}",
        "--output",
        str(output_path),
        "--stats",
        str(workdir / "recv-stats.jsonl"),
        *extra,
    ]
    rx = Proc("receiver", receiver, net.wrap(net.ns_b, recv), workdir / "recv.stderr")
    return tx, rx


def frtp_transfer(
    *,
    sender: str,
    receiver: str,
    net: Net,
    rate: float,
    input_path: Path,
    output_path: Path,
    workdir: Path,
    timeout: float = 30,
    extra: tuple[str, ...] = (),
) -> TransferResult:
    """One transfer; both sides must exit 0."""
    tx, rx = frtp_procs(
        sender=sender,
        receiver=receiver,
        net=net,
        rate=rate,
        input_path=input_path,
        output_path=output_path,
        workdir=workdir,
        extra=extra,
    )
    seconds = run_processes([tx, rx], listener=tx, timeout=timeout)
    return TransferResult(
        tx, rx, seconds, read_stats(workdir / "send-stats.jsonl"), read_stats(workdir / "recv-stats.jsonl")
    )


@pytest.fixture
def circuit(request: pytest.FixtureRequest) -> Iterator[Net]:
    """The emulated circuit (``request.param``: its link spec, both ways) with the control
    path beside it."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces")
    netns.cleanup(PREFIX, live=False)
    spec = getattr(request, "param", CIRCUIT)
    with linkem_namespaces(PREFIX, *DATA, spec, spec, control=CONTROL) as net:
        yield net


@pytest.fixture
def frtp_net(request: pytest.FixtureRequest) -> Net:
    """Indirect parametrisation: 'lo' or 'circuit'."""
    return LOOPBACK if request.param == "lo" else request.getfixturevalue("circuit")


NETS = [pytest.param("lo", id="lo"), pytest.param("circuit", id="circuit", marks=pytest.mark.needs_root)]


@pytest.mark.parametrize("size", SABUL_SIZES)
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("frtp_net", NETS, indirect=True)
def test_frtp_transfer_is_byte_exact_with_data_and_control_apart(
    frtp_net: Net, pair: tuple[str, str], size: int, small_files: dict[int, Path], tmp_path: Path
) -> None:
    sender, receiver = pair
    src, dst = small_files[size], tmp_path / "out"
    rate = 400 if frtp_net.ns_a is None else CIRCUIT_MBIT * 0.9
    result = frtp_transfer(
        sender=sender, receiver=receiver, net=frtp_net, rate=rate, input_path=src, output_path=dst, workdir=tmp_path
    )
    check_transfer(result, src, dst, size)
    # Our side says where DATA went: the receiver's circuit address, not the control one.
    if receiver == "frtp":
        assert f"data on {frtp_net.addr_b}:" in result.receiver.stderr(), result.receiver.stderr()
    if sender == "frtp":
        assert f"sending DATA to {frtp_net.addr_b}:" in result.sender.stderr(), result.sender.stderr()


@pytest.mark.slow
def test_frtp_one_gib(tmp_path: Path) -> None:
    gib = random_file(tmp_path / "in-1GiB", GIB)
    dst = tmp_path / "out"
    try:
        result = frtp_transfer(
            sender="frtp",
            receiver="frtp",
            net=LOOPBACK,
            rate=2000,
            input_path=gib,
            output_path=dst,
            workdir=tmp_path,
            timeout=120,
        )
        check_transfer(result, gib, dst, GIB)
        s = result.summary("recv")
        print(f"lo frtp->frtp at 2000 Mb/s: 1 GiB in {s['seconds']:.2f} s, {s['mbps']:.0f} Mb/s, {s['losses']} lost")
    finally:
        gib.unlink(missing_ok=True)
        dst.unlink(missing_ok=True)


@pytest.mark.needs_root
@pytest.mark.parametrize("pair", PAIRS)
def test_frtp_below_the_circuit_rate_loses_nothing(
    circuit: Net, pair: tuple[str, str], file_8mb: Path, tmp_path: Path
) -> None:
    """A fixed rate under the circuit's never fills its queue: no loss, no ERR (FRTP.md §1). The
    data sockets get 4 MB buffers, past which the FRTP paper's Fig. 7 saw no gain: the default
    256 KB holds 23 ms at 90 Mb/s, and a receiver descheduled longer on a busy host would lose
    to its own socket, not to the circuit. (The namespaces' static neighbour entries keep ARP
    from holding and reordering the first packets: `netns.linkem_namespaces`.)"""
    sender, receiver = pair
    dst = tmp_path / "out"
    result = frtp_transfer(
        sender=sender,
        receiver=receiver,
        net=circuit,
        rate=CIRCUIT_MBIT * 0.9,
        input_path=file_8mb,
        output_path=dst,
        workdir=tmp_path,
        extra=("--udp-buffer", str(4 << 20)),
    )
    check_transfer(result, file_8mb, dst, file_8mb.stat().st_size)
    recv = result.summary("recv")
    assert recv["losses"] == 0 and recv["naks_sent"] == 0, f"an idle circuit below its rate lost packets: {recv}"


# The circuit impaired both ways (the control path beside it is not): random loss, reordering
# (frames held back 1 ms) with duplication, and a rate above the circuit's, whose excess the
# circuit's queue drops.
IMPAIRMENTS = [
    pytest.param(f"{CIRCUIT},loss=1%,seed=3", 90, id="loss1"),
    pytest.param(f"{CIRCUIT},loss=5%,seed=5", 90, id="loss5"),
    pytest.param(f"{CIRCUIT},reorder=2%,reorder_delay=1ms,duplicate=2%,loss=1%,seed=7", 90, id="reorder-dup"),
    pytest.param("delay=2ms,rate=100mbit,queue=100p", 150, id="above-rate"),
]


@pytest.mark.needs_root
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize(("circuit", "rate"), IMPAIRMENTS, indirect=["circuit"])
def test_frtp_recovers_every_loss_on_the_circuit(
    circuit: Net, rate: float, pair: tuple[str, str], file_8mb: Path, tmp_path: Path
) -> None:
    sender, receiver = pair
    dst = tmp_path / "out"
    result = frtp_transfer(
        sender=sender,
        receiver=receiver,
        net=circuit,
        rate=rate,
        input_path=file_8mb,
        output_path=dst,
        workdir=tmp_path,
        timeout=90,
    )
    check_transfer(result, file_8mb, dst, file_8mb.stat().st_size)
    recv = result.summary("recv")
    assert recv["losses"] > 0 and recv["naks_sent"] > 0, f"the circuit lost nothing? {recv}"


# How long a side may take to notice a dead path: 10 s (ten EXP, or TCP_USER_TIMEOUT) plus slack.
GIVE_UP_S = 40


def run_until_both_fail(tx: Proc, rx: Proc, cut: list[str], after_s: float) -> None:
    """Starts the pair, runs ``cut`` once the transfer has run ``after_s``, and waits for both
    to exit; fails the test if either hangs past :data:`GIVE_UP_S` or does not exit 5."""
    procs = [tx, rx]
    try:
        start_processes(procs, listener=tx)
        time.sleep(after_s)
        if any(p.popen is not None and p.popen.poll() is not None for p in procs):
            pytest.fail(describe(procs, "a peer ended before the path was cut"), pytrace=False)
        subprocess.run(cut, check=True, capture_output=True)
        if not wait_processes(procs, GIVE_UP_S):
            pytest.fail(describe(procs, f"a peer hung: still running {GIVE_UP_S} s after the cut"), pytrace=False)
    finally:
        kill_processes(procs)
    if any(p.rc != 5 for p in procs):
        pytest.fail(describe(procs, "both sides must exit 5 (session broken)"), pytrace=False)


@pytest.mark.needs_root
@pytest.mark.parametrize(
    ("side", "dev", "sender_says", "receiver_says"),
    [
        pytest.param("a", "ctl0", "no ACK or ERR for 10 s", "the control path is down", id="control"),
        pytest.param("b", "veth0", "no ACK or ERR for 10 s", "reset the control connection", id="circuit"),
    ],
)
def test_a_path_cut_mid_transfer_ends_both_sides_with_an_error_naming_it(
    circuit: Net, side: str, dev: str, sender_says: str, receiver_says: str, tmp_path: Path
) -> None:
    """Control path cut: the receiver's ACKs go unacknowledged until TCP_USER_TIMEOUT, the sender
    hears nothing until ten EXP. Circuit cut: the sender hears nothing, gives up and resets the
    control connection, which ends the receiver (docs/cli.md, `frtp`)."""
    tx, rx = frtp_procs(
        sender="frtp",
        receiver="frtp",
        net=circuit,
        rate=20,
        input_path=Path("/dev/zero"),
        output_path=tmp_path / "out",
        workdir=tmp_path,
    )
    ns = circuit.ns_a if side == "a" else circuit.ns_b
    assert ns is not None
    run_until_both_fail(tx, rx, ["ip", "-n", ns, "link", "set", dev, "down"], after_s=1.0)
    assert sender_says in tx.stderr(), tx.stderr()
    assert receiver_says in rx.stderr(), rx.stderr()
    assert (tmp_path / "out").stat().st_size > 0, "nothing arrived before the cut"
