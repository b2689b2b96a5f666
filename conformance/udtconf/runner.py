"""The interop runner: the machinery every protocol's interop run is built on, knowing no
protocol.

A protocol's interop module (:mod:`udtconf.udt.interop` for UDT4, :mod:`udtconf.sabul.interop` for
SABUL and FRTP) provides a :class:`ProtocolRun`: it starts a server stack and a client stack on
loopback, supervises them and judges the run, with what this module offers — the run's
:class:`RunResult`, a started role (:class:`Proc`), and the steps every run shares
(:func:`new_run`, :func:`start`, :func:`supervise`, :func:`end_run`, :func:`unsupported`,
:func:`compare`). A protocol's result type extends :class:`RunResult` with what its trace made
of the capture. :class:`InteropRunner` plays each pair once per session with the run its
``runs`` name for the server's protocol; :data:`udtconf.family.RUNS` is the family's table.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

from udtharness.capture import Capture, can_capture
from udtharness.processes import StackProcess, limit_note
from udtharness.stacks import EXIT_UNSUPPORTED, REPO_ROOT, Stack, stop
from udtharness.testdata import sha256_file

from .diagnosis import Diagnosis, Role, log_crash
from .relay import Relay

RESULTS_DIR = Path(os.environ.get("UDTC_RESULTS") or REPO_ROOT / "results" / "conformance").absolute()

SERVER_GRACE = 10.0  # seconds a server may take to finish after the last client exited
POLL = 0.05  # s between looks at the processes
WATCH_EVERY = 0.5  # s between looks at the growing capture


@dataclass(frozen=True)
class InteropCase:
    """One test case of a protocol's interop run (the adapter contract's ``TESTCASE``): what the
    client sends and how the run is played. A protocol's cases are its ``cases.CASES``
    (:mod:`udtconf.udt.cases`, :mod:`udtconf.sabul.cases`, :mod:`udtconf.frtp.cases`), named as
    the registry names them (:data:`udtharness.stacks.PROTOCOL_TESTCASES`)."""

    name: str
    bytes: int  # the input of each client
    timeout: float = 30.0  # s from the start until the suite kills what still runs
    server_mss: int | None = None  # MSS given to the server's adapter (None: the stack's own)
    client_mss: int | None = None
    relay: bool = False  # through the protocol's relay (its drops, bottleneck or moved sequence space)
    clients: int = 1  # clients at once to one server port
    rendezvous: bool = False  # both sides bind and connect to each other

    @property
    def mss(self) -> dict[str, int]:
        """MSS per role where the case sets one ({} where it sets none)."""
        return {side: m for side, m in (("server", self.server_mss), ("client", self.client_mss)) if m is not None}


def cases(*defined: InteropCase) -> Mapping[str, InteropCase]:
    """A protocol's cases by name, in the order given."""
    return {c.name: c for c in defined}


class RunStatus(StrEnum):
    """How an interop run ended (its value is what ``result.json`` says)."""

    PASS = "pass"  # the data arrived intact and every role ended well
    FAIL = "fail"
    UNSUPPORTED = "unsupported"  # a stack does not claim the case, or a role exited 127
    SKIPPED = "skipped"  # not run: a stack not built, the pair's handshake failed
    # it ran and nothing failed, but it did not exercise what the case is named for (a wrap case
    # whose relay could not move the numbers): not a pass, and nothing the stacks are failed for
    INCONCLUSIVE = "inconclusive"


@dataclass
class RunResult:
    """One run of (server, client, case) and its verdict. A protocol's result type adds what its
    trace made of the capture, as fields with ``repr=False``: they stay out of ``result.json``."""

    server: str
    client: str
    case: str
    status: RunStatus
    reason: str
    logdir: Path
    pcap: Path | None = None
    server_rc: int | None = None
    client_rc: list[int | None] = field(default_factory=list)
    seconds: float = 0.0
    capture_lost: int = 0  # packets the capture tool itself dropped: the capture is incomplete
    dropped: list[int] = field(default_factory=list)
    stopped: str | None = None  # why the suite stopped the run before the case's timeout
    diagnosis: Diagnosis | None = field(default=None, repr=False)  # for a failed run

    @property
    def key(self) -> str:
        return f"{self.server}__{self.client}__{self.case}"

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        d["logdir"] = str(self.logdir)
        d["pcap"] = str(self.pcap) if self.pcap else None
        d["client_rc"] = list(self.client_rc)
        d["dropped"] = len(self.dropped)
        d["diagnosis"] = self.diagnosis.to_json() if self.diagnosis else None
        return d


R = TypeVar("R", bound=RunResult)


class Watch(Protocol):
    """What a protocol reads from the capture while it grows (UDT4's
    :class:`udtconf.udt.diagnosis.WireWatch`): :meth:`poll` reads what was added since the last
    call, :meth:`verdict` says why the run is stuck, or None. ``started``: for each side with a
    role still running, when it started (wall clock)."""

    def poll(self) -> None: ...

    def verdict(self, started: Mapping[str, float], now: float) -> str | None: ...


class ProtocolRun(Protocol):
    """A protocol's interop run: plays ``case`` with ``server`` and ``client`` in ``logdir``,
    capturing the wire when ``capture``, and returns the result (its protocol's type)."""

    def __call__(self, server: Stack, client: Stack, case: str, logdir: Path, *, capture: bool) -> RunResult: ...


class InteropRunner:
    """Runs (server, client, case) once per session and remembers the result: ``runs`` names
    the run that plays a pair whose server speaks a protocol (:data:`udtconf.family.RUNS`)."""

    def __init__(
        self, runs: Mapping[str, ProtocolRun], results_dir: Path = RESULTS_DIR, capture: bool | None = None
    ) -> None:
        self.runs = runs
        self.results_dir = results_dir
        self.capture = can_capture() if capture is None else capture
        self._memo: dict[str, RunResult] = {}

    def run(self, server: Stack, client: Stack, case: str) -> RunResult:
        key = f"{server.name}__{client.name}__{case}"
        if key not in self._memo:
            logdir = self.results_dir / "runs" / key
            self._memo[key] = self.runs[server.protocol](server, client, case, logdir, capture=self.capture)
        return self._memo[key]

    def results(self) -> list[RunResult]:
        return list(self._memo.values())


@dataclass
class Proc:
    """A started role: its process, where it logs, and when it started and ended (wall clock)."""

    name: str
    stack: Stack
    popen: StackProcess
    logdir: Path
    started: float
    ended: float | None = None
    rc: int | None = None  # None while running, and for a role the suite had to stop

    @property
    def side(self) -> str:
        return "server" if self.name == "server" else "client"

    def check(self) -> bool:
        """Whether it has ended (noting when)."""
        if self.ended is None and self.popen.poll() is not None:
            self.ended, self.rc = time.time(), self.popen.returncode
        return self.ended is not None

    def kill(self) -> None:
        """Ends the role and whatever it left running in its process group (also after it exited)."""
        ended = self.check()
        stop(self.popen)
        if not ended:
            self.ended = time.time()

    def role(self) -> Role:
        log = self.logdir / f"{self.side}.log"
        stats = self.logdir / f"stats-{self.side}.jsonl"
        limit = limit_note(self.popen)
        return Role(self.name, self.stack.name, self.rc, log, self.ended, stats if stats.exists() else None, limit)

    def crash(self) -> str | None:
        """Its log's crash line (anywhere in the log), or None."""
        return log_crash(self.logdir / f"{self.side}.log")


def new_run(server: Stack, client: Stack, case: str, logdir: Path, result: type[R]) -> R:
    """A fresh ``logdir`` and the run's ``result``, with a reason where a stack cannot play
    ``case`` (not built: skipped; not in its meta.toml: unsupported)."""
    if logdir.exists():
        shutil.rmtree(logdir)
    logdir.mkdir(parents=True)
    res = result(server.name, client.name, case, RunStatus.SKIPPED, "", logdir)
    for st in (server, client):
        if st.missing():
            res.reason = f"stack {st.name} not built: {', '.join(st.missing())}"
            return res
        if not st.supports(case):
            res.status, res.reason = RunStatus.UNSUPPORTED, f"{st.name} meta.toml does not list {case}"
            return res
    return res


def start(stack: Stack, name: str, case: str, logdir: Path, env: Mapping[str, str | int | Path]) -> Proc:
    """Starts ``stack`` as the role ``name`` ("server", "client", "client-1"…) through its adapter."""
    side = "server" if name == "server" else "client"
    started = time.time()
    return Proc(name, stack, stack.start(side, case, logdir, **env), logdir, started)


def end_run(res: RunResult, procs: list[Proc], relay: Relay | None, cap: Capture | None, t0: float) -> None:
    """Every role stopped, the relay's drops and the capture's own losses recorded."""
    for proc in procs:
        proc.kill()
    if relay:
        relay.close()
        res.dropped = list(relay.dropped)
    if cap:
        cap.stop()
        res.capture_lost = cap.dropped()
    res.seconds = time.monotonic() - t0


def unsupported(res: RunResult, procs: list[Proc], server: Stack, client: Stack) -> bool:
    """Records the exit statuses (the server is ``procs[0]``); True, with the run marked
    unsupported, where a role exited 127 (its TESTCASE not supported)."""
    res.server_rc = procs[0].rc
    res.client_rc = [p.rc for p in procs[1:]]
    if EXIT_UNSUPPORTED not in (res.server_rc, *res.client_rc):
        return False
    who = server.name if res.server_rc == EXIT_UNSUPPORTED else client.name
    res.status, res.reason = RunStatus.UNSUPPORTED, f"{who}: TESTCASE {res.case} not supported (127)"
    return True


def supervise(srv: Proc, clients: list[Proc], deadline: float, watch: Watch | None) -> str | None:
    """Wait for the clients, then for the server, each side at most SERVER_GRACE longer than the
    other (a server that got its data closes within seconds; a client whose server is gone
    cannot succeed); stop at ``deadline`` or as soon as the capture shows the run is stuck.
    Returns why the run was stopped early, or None."""
    server_deadline: float | None = None
    server_gone = False
    next_watch = time.monotonic() + WATCH_EVERY
    while True:
        now = time.monotonic()
        if srv.check() and not server_gone:
            server_gone = True
            deadline = min(deadline, now + SERVER_GRACE)
        running = [c for c in clients if not c.check()]
        if not running:
            if server_deadline is None:
                server_deadline = min(max(deadline, now + 5.0), now + SERVER_GRACE)
            if srv.ended is not None or now >= server_deadline:
                return None
        elif now >= deadline:
            return None
        if watch and now >= next_watch:
            next_watch = now + WATCH_EVERY
            watch.poll()
            started = {"client": min(c.started for c in running)} if running else {}
            if srv.ended is None:
                started["server"] = srv.started
            why = watch.verdict(started, time.time())
            if why:
                return why
        time.sleep(POLL)


def compare(case: str, inputs: list[Path], output: Path) -> list[str]:
    """What is wrong with what the receiving role wrote to ``output`` (a directory of one file
    per connection in ``multiconnect``), given what the sending roles read from ``inputs``."""
    if case == "multiconnect":
        got = sorted(sha256_file(p) if p.is_file() else "missing" for p in output.iterdir()) if output.is_dir() else []
        want = sorted(sha256_file(p) for p in inputs)
        return [] if got == want else [f"server output files {len(got)} do not match the {len(want)} inputs"]
    if not output.is_file():
        return ["server wrote no output file"]
    a, b = inputs[0].read_bytes(), output.read_bytes()
    if a == b:
        return []
    # Lengths may differ: compare the common prefix, else the difference starts at its end.
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return [f"output differs from input ({len(b)} vs {len(a)} bytes, first difference at byte {first})"]
