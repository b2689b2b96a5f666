"""Ctrl-C (or TERM) mid-run leaves no namespace, process or qdisc behind; after a kill -9,
`udtbed cleanup` removes what is left by name. Either way the next run works."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import dead_pid, interruptible, root_links, udtbed_run_argv
from udtbed import network
from udtharness import netns

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
            str(network.REPO / "topologies/chicago-ottawa.toml"),
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
