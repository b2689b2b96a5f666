"""How the suite runs a stack's processes (udtharness.processes): what counts as a crash, the memory
and CPU caps and how a cap kill is reported, and that a stopped run leaves no process behind.

The stacks are one Python script each (script_stack.py); each does one thing wrong."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from script_stack import script_stack
from udtconf.active import Outcome, ProbeResult
from udtconf.diagnosis import crashed, log_crash
from udtconf.family import RUNS
from udtconf.runner import InteropRunner, RunStatus
from udtconf.udt.tester import Probe, ProbeEnv, run_probe
from udtconf.udt.tester.probe import _StackServer
from udtharness import processes
from udtharness.processes import LimitError, Limits, parse_seconds, parse_size

# Go's runtime dying: the fatal error first, then a dump of every goroutine, exit 2.
FATAL_THEN_DUMP = r"""
import os, socket, sys
if os.environ["TESTCASE"] not in ("handshake", "transfer"):
    raise SystemExit(127)
if os.environ["ROLE"] == "server":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
    s.settimeout(1.0)
    try:
        s.recvfrom(65535)
    except OSError:
        pass
print("fatal error: out of memory", file=sys.stderr)
print("", file=sys.stderr)
for i in range(250):
    print(f"goroutine {i} [running]:\n\truntime.throw({{0x5c2d1e, 0xd}})\n\t/usr/lib/go/src/runtime/panic.go:1047",
          file=sys.stderr)
raise SystemExit(2)
"""

# A receiver whose loss list grows without bound (the zoo's NAK builder).
GREEDY = r"""
import os, socket
if os.environ["TESTCASE"] not in ("handshake", "transfer"):
    raise SystemExit(127)
if os.environ["ROLE"] == "server":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
    losses = []
    while True:
        losses.append(b"\x01" * (1 << 20))
raise SystemExit(1)
"""

SPINNING = r"""
import os, socket
if os.environ["TESTCASE"] not in ("handshake", "transfer"):
    raise SystemExit(127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
while True:
    pass
"""

# Hangs in both roles, with a detached helper of its own; every PID goes to $HANG_DIR.
HANGING = r"""
import os, socket, subprocess, sys, time
if os.environ["TESTCASE"] not in ("handshake", "transfer"):
    raise SystemExit(127)
d = os.environ["HANG_DIR"]
open(os.path.join(d, f"{os.environ['ROLE']}-{os.getpid()}"), "w").close()
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open(os.path.join(d, f"helper-{helper.pid}"), "w").close()
if os.environ["ROLE"] == "server":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
time.sleep(600)
"""


def _server_exits(env: ProbeEnv) -> ProbeResult:
    """A probe that starts the stack's server and is content with any exit it makes."""
    srv = _StackServer(env)
    try:
        rc = srv.finish(20.0)
        return env.result(Outcome.PASS, f"no hang (exit {rc})")
    finally:
        srv.close()


LENIENT = Probe("server/lenient", "0", "server", "passes whatever exit the stack makes", _server_exits)


# ---------------------------------------------------------------------------------------------
# What a crash is


def test_a_crash_line_anywhere_in_the_log_is_found_even_before_a_long_dump(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("listening\nfatal error: out of memory\n\n" + "goroutine 1 [running]:\n\tmain.f()\n" * 400)
    assert log_crash(log) == "fatal error: out of memory"


@pytest.mark.parametrize(
    ("rc", "crash", "verdict"),
    [
        (0, None, False),
        (1, None, False),  # a failure the stack reported: allowed
        (125, None, False),
        (2, "fatal error: out of memory", True),
        (1, "Python exception: ValueError: bad", True),
        (0, "Exception in thread Thread-1", True),  # a thread died, the process went on
        (None, None, False),  # stopped by the suite
        (-11, None, True),
        (126, None, True),
        (134, None, True),
    ],
)
def test_a_crash_is_a_crash_line_or_an_exit_the_contract_does_not_allow(
    rc: int | None, crash: str | None, verdict: bool
) -> None:
    assert crashed(rc, crash) is verdict


def test_a_probe_does_not_pass_a_stack_that_exits_2_after_a_fatal_error(tmp_path: Path) -> None:
    stack = script_stack(tmp_path, "fatal", FATAL_THEN_DUMP, ["handshake", "transfer"])
    res = run_probe(stack, LENIENT, tmp_path / "probe")
    assert res.failed, res.verdict
    assert "fatal crashed (exit 2); fatal log: fatal error: out of memory" in res.details
    assert any("the probe alone said: pass" in n for n in res.notes)


def test_an_interop_cell_names_the_fatal_error_before_its_dump(tmp_path: Path) -> None:
    stack = script_stack(tmp_path, "fatal", FATAL_THEN_DUMP, ["handshake"])
    res = InteropRunner(RUNS, tmp_path / "results", capture=False).run(stack, stack, "handshake")
    assert res.status == RunStatus.FAIL
    assert "client fatal exit 2: fatal error: out of memory" in res.reason
    assert "server fatal exit 2: fatal error: out of memory" in res.reason


# ---------------------------------------------------------------------------------------------
# Limits


@pytest.mark.parametrize(
    ("text", "size"), [("2G", 2 * 1024**3), ("512M", 512 * 1024**2), ("1.5GiB", 3 * 1024**3 // 2), ("0", None)]
)
def test_memory_limits_are_written_as_sizes(text: str, size: int | None) -> None:
    assert parse_size(text) == size


def test_bad_limits_say_how_to_write_one() -> None:
    with pytest.raises(LimitError, match="2G, 512M or 0"):
        parse_size("lots")
    with pytest.raises(LimitError, match="whole seconds"):
        parse_seconds("1m")


def test_limits_are_on_by_default_and_off_with_zero() -> None:
    assert Limits.from_env({}) == Limits(2 * 1024**3, processes.DEFAULT_CPU_LIMIT)
    assert Limits.from_env({"UDTC_MEM_LIMIT": "0", "UDTC_CPU_LIMIT": "none"}) == Limits(None, None)


def test_a_stack_that_allocates_without_bound_is_stopped_by_its_memory_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UDTC_MEM_LIMIT", "200M")
    stack = script_stack(tmp_path, "greedy", GREEDY, ["handshake"])
    res = InteropRunner(RUNS, tmp_path / "results", capture=False).run(stack, stack, "handshake")
    assert res.status == RunStatus.FAIL
    assert "server greedy exit 1: Python exception: MemoryError (exceeded its memory cap of 200 MiB; peak RSS" in (
        res.reason
    )


def test_a_spinning_stack_is_stopped_by_its_cpu_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UDTC_CPU_LIMIT", "1")
    stack = script_stack(tmp_path, "spin", SPINNING, ["transfer"])
    res = run_probe(stack, LENIENT, tmp_path / "probe")
    assert res.failed
    assert "spin crashed (killed by SIGXCPU, exceeded its CPU-time cap of 1 s" in res.details


def test_a_stack_process_keeps_its_pid_and_runs_under_its_caps(tmp_path: Path) -> None:
    ep = tmp_path / "entrypoint"
    ep.write_text('#!/bin/sh\necho $$ > "$LOGDIR/pid"; cat /proc/self/limits\n')
    ep.chmod(0o755)
    env = dict(os.environ, LOGDIR=str(tmp_path))
    p = processes.start(ep, env, tmp_path / "log", Limits(256 * 1024**2, 30))
    assert p.wait(10) == 0
    assert int((tmp_path / "pid").read_text()) == p.pid
    limits = (tmp_path / "log").read_text()
    assert "Max data size             268435456" in limits and "Max cpu time              30 " in limits
    assert p.peak_rss and p.cpu_seconds is not None


# ---------------------------------------------------------------------------------------------
# Cleanup


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["udtconf run", "pytest"])
def test_sigterm_ends_every_process_of_the_stack_it_started(tmp_path: Path, runner: str) -> None:
    """``udtconf run`` passes SIGTERM on to pytest; pytest alone (``make conformance``, which GNU
    make sends its SIGTERM to) stops its stacks as on Ctrl-C."""
    stack = script_stack(tmp_path, "hang", HANGING, ["handshake"])
    pids = tmp_path / "pids"
    pids.mkdir()
    env = dict(os.environ, HANG_DIR=str(pids))
    env.pop("UDTC_RUN_ID", None)  # this session's: the run gets its own
    if runner == "pytest":
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).parent)]
        env.update(UDTC_STACK=str(stack.path), UDTC_AGAINST="none", CASES="handshake", UDTC_PROBES="none")
        env.update(UDTC_RESULTS=str(tmp_path / "out"))
        expected: int = pytest.ExitCode.INTERRUPTED
    else:
        argv = [sys.executable, "-m", "udtconf", "run", "--stack", str(stack.path), "--against", "none"]
        argv += ["--cases", "handshake", "--probes", "none", "--out", str(tmp_path / "out")]
        expected = 128 + signal.SIGTERM
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 4:  # both roles and their detached helpers
            assert time.monotonic() < deadline and proc.poll() is None, "the hanging stack never started"
            time.sleep(0.1)
        started = [int(p.name.split("-")[1]) for p in pids.iterdir()]
        assert all(_alive(pid) for pid in started)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == expected, out
    # SIGKILL is acted on when the process next runs: on a loaded host, after the run has exited.
    deadline = time.monotonic() + 2
    while (left := [pid for pid in started if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not left, f"still running after the run was stopped: {left}"
