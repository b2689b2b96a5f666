"""pytest plugin: the conformance run as one progress bar (udtharness.progress).

On a terminal, ``make conformance`` shows a live bar (tests done / collected, the running
test's shortened node id, elapsed, ETA) instead of pytest's row of dots; a failing or erroring
test is logged above the bar as it happens (``FAILED test_interop::test_matrix[...]``), and
pytest's own report (failures, ``-ra`` summary, the final counts) follows unchanged once the
bar is done. Elsewhere (CI logs, a pipe) the plugin does nothing, so logs stay as they were.

Active when pytest's stdout is a terminal, the verbosity is the default or ``-q`` (``-v``
keeps pytest's one line per test) and output is captured (``-s`` lets tests write to the
terminal, which would tear the bar). ``--udtc-progress`` forces it on: on a terminal the bar,
elsewhere one plain line per test. ``-p no:udtconf.pytest_progress`` turns it off.

While the bar is up, the letters pytest would print per test are blanked through a
``pytest_report_teststatus`` wrapper (the test still counts in the statistics) and the file
names through ``TerminalReporter.showfspath``; both are restored before the summary. The bar
writes to a duplicate of the terminal's file descriptor, so the test's own output, which pytest
captures by redirecting fd 1, never lands in it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from typing import IO

import pytest
from rich.console import Console
from udtharness.progress import Progress


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("udtconf").addoption(
        "--udtc-progress",
        action="store_true",
        default=False,
        help="show the run as a progress bar even when the heuristics would not "
        "(plain lines when stdout is no terminal)",
    )


def short_nodeid(nodeid: str, width: int = 90) -> str:
    """``tests/test_interop.py::test_matrix[a-b-c]`` -> ``test_interop::test_matrix[a-b-c]``,
    cut in the middle with ``…`` beyond ``width`` characters."""
    path, sep, rest = nodeid.partition("::")
    label = path.rsplit("/", 1)[-1].removesuffix(".py") + sep + rest
    if len(label) > width:
        keep = width - 1
        label = label[: keep - keep // 2] + "…" + label[len(label) - keep // 2 :]
    return label


def _wanted(config: pytest.Config) -> bool:
    if config.getoption("udtc_progress"):
        return True
    if config.getoption("capture") == "no" or config.getoption("verbose") > 0:
        return False
    try:
        return sys.stdout.isatty()
    except ValueError:  # closed
        return False


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not isinstance(reporter, pytest.TerminalReporter) or not _wanted(config):
        return
    # Capturing is suspended while pytest configures: fd 1 is the terminal. A duplicate keeps
    # pointing there while pytest redirects fd 1 during each test.
    stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    config.pluginmanager.register(ProgressBar(reporter, stream), "udtc-progress-bar")


class ProgressBar:
    """The plugin's hooks while it is active (registered by ``pytest_configure``)."""

    def __init__(self, reporter: pytest.TerminalReporter, stream: IO[str]) -> None:
        self.reporter = reporter
        self.stream = stream
        self.progress: Progress | None = None
        self.quiet = False  # while True, pytest's per-test letters are blanked

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not session.items:
            return
        self.reporter.ensure_newline()
        self.reporter.showfspath = False
        n = len(session.items)
        console = Console(file=self.stream)
        self.progress = Progress("conformance", n, steps=n, console=console, redirect_output=False).__enter__()
        self.quiet = True

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if self.progress is not None:
            self.progress.step(short_nodeid(nodeid), 1)

    def pytest_runtest_logfinish(self) -> None:
        if self.progress is not None:
            self.progress.advance(1)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.progress is not None and report.failed:
            what = "FAILED" if report.when == "call" else "ERROR"
            self.progress.log(f"{what} {short_nodeid(report.nodeid, 200)}")

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self) -> Generator[None, tuple[str, str, object], tuple[str, str, object]]:
        category, letter, word = yield
        return (category, "", "") if self.quiet else (category, letter, word)

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        # Runs inside the terminal reporter's wrapper, before it prints the summary.
        self.finish(KeyboardInterrupt if exitstatus == pytest.ExitCode.INTERRUPTED else None)

    def pytest_unconfigure(self) -> None:
        self.finish(None)
        self.stream.close()

    def finish(self, exc: type[BaseException] | None) -> None:
        """Takes the bar down and gives pytest its terminal output back (idempotent)."""
        self.quiet = False
        self.reporter.showfspath = None
        progress, self.progress = self.progress, None
        if progress is not None:
            progress.__exit__(exc, None, None)
            self.stream.flush()
