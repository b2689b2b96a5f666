"""The pytest progress plugin, run on a tiny suite in a child pytest (a pipe, then a pseudo-terminal)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from udtconf.pytest_progress import short_nodeid

SUITE = """
import pytest

def test_one():
    print("captured, not on the bar")

@pytest.mark.parametrize("n", [1, 2])
def test_two(n):
    assert n == 1
"""


def pytest_cmd(tmp_path: Path, *args: str) -> list[str]:
    (tmp_path / "test_tiny.py").write_text(SUITE)
    return [sys.executable, "-m", "pytest", "-p", "udtconf.pytest_progress", "-p", "no:cacheprovider", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ, COLUMNS="100", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    return env


def test_short_nodeid_drops_directories_and_cuts_the_middle() -> None:
    assert short_nodeid("tests/test_interop.py::test_matrix[a-b-c]") == "test_interop::test_matrix[a-b-c]"
    cut = short_nodeid("tests/test_x.py::test_" + "y" * 100 + "_end", width=40)
    assert len(cut) == 40 and cut.startswith("test_x::test_yy") and cut.endswith("yy_end") and "…" in cut


def test_silent_when_not_a_terminal(tmp_path: Path) -> None:
    out = subprocess.run(pytest_cmd(tmp_path), cwd=tmp_path, env=child_env(), capture_output=True, text=True).stdout
    assert "test_tiny.py ..F" in out  # pytest's own progress, untouched
    assert "conformance" not in out and "ETA" not in out


def test_forced_in_a_log_prints_one_plain_line_per_test_and_keeps_the_summary(tmp_path: Path) -> None:
    cmd = pytest_cmd(tmp_path, "--udtc-progress")
    out = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert "[1/3] test_tiny::test_one (elapsed 0:00, ETA --:--)" in lines
    assert any(re.fullmatch(r"\[2/3\] test_tiny::test_two\[1\] \(elapsed \d:\d\d, ETA \d:\d\d\)", x) for x in lines)
    assert "FAILED test_tiny::test_two[2]" in lines  # as it happens, not only in the summary
    assert any(x.startswith("conformance: done, 3 steps in ") for x in lines)
    assert "test_tiny.py" not in out.split("= FAILURES =")[0]  # no file name and dots
    assert "FAILED test_tiny.py::test_two[2] - assert 2 == 1" in out  # pytest's -ra summary as usual
    assert "1 failed, 2 passed" in out
    assert "captured, not on the bar" not in out
    assert "\x1b" not in out and "\r" not in out


@pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")
def test_on_a_terminal_draws_the_bar_instead_of_dots(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        pytest_cmd(tmp_path), cwd=tmp_path, env=child_env(), stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert child.wait(timeout=60) == 1
    raw = b"".join(chunks).decode()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "conformance · test_tiny::test_two[2]" in text
    assert "step 3/3" in text and "done" in text
    assert "FAILED test_tiny::test_two[2]" in text
    assert "..F" not in text  # pytest's dots are replaced by the bar
    assert "1 failed, 2 passed" in text
    assert raw.count("\x1b[?25l") <= raw.count("\x1b[?25h")  # the cursor is shown again
