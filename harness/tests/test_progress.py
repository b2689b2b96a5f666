"""The progress display: plain lines for logs, a live rich region on a terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from udtharness.progress import Progress, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def plain_console() -> Console:
    return Console(file=io.StringIO(), width=100)


def terminal_console() -> Console:
    return Console(record=True, force_terminal=True, width=100, file=io.StringIO())


def output(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_format_duration_minutes_then_hours() -> None:
    assert format_duration(0) == "0:00"
    assert format_duration(250) == "4:10"
    assert format_duration(3723.4) == "1:02:03"


def test_plain_mode_prints_one_line_per_step_and_log_lines_as_they_are() -> None:
    clock, console = Clock(), plain_console()
    with Progress("fairness", 120, steps=3, console=console, clock=clock) as progress:
        assert not progress.live  # a StringIO is no terminal
        progress.step("fairness / three-site / udt-rs", 60)
        clock.now += 30
        progress.advance(30)
        progress.log("[udt-rs] 412 Mb/s, [bold]markup[/] stays as is")
        clock.now += 40
        progress.step("fairness / three-site / tcp", 40)
        clock.now += 50
        progress.step("fairness / two-site / udt-rs", 20)
        clock.now += 10
    assert output(console).splitlines() == [
        "[1/3] fairness / three-site / udt-rs (elapsed 0:00, ETA --:--)",
        "[udt-rs] 412 Mb/s, [bold]markup[/] stays as is",
        # 60 units in 70 s: 60 units to go take 70 s
        "[2/3] fairness / three-site / tcp (elapsed 1:10, ETA 1:10)",
        # 100 units in 120 s: 20 to go take 24 s
        "[3/3] fairness / two-site / udt-rs (elapsed 2:00, ETA 0:24)",
        "fairness: done, 3 steps in 2:10",
    ]


def test_plain_mode_has_no_escape_codes_or_carriage_returns() -> None:
    console = plain_console()
    with Progress("run", 2, steps=2, console=console) as progress:
        progress.step("a", 1)
        progress.step("b", 1)
    text = output(console)
    assert "\x1b" not in text and "\r" not in text


def test_plain_mode_seconds_per_unit_gives_a_first_eta_and_steps_are_optional() -> None:
    clock, console = Clock(), plain_console()
    with Progress("plan", 600, console=console, seconds_per_unit=1.0, clock=clock) as progress:
        progress.step("rtt / 10ms", 600)
    assert output(console).splitlines()[0] == "[1] rtt / 10ms (elapsed 0:00, ETA 10:00)"


def test_plain_mode_reports_an_interrupted_run() -> None:
    clock, console = Clock(), plain_console()
    with pytest.raises(KeyboardInterrupt), Progress("plan", 10, steps=5, console=console, clock=clock) as p:
        p.step("one", 2)
        clock.now += 65
        raise KeyboardInterrupt
    assert output(console).splitlines()[-1] == "plan: interrupted at step 1/5 after 1:05"


def test_live_mode_renders_title_label_counts_elapsed_and_eta() -> None:
    clock, console = Clock(), terminal_console()
    with Progress("udt-testbed", 100, steps=4, console=console, clock=clock) as progress:
        assert progress.live
        progress.step("fairness / three-site / udt-rs", 25)
        clock.now += 30
        progress.step("rtt / 100ms / libudt", 25)
        clock.now += 15
        progress.advance(5)  # 30 units in 45 s: 70 to go take 105 s
        progress.log("fairness: Jain index 0.998")
        text = console.export_text(clear=False)
        frame = text[text.rindex("udt-testbed") :]
    assert "fairness: Jain index 0.998" in text
    assert "rtt / 100ms / libudt" in frame
    assert "30%" in frame
    assert "step 2/4" in frame
    assert "elapsed 0:45" in frame
    assert "ETA 1:45" in frame
    final = console.export_text()
    assert "done" in final[final.rindex("udt-testbed") :]


def test_live_mode_restores_the_terminal_on_an_exception() -> None:
    console = terminal_console()
    progress = Progress("run", 10, steps=2, console=console)
    with pytest.raises(KeyboardInterrupt), progress:
        progress.step("first", 5)
        assert console.is_alt_screen is False
        assert console._live_stack  # the live region is up
        raise KeyboardInterrupt
    assert not console._live_stack  # and gone again
    raw = output(console)
    assert raw.endswith("\x1b[?25h")  # cursor shown again
    text = console.export_text()
    assert "interrupted" in text[text.rindex("run") :]


def test_live_mode_shows_stdout_above_the_bar_and_puts_it_back() -> None:
    import sys

    before = sys.stdout
    console = terminal_console()
    with Progress("run", 1, console=console) as progress:
        progress.step("only", 1)
        print("from print()")
    assert sys.stdout is before
    assert "from print()" in console.export_text()


def test_live_is_off_when_stdout_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("run", 1, steps=1) as progress:
        assert not progress.live
        progress.step("only", 1)
    assert capsys.readouterr().out.splitlines()[0] == "[1/1] only (elapsed 0:00, ETA --:--)"
