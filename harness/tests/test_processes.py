"""udtharness.processes as its users other than the suite's stacks use it: output to files of its
own, the environment and the run's mark, CPU affinity, a named network namespace, and stop's
order of signals (SIGINT first for a tool that writes out what it has). The caps and the sweep
after a crash are tested with the suite (conformance/tests/test_processes.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from udtharness import processes
from udtharness.processes import MARK_VAR, RUN_ID, UNCAPPED, pinned_to, start, stop

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 (network namespaces)"
)


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def wait_for(path: Path, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()):
            return text
        time.sleep(0.01)
    raise AssertionError(f"{path} was not written within {timeout} s")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def ended(pid: int, within: float = 2.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``within`` s: SIGKILL is delivered at once but
    acted on when the process next runs, which on a loaded host is after ``kill`` returns."""
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not alive(pid)


def test_stdout_and_stderr_each_go_to_a_file_made_anew(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    out.write_text("old output\n")
    err.write_text("old errors\n")
    p = start(sh("echo out; echo err >&2"), os.environ, limits=UNCAPPED, stdout=out, stderr=err)
    assert p.wait(timeout=10) == 0
    assert (out.read_text(), err.read_text()) == ("out\n", "err\n")
    assert p.log == err, "a process's diagnostics are on its stderr"


def test_one_path_for_both_is_one_file_in_the_order_written(tmp_path: Path) -> None:
    both = tmp_path / "both.log"
    p = start(sh("echo 1; echo 2 >&2; echo 3"), os.environ, limits=UNCAPPED, stdout=both, stderr=both)
    assert p.wait(timeout=10) == 0
    assert both.read_text() == "1\n2\n3\n"


def test_a_log_is_appended_to_and_does_not_go_with_separate_files(tmp_path: Path) -> None:
    log = tmp_path / "role.log"
    for word in ("first", "second"):
        assert start(sh(f"echo {word}; echo {word} >&2"), os.environ, log, UNCAPPED).wait(timeout=10) == 0
    assert log.read_text() == "first\nfirst\nsecond\nsecond\n"
    with pytest.raises(ValueError, match="not both"):
        start(["true"], os.environ, log, UNCAPPED, stdout=tmp_path / "out")


def test_without_files_the_output_is_discarded_and_stdin_is_closed(tmp_path: Path) -> None:
    p = start(sh("cat; echo gone"), os.environ, limits=UNCAPPED)
    assert p.wait(timeout=10) == 0, "cat reads an empty stdin"
    assert p.log == Path(os.devnull)


def test_the_environment_is_the_callers_and_carries_the_runs_mark(tmp_path: Path) -> None:
    out = tmp_path / "env"
    p = start(sh(f'echo "$UDTH_WORD ${MARK_VAR}"'), {**os.environ, "UDTH_WORD": "given"}, limits=UNCAPPED, stdout=out)
    assert p.wait(timeout=10) == 0
    assert out.read_text() == f"given {RUN_ID}\n"


def cpus_allowed(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_cpus_confine_the_process_and_what_it_starts(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    child = tmp_path / "child"
    p = start(sh(f"sleep 30 & echo $! > {child}; wait"), os.environ, limits=UNCAPPED, cpus={cpu})
    try:
        pid = int(wait_for(child))
        assert cpus_allowed(p.pid) == str(cpu)
        assert cpus_allowed(pid) == str(cpu), "the affinity is inherited"
    finally:
        stop(p, grace=0.5)
    assert ended(pid)
    assert pinned_to(None) is None and pinned_to(frozenset()) is None, "no CPUs given: the caller's"


def test_stop_sends_the_given_signals_in_turn_to_the_group(tmp_path: Path) -> None:
    """SIGINT first where asked; the next signal only for a process that outlived the grace; a
    process that ignores all of them is killed."""
    cases = [
        ("trap 'echo INT > {got}; exit 0' INT", 0, "INT\n"),
        ("trap '' INT; trap 'echo TERM > {got}; exit 0' TERM", 0, "TERM\n"),
        ("trap '' INT TERM", -signal.SIGKILL, ""),
    ]
    for i, (traps, rc, said) in enumerate(cases):
        got, ready = tmp_path / f"got-{i}", tmp_path / f"ready-{i}"
        got.touch()
        script = traps.format(got=got) + f"; echo ready > {ready}; while :; do sleep 0.05; done"
        p = start(sh(script), os.environ, limits=UNCAPPED)
        wait_for(ready)
        assert stop(p, grace=0.5, signals=(signal.SIGINT, signal.SIGTERM)) == rc, traps
        assert got.read_text() == said, traps
        assert p.stopped and p.exit is None, "ended by its caller, not on its own"


def test_stop_kills_what_an_entrypoint_that_exited_left_in_its_group(tmp_path: Path) -> None:
    child, ready = tmp_path / "child", tmp_path / "ready"
    # A background job of a non-interactive sh ignores SIGINT: it outlives its parent's exit.
    script = f"sleep 30 & echo $! > {child}; trap 'exit 0' INT; echo ready > {ready}; while :; do sleep 0.05; done"
    p = start(sh(script), os.environ, limits=UNCAPPED)
    wait_for(ready)
    pid = int(wait_for(child))
    assert stop(p, grace=2.0, signals=(signal.SIGINT,)) == 0
    assert ended(pid), "the leftover of the group is killed"


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = f"udth-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_root
@pytest.mark.parametrize("limits", [UNCAPPED, processes.Limits(mem=1024**3, cpu=60)], ids=["uncapped", "capped"])
def test_a_process_in_a_named_namespace_keeps_its_pid(namespace: str, limits: processes.Limits) -> None:
    p = start(["sleep", "30"], os.environ, limits=limits, netns=namespace)
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{p.pid}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)  # ip, then sh (with caps): each execs the next in place
        assert Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep"
        assert os.stat(f"/proc/{p.pid}/ns/net").st_ino == os.stat(f"/run/netns/{namespace}").st_ino
        assert os.getpgid(p.pid) == p.pid, "a group of its own"
    finally:
        assert stop(p, grace=1.0) == -signal.SIGTERM
