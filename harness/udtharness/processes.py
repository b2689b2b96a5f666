"""How the suite runs a stack's processes: under limits, accounted for, and never left behind.

Every process of a stack under the adapter contract — an interop role, a probe's peer, the
compliance check — is started here (:func:`start`, through :meth:`~udtharness.stacks.Stack.start`),
and so is every process the testbed starts on a topology host and every live capture
(:mod:`udtharness.capture`):

* in a process group of its own, so that :func:`stop` ends it with whatever it spawned;
* under a **memory cap** (``RLIMIT_DATA``: the private writable memory a process may map — heap,
  anonymous mappings, thread stacks — but not address space a runtime only reserves, as Go's,
  a sanitizer's or glibc's arenas do; ``RLIMIT_AS`` would fail those stacks at start) and a
  **CPU-time cap** (``RLIMIT_CPU``: SIGXCPU, then SIGKILL five seconds later), set by
  ``/bin/sh``'s ``ulimit`` just before it ``exec``\\ s the entrypoint, so the entrypoint keeps
  its PID and everything it starts inherits both. Defaults :data:`DEFAULT_MEM_LIMIT` and
  :data:`DEFAULT_CPU_LIMIT`; ``UDTC_MEM_LIMIT`` (``2G``, ``512M``, ``0`` = none) and
  ``UDTC_CPU_LIMIT`` (seconds, ``0`` = none) change them (``--mem-limit``, ``--cpu-limit`` of
  ``python -m udtconf run``);
* reaped with ``wait4``, so that its peak RSS and CPU time are known (:class:`StackProcess`)
  and a cap it hit is reported as such (:func:`limit_note`);
* marked with ``UDTC_STACK_RUN=<run id>`` in its environment and registered, so that a run
  stopped by SIGINT or SIGTERM ends every process it started — the registered groups first
  (:func:`stop_all`), then whatever still carries the mark, daemons included (:func:`sweep`).

Where it runs and what it sees are the caller's choice, in terms of no protocol: its output
(one log appended to, or stdout and stderr each to a file of its own, or discarded), its
environment, a named network namespace to run in (``netns``: ``ip netns exec``) and the CPUs it
may run on (``cpus``). Limits are the suite's defaults unless given; :data:`UNCAPPED` sets none.
How :func:`stop` ends it (which signals first, how long each is given) is the caller's too.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

MEM_LIMIT_VAR = "UDTC_MEM_LIMIT"
CPU_LIMIT_VAR = "UDTC_CPU_LIMIT"
RUN_ID_VAR = "UDTC_RUN_ID"  # the run a suite process belongs to (set by `udtconf run`)
MARK_VAR = "UDTC_STACK_RUN"  # in every stack process's environment: the run that started it
DEFAULT_MEM_LIMIT = 2 * 1024**3  # bytes: far above what a stack needs for a 4 MiB transfer
DEFAULT_CPU_LIMIT = 300  # s of CPU time: every case's timeout ≤ 60 s, a few busy threads each
CPU_GRACE = 5  # s between SIGXCPU (soft cap) and SIGKILL (hard cap)

RUN_ID = os.environ.get(RUN_ID_VAR) or uuid.uuid4().hex[:12]


class LimitError(ValueError):
    """A limit that cannot be read; the message says how to write one."""


@dataclass(frozen=True)
class Limits:
    """What one stack process may use; ``None``: no cap."""

    mem: int | None = DEFAULT_MEM_LIMIT  # bytes of RLIMIT_DATA
    cpu: int | None = DEFAULT_CPU_LIMIT  # seconds of RLIMIT_CPU

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        mem, cpu = environ.get(MEM_LIMIT_VAR), environ.get(CPU_LIMIT_VAR)
        return cls(
            DEFAULT_MEM_LIMIT if mem is None else parse_size(mem),
            DEFAULT_CPU_LIMIT if cpu is None else parse_seconds(cpu),
        )

    def shell(self) -> str:
        """The ``ulimit`` commands that set these caps (dash and bash alike), each no higher than
        the hard limit the suite itself runs under."""
        cmds = []
        if self.mem is not None:
            cmds.append(f"ulimit -d {max(1, _within(resource.RLIMIT_DATA, self.mem) // 1024)}")
        if self.cpu is not None:
            hard = _within(resource.RLIMIT_CPU, self.cpu + CPU_GRACE)
            cmds.append(f"ulimit -S -t {min(self.cpu, hard)} && ulimit -H -t {hard}")
        return " && ".join(cmds)


UNCAPPED = Limits(mem=None, cpu=None)  # no cap at all: a bulk transfer, a capture, a testbed host's process


def _within(which: int, value: int) -> int:
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$")


def parse_size(text: str) -> int | None:
    """``2G``, ``1.5GiB``, ``512M``, ``4096`` (bytes) → bytes; ``0``/``none``/``off`` → None."""
    if text.strip().lower() in ("0", "none", "off", ""):
        return None
    m = _SIZE.match(text)
    if not m:
        raise LimitError(f"memory limit {text!r}: write a size such as 2G, 512M or 0 (no cap)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def parse_seconds(text: str) -> int | None:
    """``300`` → 300; ``0``/``none``/``off`` → None."""
    if text.strip().lower() in ("0", "none", "off", ""):
        return None
    try:
        value = int(text)
    except ValueError:
        raise LimitError(f"CPU limit {text!r}: write whole seconds such as 300, or 0 (no cap)") from None
    if value < 0:
        raise LimitError(f"CPU limit {text!r}: must not be negative")
    return value


def size_text(n: int) -> str:
    """``2 GiB``, ``1.9 GiB``, ``300 MiB``, ``12 KiB``."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


class StackProcess(subprocess.Popen[bytes]):
    """A started entrypoint. ``poll``/``wait`` reap it with ``wait4``, keeping its resource use;
    ``stopped`` is True when the suite ended it while it was still running. ``log``: the file its
    diagnostics went to (the combined log; else its stderr's file, else its stdout's; else
    ``/dev/null``)."""

    def __init__(self, argv: Sequence[str], *, log: Path, limits: Limits, **kwargs: object) -> None:
        super().__init__(argv, **kwargs)  # type: ignore[call-overload]
        self.log = log
        self.limits = limits
        self.rusage: resource.struct_rusage | None = None
        self.stopped = False
        _STARTED.append(self)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if timeout is None:
            self._reap(0)
        else:
            deadline, delay = time.monotonic() + timeout, 0.0005
            while not self._reap(os.WNOHANG):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, flags: int) -> bool:
        try:
            pid, status, usage = os.wait4(self.pid, flags)
        except ChildProcessError:  # reaped by someone else: the status is lost
            if self.returncode is None:
                self.returncode = 0
            return True
        if pid == 0:
            return False
        self.returncode, self.rusage = os.waitstatus_to_exitcode(status), usage
        return True

    @property
    def peak_rss(self) -> int | None:
        """Bytes: the largest resident set of the entrypoint or a child it waited for."""
        return self.rusage.ru_maxrss * 1024 if self.rusage else None

    @property
    def cpu_seconds(self) -> float | None:
        return self.rusage.ru_utime + self.rusage.ru_stime if self.rusage else None

    @property
    def exit(self) -> int | None:
        """The exit status as the stack's own doing: None while running or when the suite stopped it."""
        return None if self.stopped else self.poll()


_STARTED: list[StackProcess] = []


def started() -> list[StackProcess]:
    """Every stack process this interpreter started, oldest first."""
    return list(_STARTED)


def start(
    command: Path | Sequence[str],
    env: Mapping[str, str],
    log: Path | None = None,
    limits: Limits | None = None,
    cwd: Path | None = None,
    *,
    stdout: Path | None = None,
    stderr: Path | None = None,
    netns: str | None = None,
    cpus: Collection[int] | None = None,
) -> StackProcess:
    """Start ``command`` (an entrypoint, or a whole command line) under ``limits`` (default:
    :meth:`Limits.from_env`; :data:`UNCAPPED` for none), with the environment ``env``, stdin
    closed, in a new session (so :func:`stop` ends it with everything it spawned), marked with
    this run's id (so :func:`sweep` finds it after a crash).

    Output: with ``log``, stdout and stderr are both appended to it. Without, ``stdout`` and
    ``stderr`` each go to a file of their own, made anew (one file, in the order written, where
    both name the same path), and either is discarded where None. ``log`` and ``stdout``/``stderr``
    do not go together.

    ``netns``: run it in that named network namespace (``ip netns exec``, outermost: ``ip`` enters
    the namespace and execs the command in place, so the command keeps its PID and its group).
    ``cpus``: the CPUs it, and everything it starts, may run on (its affinity is set in the child
    before the exec); None or empty: the caller's."""
    if log is not None and (stdout is not None or stderr is not None):
        raise ValueError("start: stdout and stderr go to log, or each to its own file, not both")
    limits = Limits.from_env() if limits is None else limits
    caps = limits.shell()
    cmd = [str(command)] if isinstance(command, Path) else [str(a) for a in command]
    argv = ["/bin/sh", "-c", f'{caps} && exec "$@"', "sh", *cmd] if caps else cmd
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    with _outputs(log, stdout, stderr) as (out, err):
        return StackProcess(
            argv,
            log=log or stderr or stdout or Path(os.devnull),
            limits=limits,
            env={**env, MARK_VAR: RUN_ID},
            cwd=cwd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: killable as a whole
            preexec_fn=_child_setup(cpus),
        )


# The signals :func:`stop` may end a process with. A runner started as a background job of a
# non-interactive shell (CI's, `cmd &`) has SIGINT and SIGQUIT ignored, and an ignored
# disposition survives exec: a stack's shell adapter could then never trap SIGINT (POSIX), and
# a graceful stop would fall through to SIGTERM. The child gets them back at their default.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGQUIT)


def _child_setup(cpus: Collection[int] | None) -> Callable[[], None]:
    """The child's ``preexec_fn``: :data:`_STOP_SIGNALS` at their default, pinned to ``cpus``."""
    pin = pinned_to(cpus)

    def setup() -> None:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        if pin is not None:
            pin()

    return setup


@contextmanager
def _outputs(
    log: Path | None, stdout: Path | None, stderr: Path | None
) -> Iterator[tuple[IO[bytes] | int, IO[bytes] | int]]:
    """The child's stdout and stderr as :func:`start` describes them; the files are closed here
    once the child has its own copies."""
    with ExitStack() as files:
        out: IO[bytes] | int = subprocess.DEVNULL
        err: IO[bytes] | int = subprocess.DEVNULL
        if log is not None:
            out, err = files.enter_context(open(log, "ab")), subprocess.STDOUT
        else:
            if stdout is not None:
                out = files.enter_context(open(stdout, "wb"))
            if stderr is not None:
                same = stdout is not None and Path(stderr).absolute() == Path(stdout).absolute()
                err = subprocess.STDOUT if same else files.enter_context(open(stderr, "wb"))
        yield out, err


def pinned_to(cpus: Collection[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that confines the child (and what it execs and starts) to ``cpus``; None
    for None or no CPUs (the child keeps the caller's)."""
    if not cpus:
        return None
    mask = frozenset(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, mask)

    return pin


def stop(p: subprocess.Popen[bytes], grace: float = 2.0, signals: Sequence[int] = (signal.SIGTERM,)) -> int | None:
    """Terminate a started entrypoint and everything it spawned (its process group), also when
    the entrypoint itself has already exited and left children behind: each of ``signals`` in
    turn to the group, with SIGCONT (a stopped process acts on neither that signal nor its own
    exit until continued), each given ``grace`` seconds for the entrypoint to exit; then SIGKILL
    to whatever is left of the group once the entrypoint is gone or the last grace has passed.
    ``signals=(SIGINT, SIGTERM)``: a tool that writes out what it has on SIGINT (tcpdump,
    dumpcap, a sender's final stats) gets the chance first."""
    if isinstance(p, StackProcess) and p.poll() is None:
        p.stopped = True
    for sig in signals:
        for s in (sig, signal.SIGCONT):
            _killpg(p.pid, s)
        try:
            p.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            pass
    _killpg(p.pid, signal.SIGKILL)
    try:
        return p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        return p.poll()


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone (PermissionError: its id now belongs to someone else's group)


def stop_all() -> None:
    """Kill the group of every registered process not yet reaped (its id is still ours)."""
    for p in _STARTED:
        if p.returncode is None:
            p.stopped = p.stopped or p.poll() is None
            _killpg(p.pid, signal.SIGKILL)
            try:
                p.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass


def marked(run_id: str = RUN_ID) -> list[int]:
    """The PIDs of the live processes whose environment carries ``run_id``'s mark."""
    mark = f"{MARK_VAR}={run_id}".encode()
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or not ours to read
        if state != b"Z" and mark in env.split(b"\0"):
            out.append(int(entry.name))
    return out


def sweep(run_id: str = RUN_ID) -> list[int]:
    """SIGKILL every live process marked with ``run_id`` (and its group); returns their PIDs."""
    found = marked(run_id)
    for pid in found:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return found


def cleanup() -> None:
    """Every process this run started, ended: the registered groups, then anything marked."""
    stop_all()
    sweep()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)  # one interruption; the cleanup must not be cut short
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def interrupt_on_sigterm() -> None:
    """Make SIGTERM end a pytest session as Ctrl-C does (its cleanup runs), not kill it outright."""
    signal.signal(signal.SIGTERM, _interrupt)


def run_supervised(argv: Sequence[str], env: Mapping[str, str], cwd: Path, grace: float = 20.0) -> tuple[int, int]:
    """Run ``argv`` (the pytest session) to its end; on SIGINT or SIGTERM pass SIGTERM on, give it
    ``grace`` seconds to stop its stacks, then kill it; afterwards kill whatever process of the
    run (``env``'s :data:`RUN_ID_VAR`) is left. Returns (its exit status, the signal received or 0)."""
    got: list[tuple[int, float]] = []  # (signal, when)
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, frame: FrameType | None) -> None:
        got.append((signum, time.monotonic()))
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd)
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if got and time.monotonic() - got[0][1] > grace:
                    proc.kill()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        sweep(env.get(RUN_ID_VAR, RUN_ID))
    return rc, got[0][0] if got else 0


# ---------------------------------------------------------------------------------------------
# What a cap did


def limit_note(p: StackProcess) -> str | None:
    """Which cap a process that ended on its own hit, in words with its peak RSS, or None.

    The CPU cap shows as SIGXCPU (or SIGKILL after the grace) with the CPU time at the cap. The
    memory cap shows as a failed exit with a peak RSS of at least half the cap: past the cap an
    allocation fails, and the runtime says so in its own words (a MemoryError, ``bad_alloc``, Go's
    ``out of memory``), which the crash line shows — a process that merely prints "out of memory"
    is not blamed on the cap. A SIGKILL the suite did not send is likely the kernel's OOM killer's."""
    rc, rss, cpu = p.exit, p.peak_rss, p.cpu_seconds
    if rc is None or rc == 0:
        return None
    peak = f"peak RSS {size_text(rss)}" if rss is not None else "peak RSS unknown"
    cap_cpu, cap_mem = p.limits.cpu, p.limits.mem
    if cap_cpu is not None and cpu is not None and cpu >= cap_cpu - 1 and rc in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"exceeded its CPU-time cap of {cap_cpu} s ({cpu:.0f} s used); {peak}"
    if cap_mem is not None and rss is not None and rss >= cap_mem // 2:
        return f"exceeded its memory cap of {size_text(cap_mem)}; {peak}"
    if rc == -signal.SIGKILL:
        return f"a SIGKILL the suite did not send: the kernel's OOM killer?; {peak}"
    return None


__all__ = [
    "CPU_LIMIT_VAR",
    "DEFAULT_CPU_LIMIT",
    "DEFAULT_MEM_LIMIT",
    "MARK_VAR",
    "MEM_LIMIT_VAR",
    "RUN_ID",
    "RUN_ID_VAR",
    "LimitError",
    "Limits",
    "UNCAPPED",
    "StackProcess",
    "cleanup",
    "interrupt_on_sigterm",
    "limit_note",
    "marked",
    "parse_seconds",
    "parse_size",
    "pinned_to",
    "run_supervised",
    "size_text",
    "start",
    "started",
    "stop",
    "stop_all",
    "sweep",
]
