"""Progress of a long run: a live bar on a terminal, plain lines in a log.

A run (the testbed's experiment plan, the conformance suite) is a sequence of steps, each with
a planned share (``weight``) of the run's planned ``total``, in any unit (the testbed uses
planned seconds, the pytest plugin one unit per test). The ETA is the remaining planned work
times the pace measured so far (elapsed seconds per unit done), so a plan whose units are
seconds but which runs 20 % slow gets an ETA 20 % longer than planned.

On a terminal the display is a ``rich`` live region, two lines at the bottom of the screen::

    udt-testbed · fairness / three-site / udt-rs
    ━━━━━━━━━━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━━   37%  step 3/12  elapsed 4:10  ETA 9:30

with log lines scrolling above it. Elsewhere (CI logs, a pipe) it prints one plain line per
step and the log lines as they are, with no ANSI codes or carriage returns::

    [3/12] fairness / three-site / udt-rs (elapsed 4:10, ETA 9:30)

Usage::

    with Progress("udt-testbed", total=plan_seconds, steps=len(plan)) as progress:
        for exp in plan:
            progress.step(exp.label, exp.seconds)
            for second in exp.run():
                progress.advance(1.0)
            progress.log(f"{exp.label}: {exp.summary}")
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

__all__ = ["Progress", "format_duration"]


def format_duration(seconds: float) -> str:
    """``m:ss`` below an hour, ``h:mm:ss`` from there (``4:10``, ``1:02:03``)."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class Progress:
    """Progress of a run of steps; a context manager (see the module doc).

    ``total``: the planned work, in any unit. ``live``: draw a live bar (``True``) or print
    plain lines (``False``); ``None`` picks the bar iff the output is a terminal (``console``'s
    if given, else stdout). ``steps``: the planned number of steps, shown as ``3/12`` (without
    it, ``3``). ``seconds_per_unit``: the pace to assume before any work is done (``1.0``
    when the units are planned seconds); without it the first ETA is unknown (``--:--``).
    ``redirect_output``: in live mode, show what the program writes to ``sys.stdout`` and
    ``sys.stderr`` above the bar (turn it off where something else owns them, as under pytest).
    ``clock``: monotonic seconds (tests inject one).

    Leaving the context always stops the live display and restores the terminal, also on an
    exception or ``KeyboardInterrupt``; the last frame stays on screen, marked ``done`` or
    ``interrupted``.
    """

    def __init__(
        self,
        title: str,
        total: float,
        *,
        live: bool | None = None,
        console: Console | None = None,
        steps: int | None = None,
        seconds_per_unit: float | None = None,
        redirect_output: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.title = title
        self.total = max(float(total), 0.0)
        self.steps = steps
        self.seconds_per_unit = seconds_per_unit
        self._console = console
        if live is None:
            live = console.is_terminal and not console.is_dumb_terminal if console else sys.stdout.isatty()
        self.live = live
        self._redirect = redirect_output
        self._clock = clock
        self._lock = threading.Lock()
        self._start: float | None = None
        self._end: float | None = None
        self._outcome = ""  # "" while running, then "done" or "interrupted"
        self._index = 0  # number of the current step (1-based); 0 before the first
        self._label = ""
        self._done_before = 0.0  # work of the finished steps
        self._weight = 0.0
        self._advanced = 0.0
        self._live: Live | None = None

    # --- the API -------------------------------------------------------------

    def __enter__(self) -> Progress:
        self._start = self._clock()
        if self.live:
            console = self._console if self._console is not None else Console()
            # The live region renders `self` (see __rich__) afresh on every refresh and under
            # every log line, so it never shows a stale frame.
            self._live = Live(
                self,
                console=console,
                refresh_per_second=4,
                redirect_stdout=self._redirect,
                redirect_stderr=self._redirect,
            )
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self._end = self._clock()
            self._outcome = "done" if exc_type is None else "interrupted"
            if exc_type is None:
                self._advanced = self._weight  # the last step ran to its end
        live, self._live = self._live, None
        if live is not None:
            live.stop()  # renders the last frame and shows the cursor again
        else:
            self._plain(self._closing_line())

    def step(self, label: str, weight: float) -> None:
        """A new step begins (the previous one counts as done); ``weight``: its planned work."""
        with self._lock:
            if self._index:
                self._done_before += self._weight
            self._index += 1
            self._label = label
            self._weight = max(float(weight), 0.0)
            self._advanced = 0.0
        if not self.live:
            elapsed, eta = self._times()
            self._plain(f"[{self._count()}] {label} (elapsed {format_duration(elapsed)}, ETA {_eta(eta)})")
        elif self._live is not None:
            self._live.refresh()

    def advance(self, amount: float) -> None:
        """Progress within the current step, in the units of ``total`` (capped at its weight)."""
        with self._lock:
            self._advanced = min(self._advanced + amount, self._weight)

    def log(self, line: str) -> None:
        """A log line: above the bar, or printed as is."""
        if self._live is not None:
            self._live.console.print(Text(line), soft_wrap=True, highlight=False)
        else:
            self._plain(line)

    # --- state ---------------------------------------------------------------

    @property
    def done(self) -> float:
        """Work done so far, in the units of ``total``."""
        return min(self._done_before + self._advanced, self.total)

    def _times(self) -> tuple[float, float | None]:
        """Elapsed seconds and the ETA in seconds (``None`` while the pace is unknown)."""
        now = self._end if self._end is not None else self._clock()
        elapsed = now - self._start if self._start is not None else 0.0
        done = self.done
        if done > 0 and elapsed > 0:
            pace: float | None = elapsed / done
        else:
            pace = self.seconds_per_unit
        return elapsed, None if pace is None else (self.total - done) * pace

    def _count(self) -> str:
        return f"{self._index}/{self.steps}" if self.steps is not None else str(self._index)

    def _closing_line(self) -> str:
        elapsed, _ = self._times()
        if self._outcome == "done":
            return f"{self.title}: done, {self._index} steps in {format_duration(elapsed)}"
        return f"{self.title}: interrupted at step {self._count()} after {format_duration(elapsed)}"

    def _plain(self, line: str) -> None:
        out = self._console.file if self._console is not None else sys.stdout
        out.write(line + "\n")
        out.flush()

    # --- the live view -------------------------------------------------------

    def __rich__(self) -> RenderableType:
        """The current frame: title and step label, then bar, share done, step, elapsed, ETA."""
        with self._lock:
            elapsed, eta = self._times()
            done, label, outcome = self.done, self._label, self._outcome
            count = self._count()
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(self.title, style="bold")
        if label:
            head.append(" · ", style="dim")
            head.append(label, style="cyan")
        fraction = done / self.total if self.total else float(outcome == "done")
        stats = Table.grid(padding=(0, 2), expand=True)
        stats.add_column(ratio=1)
        for _ in range(4):
            stats.add_column(no_wrap=True, justify="right")
        if outcome == "done":
            tail = Text("done", style="bold green")
        elif outcome == "interrupted":
            tail = Text("interrupted", style="bold red")
        else:
            tail = Text.assemble(("ETA ", "dim"), (_eta(eta), "bold"))
        stats.add_row(
            ProgressBar(total=1.0, completed=fraction, style="grey42", complete_style="green", finished_style="green"),
            Text(f"{fraction * 100:3.0f}%"),
            Text.assemble(("step ", "dim"), count),
            Text.assemble(("elapsed ", "dim"), format_duration(elapsed)),
            tail,
        )
        return Group(head, stats)


def _eta(seconds: float | None) -> str:
    return "--:--" if seconds is None else format_duration(seconds)
