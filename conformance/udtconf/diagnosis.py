"""Diagnosis of a failed run, whatever its protocol: what went wrong with its processes, in
words a stack's author can act on.

A failing cell that only says "exit timeout" or "output differs" leaves the author of the stack
to dig through logs and captures. The diagnosis reads what the run left behind and says it:

* each role's exit in words (``killed by SIGSEGV``, ``exit 134 (128 + SIGABRT)``) and the crash
  line of its log: a Rust ``panicked at``, ``Segmentation fault``, a C++ ``terminate called``, a
  Go ``panic:``, a Python traceback (:func:`crash_line`);
* the last lines of each role's log and the numbers of the last line of its stats file
  (``stats-<role>.jsonl``, keys of docs/cli.md), kept for the cell's detail.

What the capture says is the protocol's: UDT4's :mod:`udtconf.udt.diagnosis` (how far the
handshake and the data got, who is at fault, deaf roles, the watch of a growing capture), SABUL's
and FRTP's the session summaries of :mod:`udtconf.sabul.interop`. Both fill a :class:`Diagnosis`.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from udtharness.cli import STATS_KEYS, SUMMARY_KEYS

TAIL_LINES = 15
_TAIL_BYTES = 64 * 1024
_CRASH_SCAN_BYTES = 16 * 1024 * 1024


# ---------------------------------------------------------------------------------------------
# Processes: exit status, crash lines, logs, stats


@dataclass(frozen=True)
class Role:
    """One process of a run: the stack playing one role, as the diagnosis sees it."""

    name: str  # "server", "client", "client-1", …
    stack: str
    rc: int | None  # None: still running when the suite stopped it
    log: Path
    ended: float | None = None  # wall-clock time (time.time()) it exited or was stopped
    stats: Path | None = None
    limit: str | None = None  # the cap it hit (udtharness.processes.limit_note)

    @property
    def side(self) -> str:
        return "server" if self.name == "server" else "client"

    @property
    def label(self) -> str:
        """``server libudt``, ``client udt-rs``, ``client-1 udt-rs``."""
        return f"{self.name} {self.stack}"


def exit_text(rc: int | None) -> str:
    """An exit status in words: ``exit 3``, ``killed by SIGSEGV``, ``exit 139 (128 + SIGSEGV)``."""
    if rc is None:
        return "still running (stopped by the suite)"
    if rc < 0:
        return f"killed by {_signame(-rc)}"
    if 128 < rc < 128 + 65 and (name := _signame(rc - 128)).startswith("SIG"):
        return f"exit {rc} (128 + {name}: a shell reporting a signal)"
    return f"exit {rc}"


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


_CRASH = re.compile(
    r"panicked at|Segmentation fault|SIGSEGV|terminate called|^panic: |^fatal error: |"
    r"Traceback \(most recent call last\)|AddressSanitizer|double free|stack smashing|"
    r"fatal runtime error|has overflowed its stack|core dumped|Exception in thread|"
    # bash reporting a child killed by a signal: "entrypoint: line 9:  7092 Aborted   cmd …"
    r"^Aborted|\d+ (Aborted|Bus error|Illegal instruction|Floating point exception|Killed)\b"
)


def crash_line(text: str) -> str | None:
    """The line of a log that shows a crash, with the message that follows it where the runtime
    prints that on the next line (Rust ≥ 1.73 panics, Python tracebacks), or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not _CRASH.search(line):
            continue
        line = line.strip()
        if line.startswith("Traceback"):
            # the exception is the first unindented line after the traceback's frames
            exc = next((x for x in lines[i + 1 :] if x and not x[0].isspace()), "")
            return f"Python exception: {exc.strip()}" if exc else line
        if line.endswith(":") and i + 1 < len(lines) and lines[i + 1].strip():
            line = f"{line} {lines[i + 1].strip()}"
        return line[:300]
    return None


def log_crash(path: Path) -> str | None:
    """The first crash line anywhere in a log (a fatal error is often printed first and followed
    by a dump of every thread), or None; a log over 32 MiB is read at its two ends."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if size <= 2 * _CRASH_SCAN_BYTES:
                raw = f.read()
            else:
                raw = f.read(_CRASH_SCAN_BYTES) + b"\n"
                f.seek(size - _CRASH_SCAN_BYTES)
                raw += f.read()
    except OSError:
        return None
    return crash_line(raw.decode(errors="replace"))


def crashed(rc: int | None, crash: str | None) -> bool:
    """Whether a role crashed, by the adapter contract: a crash line in its log, whatever its exit;
    or an exit the contract does not allow — killed by a signal, 126, or 128 and above (a shell
    reporting a signal). 1–125 is a failure the stack reported; ``rc`` None: the suite stopped it."""
    if crash:
        return True
    return rc is not None and (rc < 0 or rc == 126 or rc >= 128)


def log_tail(path: Path, n: int = TAIL_LINES) -> list[str]:
    """The last ``n`` non-empty lines of a log (each cut to 300 characters); [] if it is missing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line.rstrip()[:300] for line in text.splitlines() if line.strip()]
    return lines[-n:]


# docs/cli.md stats keys (udtharness.cli), in the order a reader wants them: the counts first.
_STATS_KEYS = (
    "summary",
    "t",
    "bytes",
    "pkts_sent",
    "pkts_recv",
    "retrans",
    "losses",
    "acks_sent",
    "acks_recv",
    "naks_sent",
    "naks_recv",
    "rtt_ms",
    "cwnd",
    "flow_window",
)
assert set(_STATS_KEYS) <= set(STATS_KEYS) | set(SUMMARY_KEYS), "a key docs/cli.md does not have"


def last_stats(path: Path) -> dict[str, object] | None:
    """The last line of a stats file that is a JSON object (any keys), or None."""
    for line in reversed(log_tail(path, 5)):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def stats_text(stats: Mapping[str, object]) -> str:
    """``bytes=144144 pkts_recv=99 …``: the keys of docs/cli.md first, then up to eight other
    numbers a stack chose to write."""
    known = [k for k in _STATS_KEYS if k in stats]
    other = [k for k, v in stats.items() if k not in _STATS_KEYS and isinstance(v, int | float)][:8]
    return " ".join(f"{k}={stats[k]}" for k in known + other)


# ---------------------------------------------------------------------------------------------
# The findings


@dataclass
class Diagnosis:
    """Findings (most telling first), and per role its log's last lines and its last stats."""

    findings: list[str] = field(default_factory=list)
    tails: dict[str, list[str]] = field(default_factory=dict)
    stats: dict[str, str] = field(default_factory=dict)
    # the finding that names the side whose invalid packet the failure follows from (no role
    # crashed): a one-line reason leads with it, and marks what the peer did after it "then"
    culprit: str | None = None

    def headline(self, n: int = 3) -> str:
        return "; ".join(self.findings[:n])

    def lines(self) -> list[str]:
        """Everything as text lines, for a report's detail."""
        out = list(self.findings)
        for label, s in self.stats.items():
            out.append(f"{label} last stats: {s}")
        for label, tail in self.tails.items():
            out.append(f"{label} log, last {len(tail)} lines:")
            out += [f"  {line}" for line in tail]
        return out

    def to_json(self) -> dict[str, object]:
        return {"findings": self.findings, "stats": self.stats, "tails": self.tails}


__all__ = [
    "Diagnosis",
    "Role",
    "crash_line",
    "crashed",
    "exit_text",
    "last_stats",
    "log_crash",
    "log_tail",
    "stats_text",
]
