"""udtharness.netns's one way of running ``udt-linkem``: its command line, its start in a
namespace (its own process group, its CPUs, its log), the check that it did not exit at start
with what it said, and its stop; and :func:`~udtharness.netns.linkem_namespaces` built on them
leaving nothing behind, after a failure too."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from udtharness import netns

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 (network namespaces)"
)
needs_linkem = pytest.mark.skipif(not netns.LINKEM.exists(), reason=f"{netns.LINKEM} is not built")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = f"udthn-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_the_command_line_is_the_interfaces_the_specs_the_stats_then_the_extra_arguments(tmp_path: Path) -> None:
    stats = tmp_path / "s.jsonl"
    assert netns.linkem_argv("la", "lb", "delay=1ms", "rate=1mbit") == [
        str(netns.LINKEM),
        *("--a", "la", "--b", "lb", "--a-to-b", "delay=1ms", "--b-to-a", "rate=1mbit"),
    ]
    assert netns.linkem_argv(
        "ra", "rb", "f", "r", stats, ["--realtime", "--spin-us", "20"], linkem=Path("/x/udt-linkem")
    ) == ["/x/udt-linkem", "--a", "ra", "--b", "rb", "--a-to-b", "f", "--b-to-a", "r"] + [
        "--stats",
        str(stats),
        "--realtime",
        "--spin-us",
        "20",
    ]


@needs_root
def test_it_runs_in_the_namespace_in_a_group_of_its_own_on_its_cpus_and_a_stopped_one_is_ended(
    namespace: str, tmp_path: Path
) -> None:
    """A stand-in for the binary (it logs its arguments, then sleeps): ``ip netns exec`` execs it
    in place, so the PID is the emulator's; SIGSTOPped, it is still ended at once, and reaped."""
    fake = tmp_path / "udt-linkem"
    fake.write_text('#!/bin/sh\necho "args: $*"\nexec sleep 60\n')
    fake.chmod(0o755)
    log, stats = tmp_path / "linkem.log", tmp_path / "stats.jsonl"
    cpu = max(os.sched_getaffinity(0))
    p = netns.start_linkem(
        namespace, "ra", "rb", "f", "r", stats=stats, args=["--realtime"], log=log, cpus={cpu}, linkem=fake
    )
    try:
        assert p.args == [
            "ip",
            "netns",
            "exec",
            namespace,
            *netns.linkem_argv("ra", "rb", "f", "r", stats, ["--realtime"], fake),
        ]
        deadline = time.monotonic() + 5
        while Path(f"/proc/{p.pid}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep"
        assert os.stat(f"/proc/{p.pid}/ns/net").st_ino == os.stat(f"/run/netns/{namespace}").st_ino
        assert os.getpgid(p.pid) == p.pid, "a group of its own"
        assert os.sched_getaffinity(p.pid) == {cpu}
        netns.check_linkem(p)  # running: nothing to say
        assert log.read_text() == f"args: --a ra --b rb --a-to-b f --b-to-a r --stats {stats} --realtime\n"
        os.kill(p.pid, signal.SIGSTOP)
        while state(p.pid) != "T":
            time.sleep(0.01)
        t0 = time.monotonic()
        netns.stop_linkem([p], grace=3.0)
        assert time.monotonic() - t0 < 2.0, "SIGCONT with the SIGTERM: no wait for the grace"
    finally:
        netns.stop_linkem([p], grace=1.0)
    assert p.returncode == -signal.SIGTERM and p.stopped and not alive(p.pid)
    netns.stop_linkem([p])  # already reaped: left alone


@needs_root
@needs_linkem
def test_an_emulator_that_exits_at_start_is_reported_with_what_it_said(namespace: str, tmp_path: Path) -> None:
    log = tmp_path / "linkem.log"
    p = netns.start_linkem(namespace, "no-such-a", "no-such-b", "delay=1ms", "delay=1ms", log=log)
    try:
        p.wait(timeout=5)
        with pytest.raises(RuntimeError, match=r"^udt-linkem for link 3 exited at start \([1-9]\d*\): \S") as e:
            netns.check_linkem(p, "udt-linkem for link 3", show_log=True)
        text = log.read_text().strip()
        assert text and text.splitlines()[-1] in str(e.value) and str(e.value).endswith(f"; see {log}")
    finally:
        netns.stop_linkem([p])


def linkem_pids() -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if Path(f"/proc/{d}/exe").resolve() == netns.LINKEM.resolve() and alive(int(d)):
                    out.add(int(d))
            except OSError:
                pass
    return out


def temp_logs() -> set[str]:
    return {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("udt-linkem-") and f.endswith(".log")}


@needs_root
@needs_linkem
def test_linkem_namespaces_stops_its_emulator_and_removes_its_log_and_namespaces(tmp_path: Path) -> None:
    prefix = f"udthn{os.getpid() % 1000}-"
    logs, stats = temp_logs(), tmp_path / "stats.jsonl"
    with netns.linkem_namespaces(prefix, "10.239.0.1", "10.239.0.2", "delay=1ms", "delay=1ms", stats=stats) as net:
        ns_m = f"{prefix}{os.getpid()}-m"
        pids = [int(p) for p in netns.sh("ip", "netns", "pids", ns_m).stdout.split()]
        assert len(pids) == 1 and pids[0] in linkem_pids(), pids
        assert os.getpgid(pids[0]) == pids[0], "a group of its own"
        assert net.ns_a and net.ns_b
        netns.sh("ping", "-c", "1", "-W", "2", net.addr_b, ns=net.ns_a)
    assert not alive(pids[0])
    assert json.loads(stats.read_text().splitlines()[-1])["final"], "SIGTERM: it wrote its final line"
    assert netns.list_namespaces(prefix) == []
    assert temp_logs() <= logs


@needs_root
@needs_linkem
def test_linkem_namespaces_reports_a_bad_spec_and_leaves_nothing() -> None:
    prefix = f"udthn{os.getpid() % 1000}-"
    before, logs = linkem_pids(), temp_logs()
    with pytest.raises(RuntimeError, match=r"^udt-linkem exited at start \(\d+\): \S"):
        with netns.linkem_namespaces(prefix, "10.239.0.1", "10.239.0.2", "bogus=1", "delay=1ms"):
            pytest.fail("a bad spec must not get this far")
    assert linkem_pids() <= before
    assert netns.list_namespaces(prefix) == []
    assert temp_logs() <= logs
