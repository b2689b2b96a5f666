"""Ctrl-C (or TERM) mid-run leaves no namespace, process or qdisc behind; after a kill -9,
`udtbed cleanup` removes what is left by name. Either way the next run works."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
from conftest import dead_pid, interruptible, root_links, udtbed_run_argv
from udtbed import REPO
from udtbed.emulation import network
from udtbed.emulation.network import Network
from udtbed.emulation.runtime import NamespaceRuntime
from udtharness import netns, processes

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


def spawn_run(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        udtbed_run_argv(
            tmp_path, "--experiments", "fairness", "--stacks", "libudt", "--duration", "30", "--calibration", "flag"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )


def wait_for_transfer(p: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    assert p.stdout is not None, "spawn_run pipes the output"
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if "-- libudt" in line:  # the flows are running
            time.sleep(2)
            return
        assert p.poll() is None, "run ended before the transfer started"
    pytest.fail("transfer never started")


def netns_inodes(prefix: str) -> set[int]:
    return {os.stat(f"/run/netns/{ns}").st_ino for ns in netns.list_namespaces(prefix)}


def processes_in(inodes: set[int]) -> list[int]:
    """PIDs whose network namespace is one of ``inodes`` (alive even after `ip netns del`)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}/ns/net").st_ino in inodes:
                    out.append(int(d))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_nothing_and_next_run_works(tmp_path: Path, sig: signal.Signals) -> None:
    p = spawn_run(tmp_path)
    wait_for_transfer(p)
    prefix = f"{network.PREFIX}{p.pid}-"
    inodes = netns_inodes(prefix)
    assert inodes, "the run's namespaces should exist mid-run"
    assert processes_in(inodes), "stacks and emulators should be running in them"
    p.send_signal(sig)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 130, out
    assert netns.list_namespaces(prefix) == []
    time.sleep(0.5)
    assert processes_in(inodes) == []
    assert_next_run_works()


def assert_next_run_works() -> None:
    """A calibration run builds and calibrates chicago-ottawa."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "udtbed",
            "calibrate",
            str(REPO / "topologies/chicago-ottawa.toml"),
            "chicago",
            "ottawa",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_cleanup_removes_a_killed_runs_namespaces_and_processes(tmp_path: Path) -> None:
    """kill -9 of the runner: no Python unwinds anything, so the namespaces (with the stacks,
    the emulators and Mininet's node shells in them) stay until `udtbed cleanup` removes them
    by name; nothing was ever in the root namespace."""
    before = root_links()
    p = spawn_run(tmp_path)
    wait_for_transfer(p)
    prefix = f"{network.PREFIX}{p.pid}-"
    names = netns.list_namespaces(prefix)
    inodes = netns_inodes(prefix)
    assert names and processes_in(inodes)
    assert any(netns.is_node_shell(pid) for pid in processes_in(inodes)), "Mininet node shells"
    assert root_links() == before
    p.kill()
    p.wait(timeout=10)
    assert p.stdout is not None
    p.stdout.close()
    time.sleep(0.5)
    assert sorted(netns.list_namespaces(prefix)) == sorted(names)
    assert processes_in(inodes), "the stacks and emulators outlive a killed runner"
    r = subprocess.run(
        [sys.executable, "-m", "udtbed", "cleanup", "--prefix", prefix], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(ns in r.stdout for ns in names), r.stdout
    assert netns.list_namespaces(prefix) == []
    time.sleep(0.5)
    assert processes_in(inodes) == []
    assert root_links() == before
    assert_next_run_works()


def test_cleanup_command_removes_only_prefixed_namespaces() -> None:
    # --prefix keeps this test off the udtb-* namespaces of runs going on beside it.
    other = f"udtz-{os.getpid()}"
    mine = f"{network.PREFIX}{os.getpid()}-stray"
    subprocess.run(["ip", "netns", "add", other], check=True)
    subprocess.run(["ip", "netns", "add", mine], check=True)
    try:
        sleeper = subprocess.Popen(["ip", "netns", "exec", mine, "sleep", "300"])
        time.sleep(0.2)
        r = subprocess.run(
            [sys.executable, "-m", "udtbed", "cleanup", "--prefix", f"{network.PREFIX}{os.getpid()}-"],
            capture_output=True,
            text=True,
        )
        assert mine in r.stdout
        assert mine not in netns.list_namespaces(network.PREFIX)
        assert other in netns.list_namespaces("udtz-")
        assert sleeper.wait(timeout=5) != 0
        r = subprocess.run(
            [sys.executable, "-m", "udtbed", "cleanup", "--prefix", "udtz-"], capture_output=True, text=True
        )
        assert r.returncode == 2 and other in netns.list_namespaces("udtz-"), r.stderr
    finally:
        subprocess.run(["ip", "netns", "del", other])
        subprocess.run(["ip", "netns", "del", mine], capture_output=True)


def test_cleanup_keeps_live_runs_and_removes_dead_ones() -> None:
    live = f"{network.PREFIX}{os.getpid()}-live"
    dead = f"{network.PREFIX}{dead_pid()}-dead"
    for ns in (live, dead):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        r = subprocess.run([sys.executable, "-m", "udtbed", "cleanup"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert dead not in netns.list_namespaces(network.PREFIX) and dead in r.stdout
        assert live in netns.list_namespaces(network.PREFIX), "a live run's namespace was removed"
        assert "--all" in r.stdout and live in r.stdout
    finally:
        for ns in (live, dead):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# --- the namespace runtime's processes ------------------------------------------------------

ADDRESS = {"a": "10.77.0.1", "b": "10.77.0.2"}


@dataclass
class Link:
    a: str
    b: str
    net: str


@dataclass
class Topo:
    hosts: list[str] = field(default_factory=lambda: ["a", "b"])
    links: list[Link] = field(default_factory=lambda: [Link("a", "b", "data")])


class TwoHosts:
    """Hosts a and b, each in a namespace of this test's (``udtb-<pid>-cap-…``), joined by a
    veth pair named after their net: what the capture and the runtime read of a Network."""

    def __init__(self) -> None:
        self.topo = Topo()

    def ns(self, host: str) -> str:
        return f"{network.PREFIX}{os.getpid()}-cap-{host}"

    def address(self, host: str, net: str = "data") -> str:
        return ADDRESS[host]

    def server(self, node: str) -> None:
        return None  # on this machine, not a cluster's server


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def two_hosts() -> Iterator[Network]:
    net = TwoHosts()
    made = []
    try:
        for h in net.topo.hosts:
            ip("netns", "add", net.ns(h))
            made.append(net.ns(h))
        ip("link", "add", "data", "netns", net.ns("a"), "type", "veth", "peer", "name", "data", "netns", net.ns("b"))
        for h in net.topo.hosts:
            ip("-n", net.ns(h), "addr", "add", f"{ADDRESS[h]}/24", "dev", "data")
            ip("-n", net.ns(h), "link", "set", "data", "up")
        yield cast(Network, net)  # the parts of a Network that the capture and the runtime read
    finally:
        for ns in made:
            network.cleanup(ns)


def test_a_host_process_runs_in_its_namespace_and_is_stopped_with_sigint_first(
    two_hosts: Network, tmp_path: Path
) -> None:
    """The runtime starts a harness process in the host's namespace with the runner's environment
    and ``env``, its stdout and stderr each in a file made anew; ``stop`` gives SIGINT, then TERM
    (``timeout`` apart), then KILL; ``stop_all`` leaves nothing running in the namespaces."""
    net = two_hosts
    inodes = {os.stat(f"/run/netns/{net.ns(h)}").st_ino for h in net.topo.hosts}
    rt = NamespaceRuntime(net)
    out, err = tmp_path / "out", tmp_path / "err"
    out.write_text("stale\n")
    script = 'echo "$UDTB_WORD $HOME"; echo err >&2; trap "" INT; trap "echo TERM >&2; exit 3" TERM; '
    script += 'echo ready > "$READY"; while :; do sleep 0.05; done'
    ready = tmp_path / "ready"
    p = rt.spawn("a", ["/bin/sh", "-c", script], stdout=out, stderr=err, env={"UDTB_WORD": "w", "READY": str(ready)})
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert p.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.02)
    assert isinstance(p.popen, processes.StackProcess)
    assert os.stat(f"/proc/{p.pid}/ns/net").st_ino == os.stat(f"/run/netns/{net.ns('a')}").st_ino
    assert os.getpgid(p.pid) == p.pid, "a process group of its own"
    assert out.read_text() == f"w {os.environ['HOME']}\n"
    sleeper = rt.spawn("b", ["sleep", "60"])
    t0 = time.monotonic()
    assert p.stop(timeout=0.5) == 3, "SIGINT ignored, TERM taken"
    assert 0.5 <= time.monotonic() - t0 < 5
    said = err.read_text()
    assert said.startswith("err\n") and said.endswith("TERM\n"), said  # (sh may say its sleep was Terminated)
    rt.stop_all()
    assert sleeper.poll() == -signal.SIGINT
    assert rt.procs == [] and processes_in(inodes) == []
