"""Harness for the interop tests: stacks, networks and one transfer between two peers.

Stacks come from the stack registry (stacks/*/meta.toml, read by
udtharness.stacks); each one here has the command line of docs/cli.md (`recv --listen`,
`send --connect`, rendezvous, `--dgram`, `--stats`), so a transfer is two
processes and a sha256 comparison. Networks are the loopback or two network
namespaces joined by a veth pair, created per test session with the pid in
their names so that parallel runs do not collide.
"""

from __future__ import annotations

import itertools
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from udtharness import netns, processes
from udtharness.cli import read_stats, recv_argv, send_argv, stats_problems
from udtharness.netns import LOOPBACK, Net, veth_namespaces
from udtharness.ports import free_udp_port
from udtharness.stacks import StackError, registry
from udtharness.testdata import random_file, sha256_file

NS_PREFIX = "udtt-"
# A transfer of a few packets takes well under 2 s (rendezvous included); the
# bound only has to keep a broken stack from eating CI's time.
SMALL_TIMEOUT_S = 20.0


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (CI's timeout, a killed job) ends the session like Ctrl-C does:
    # `finally` blocks kill the peers and fixture teardowns delete namespaces.
    def terminate(signum: int, frame: object) -> None:
        pytest.exit(f"terminated by signal {signum}", returncode=128 + signum)

    signal.signal(signal.SIGTERM, terminate)


# ----------------------------------------------------------------- reports

# Tables that tests fill in (title -> lines), printed at the end of the session.
REPORTS = pytest.StashKey[dict[str, list[str]]]()


@pytest.fixture(scope="session")
def session_report(request: pytest.FixtureRequest) -> dict[str, list[str]]:
    """Title -> lines: what a test adds here is printed in the terminal summary."""
    return request.config.stash.setdefault(REPORTS, {})


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for title, lines in config.stash.get(REPORTS, {}).items():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)


# ----------------------------------------------------------------- stacks


def stack_binary(name: str) -> Path:
    """Path of a registry stack's `udt-cli` binary; fails the test (not skips) when it is missing."""
    stacks = registry()
    if name not in stacks:
        pytest.fail(f"unknown stack '{name}'; the registry has {sorted(stacks)}", pytrace=False)
    try:
        return stacks[name].bulk_binary()
    except StackError as e:
        pytest.fail(str(e), pytrace=False)


# ----------------------------------------------------------------- networks


@pytest.fixture(scope="session")
def loopback() -> Net:
    return LOOPBACK


@pytest.fixture(scope="session")
def veth() -> Iterator[Net]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces")
    netns.cleanup(NS_PREFIX, live=False)
    with veth_namespaces(NS_PREFIX, "10.231.0.1", "10.231.0.2") as net:
        yield net


@pytest.fixture
def net(request: pytest.FixtureRequest) -> Net:
    """Indirect parametrisation: @pytest.mark.parametrize('net', ['lo', 'veth'], indirect=True)."""
    net: Net = request.getfixturevalue({"lo": "loopback", "veth": "veth"}[request.param])
    return net


# ----------------------------------------------------------------- SABUL's family's inputs

# At MSS 1500 a SABUL or FRTP packet is 1472 bytes, its payload 1468 (SABUL.md §3.1): files
# around one payload.
SABUL_SIZES = [0, 1, 1467, 1468, 1469]


@pytest.fixture(scope="session")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Random files of each of :data:`SABUL_SIZES` bytes."""
    d = tmp_path_factory.mktemp("sabul-family-inputs")
    return {n: random_file(d / f"in-{n}", n) for n in SABUL_SIZES}


@pytest.fixture(scope="session")
def file_8mb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random file of 8 MB and a bit (not a whole number of packets)."""
    return random_file(tmp_path_factory.mktemp("sabul-family-8mb") / "in-8MB", 8_000_009)


# ----------------------------------------------------------------- ports


_ports = itertools.count(20000 + (os.getpid() % 2000) * 10)


def pick_port(net: Net) -> int:
    # Namespaces are private to this run: any port is free there.
    return free_udp_port() if net.ns_a is None else next(_ports)


# ----------------------------------------------------------------- transfer


@dataclass
class Proc:
    """One side of a transfer: its command line, and once started its process
    (:func:`udtharness.processes.start`: its own process group, marked with the run's id so
    that a crashed run's leftovers are swept) and exit status."""

    role: str
    stack: str
    argv: list[str]
    stderr_path: Path  # stdout and stderr
    popen: processes.StackProcess | None = None
    rc: int | None = None

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class TransferResult:
    sender: Proc
    receiver: Proc
    seconds: float
    send_stats: list[dict[str, Any]]
    recv_stats: list[dict[str, Any]]

    def summary(self, role: str) -> dict[str, Any]:
        lines = self.send_stats if role == "send" else self.recv_stats
        return lines[-1] if lines else {}


def describe(procs: list[Proc], extra: str = "") -> str:
    parts = [extra] if extra else []
    for p in procs:
        parts.append(
            f"--- {p.role} ({p.stack}) exit={p.rc}\n$ {shlex.join(p.argv)}\n{p.stderr().rstrip() or '(no stderr)'}"
        )
    return "\n".join(parts)


def transfer(
    *,
    sender: str,
    receiver: str,
    net: Net,
    input_path: Path,
    output_path: Path,
    workdir: Path,
    rendezvous: bool = False,
    dgram: bool = False,
    timeout: float = SMALL_TIMEOUT_S,
    extra_args: list[str] | None = None,
) -> TransferResult:
    """Runs `receiver recv` in net.ns_b and `sender send` in net.ns_a; both must exit 0 within `timeout`.

    Fails the test with both command lines and both stderr outputs on any error.
    """
    send_bin, recv_bin = stack_binary(sender), stack_binary(receiver)
    port = pick_port(net)
    common = ["--dgram"] if dgram else []
    common += extra_args or []
    recv_stats, send_stats = workdir / "recv-stats.jsonl", workdir / "send-stats.jsonl"
    recv = recv_argv(recv_bin, f"{net.addr_b}:{port}", output_path, *common, stats=recv_stats)
    send = send_argv(send_bin, f"{net.addr_b}:{port}", input_path, *common, stats=send_stats)
    if rendezvous:
        sport = pick_port(net)
        recv += ["--rendezvous", f"{net.addr_a}:{sport}"]
        send += ["--bind", f"{net.addr_a}:{sport}", "--rendezvous"]

    rx = Proc("receiver", receiver, net.wrap(net.ns_b, recv), workdir / "recv.stderr")
    tx = Proc("sender", sender, net.wrap(net.ns_a, send), workdir / "send.stderr")
    procs = [rx, tx]
    seconds = run_processes(procs, listener=None if rendezvous else rx, timeout=timeout)
    return TransferResult(tx, rx, seconds, read_stats(send_stats), read_stats(recv_stats))


def check_transfer(result: TransferResult, input_path: Path, output_path: Path, size: int) -> None:
    """Same bytes on both sides, and both stats summaries agree with the size."""
    procs = [result.receiver, result.sender]
    if not output_path.exists():
        pytest.fail(describe(procs, f"receiver wrote no output file {output_path}"), pytrace=False)
    got = output_path.stat().st_size
    if got != size or sha256_file(output_path) != sha256_file(input_path):
        pytest.fail(
            describe(procs, f"output differs from input: {got} bytes received, {size} sent (sha256 mismatch)"),
            pytrace=False,
        )
    for role, stack in (("send", result.sender.stack), ("recv", result.receiver.stack)):
        s = result.summary(role)
        problems = []
        if not s.get("summary"):
            problems.append("no summary line")
        else:
            problems += stats_problems(s, summary=True)
            if s.get("bytes") != size:
                problems.append(f"bytes={s.get('bytes')} != {size}")
            if s.get("stack") != stack or s.get("role") != role:
                problems.append(f"stack/role {s.get('stack')}/{s.get('role')} != {stack}/{role}")
        if problems:
            pytest.fail(describe(procs, f"{role} stats summary: {'; '.join(problems)}: {s}"), pytrace=False)


# How long a listener may take to say it listens before the clients start anyway.
LISTEN_WAIT_S = 10.0


def start_processes(procs: list[Proc], listener: Proc | None) -> None:
    """Starts ``procs`` in order, after ``listener`` waiting until it can be connected to."""
    for p in procs:
        # No memory or CPU cap: a transfer of hundreds of MiB is what these tests measure.
        p.popen = processes.start(p.argv, os.environ, p.stderr_path, processes.Limits(mem=None, cpu=None))
        if p is listener:
            wait_listening(p)


def wait_listening(p: Proc, within: float = LISTEN_WAIT_S) -> None:
    """Until ``p`` says "listening on" (every stack here does once bound), exits, or ``within`` s
    pass. A UDT client's handshake is retried, but a SABUL or FRTP client's TCP control connection
    is refused once and the client exits: on a loaded host a fixed pause before it was too short."""
    assert p.popen is not None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and p.popen.poll() is None and "listening on" not in p.stderr():
        time.sleep(0.01)


def wait_processes(procs: list[Proc], timeout: float) -> bool:
    """Waits up to ``timeout`` s in all for ``procs`` to exit, recording each exit status;
    returns whether all did."""
    deadline = time.monotonic() + timeout
    for p in procs:
        assert p.popen is not None
        try:
            p.rc = p.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    return all(p.rc is not None for p in procs)


def kill_processes(procs: list[Proc]) -> None:
    """Kills whatever of ``procs`` still runs (a test's ``finally``)."""
    for p in procs:
        if p.popen is not None:
            processes.stop(p.popen, grace=0.5)  # its whole group, also what it left behind


def run_processes(procs: list[Proc], listener: Proc | None, timeout: float, what: str = "transfer") -> float:
    """Starts `procs` in order (pausing after `listener` so that it can bind), waits for all of
    them within `timeout` s, kills what is left, and fails the test on a timeout or a non-zero
    exit. Returns the seconds it took."""
    started = time.monotonic()
    try:
        start_processes(procs, listener)
        if not wait_processes(procs, timeout):
            pytest.fail(describe(procs, f"{what} did not finish within {timeout:.0f} s"), pytrace=False)
    finally:
        kill_processes(procs)
    if any(p.rc != 0 for p in procs):
        pytest.fail(describe(procs, "a peer exited non-zero"), pytrace=False)
    return time.monotonic() - started
