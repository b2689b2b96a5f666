"""What the active testers of the family share (:mod:`udtconf.udt.tester` for UDT4,
:mod:`udtconf.sabul.tester` for SABUL, :mod:`udtconf.frtp.tester` for FRTP): a probe and its
registry, what a probe is given, its result, and the run that leaves the probe's evidence in its
directory — ``probe.pcap`` (what the tester sent and received, written by the tester itself) and
``probe.log`` (the verdict, the notes, and the end of the stack's own log with any crash line,
:mod:`udtconf.diagnosis`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, TypeVar

from udtharness import processes
from udtharness.pcap import PcapWriter
from udtharness.stacks import Stack, stop

from .diagnosis import crashed, exit_text, log_crash, log_tail
from .registry import Registry


class Outcome(StrEnum):
    """A probe's verdict on the stack (its value is what ``probe.log`` and the reports say)."""

    PASS = "pass"
    FAIL = "fail"  # a crash, a hang, corrupted or lost data, a broken rule
    # where the spec allows either ignoring an invalid packet or dropping the connection (4.11
    # drops it): recorded, not failed
    TOLERATED = "tolerated"  # it ignored the packet
    BROKEN = "broken"  # it dropped the connection
    SKIPPED = "skipped"


@dataclass
class ProbeResult:
    id: str
    section: str
    role: str  # role the *stack* played
    outcome: Outcome
    details: str
    notes: list[str] = field(default_factory=list)
    log: Path | None = None  # probe.log: verdict, notes, the end of the stack's log
    pcap: Path | None = None  # probe.pcap: what the tester sent and received

    @property
    def failed(self) -> bool:
        return self.outcome == Outcome.FAIL

    @property
    def verdict(self) -> str:
        """One line: ``outcome — details``."""
        return f"{self.outcome} — {self.details}"


E = TypeVar("E", bound="ProbeEnv")


@dataclass
class Probe(Generic[E]):
    id: str
    section: str
    role: str  # the stack's role
    summary: str
    fn: Callable[[E], ProbeResult]
    testcase: str = "transfer"  # the TESTCASE the stack is started with; the stack must list it


@dataclass
class ProbeEnv:
    """What a probe is given: the stack, the probe's directory, and the recorder of ``probe.pcap``."""

    stack: Stack
    workdir: Path
    probe: Probe[Any]
    recorder: PcapWriter

    def result(self, outcome: Outcome, details: str, notes: list[str] | None = None) -> ProbeResult:
        return ProbeResult(self.probe.id, self.probe.section, self.probe.role, outcome, details, notes or [])


ProbeFn = Callable[[E], ProbeResult]


class Probes(Registry[Probe[E]]):
    """A tester's probes; ``probe`` is the decorator that declares one."""

    def probe(
        self, id: str, section: str, role: str, summary: str, testcase: str = "transfer"
    ) -> Callable[[ProbeFn[E]], ProbeFn[E]]:
        return self.declare(lambda fn: Probe(id, section, role, summary, fn, testcase))


def ended(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The stack's exit status, or None if it was still running after ``timeout`` (then stopped)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        return None


def run_probe(
    stack: Stack,
    p: Probe[E],
    workdir: Path,
    env: type[E],
    *,
    spec: str,
    side: str,
    plays: str,
    errors: tuple[type[Exception], ...],
) -> ProbeResult:
    """Run one probe against a fresh process of ``stack`` in ``workdir`` (emptied first), and
    write its ``probe.log`` and ``probe.pcap`` there.

    ``env`` is what the probe is given, ``spec`` the document its section is of, ``side`` the
    ROLE the stack is started with (its log is ``<side>.log``), ``plays`` how ``probe.log`` names
    the part the stack played, and ``errors`` what a probe may raise that is the stack's failure
    (a timeout, a reset), not the tester's."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    pcap = workdir / "probe.pcap"
    before = len(processes.started())
    with PcapWriter(pcap) as recorder:
        e = env(stack, workdir, p, recorder)
        try:
            res = p.fn(e)
        except errors as exc:
            res = e.result(Outcome.FAIL, f"{type(exc).__name__}: {exc}")
        finally:
            mine = processes.started()[before:]
            for proc in mine:
                stop(proc)  # a probe that forgot one: ended here, and no crash of ours to judge
    _judge_crashes(res, stack.name, mine)
    res.pcap, res.log = pcap, workdir / "probe.log"
    res.log.write_text(
        f"{p.id} ({spec} §{p.section}) against {stack.name} as {plays}, TESTCASE={p.testcase}\n"
        f"{p.summary}\n\n{res.verdict}\n"
        + "".join(f"  {n}\n" for n in res.notes)
        + "".join(_tail_text(stack.name, side, log, workdir) for log in _stack_logs(workdir, side))
    )
    return res


def _stack_logs(workdir: Path, side: str) -> list[Path]:
    """The stack's logs of one probe: ``<side>.log`` in ``workdir``, and where the probe started a
    process per value or connection in subdirectories of its own, each of theirs."""
    top = workdir / f"{side}.log"
    subs = sorted(workdir.glob(f"*/{side}.log"))
    return ([top] if top.exists() or not subs else []) + subs


def _tail_text(name: str, side: str, log: Path, workdir: Path) -> str:
    tail = log_tail(log)
    return f"\n{name} {side} log ({log.relative_to(workdir)}), last {len(tail)} lines:\n" + "".join(
        f"  {line}\n" for line in tail
    )


def crash_of(name: str, proc: processes.StackProcess) -> str | None:
    """How a stack process crashed, in words, or None: its exit, the crash line found anywhere in
    its log, the cap it hit (:func:`~udtconf.diagnosis.crashed`)."""
    crash = log_crash(proc.log)
    limit = processes.limit_note(proc)
    if not (crashed(proc.exit, crash) or limit):
        return None
    words = exit_text(proc.exit) if proc.exit is not None else "stopped by the suite"
    return (
        f"{name} crashed ({words}" + (f", {limit}" if limit else "") + ")" + (f"; {name} log: {crash}" if crash else "")
    )


def _judge_crashes(res: ProbeResult, name: str, procs: list[processes.StackProcess]) -> None:
    """No probe passes a stack that crashed: a crash of any process the probe started fails it
    (noting what the probe alone said), and a failing probe names the crash."""
    crashes = list(dict.fromkeys(c for p in procs if (c := crash_of(name, p))))
    if not crashes:
        return
    said = "; ".join(crashes)
    if res.failed:
        res.details += f"; {said}"
    else:
        res.notes.append(f"the probe alone said: {res.verdict}")
        res.outcome, res.details = Outcome.FAIL, said
