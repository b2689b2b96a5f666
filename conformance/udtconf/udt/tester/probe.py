"""What every probe of the UDT4 active tester shares: what it is given (:class:`ProbeEnv`), the
stack in the role it needs (:class:`_StackServer`, :class:`_StackClient`), a transfer to the
stack judged byte by byte (:func:`_serve_transfer`), and the run under a deadline
(:func:`run_probe`).

Each probe returns a :class:`ProbeResult` whose :class:`~udtconf.active.Outcome` is ``pass``
(behaved as the spec asks), ``fail`` (crashed, hung, corrupted data, or broke a MUST), or
``tolerated``/``broken`` for inputs where the spec allows either ignoring the packet or
dropping the connection (recorded, not failed).

Each probe starts a fresh process of the stack through its adapter, exactly as the interop
matrix does (docs/conformance/adapter-contract.md, *Active tester*): ``TESTCASE=transfer`` — or
the probe's own :attr:`Probe.testcase` (``multiconnect`` for the ones that open three
connections, ``dgram`` for the DGRAM drop requests) — in the role the probe needs, with the
probe's directory as ``LOGDIR`` (a subdirectory each for the probes that start several). The
probe's directory also gets ``probe.pcap`` (every datagram the tester sent and received,
written by the tester itself, so no root is needed) and ``probe.log`` (the verdict, the notes,
and the end of the stack's own log with any crash line, :mod:`udtconf.diagnosis`).

Every probe runs under a deadline of its own (:data:`PROBE_DEADLINE`, longer for the probes in
:data:`DEADLINES`), above the sum of the waits it may legitimately sit out, and enforced outside
the probe's code: its tester sockets wait for nothing past it (:class:`~udtconf.udt.peer.Wire`
raises :class:`~udtconf.udt.peer.DeadlinePassed`), no stack process is started after it, and a
watchdog stops the stack's processes when it passes. A probe that reaches its deadline fails
with a line that says so and where it was waiting: a stack that never stops sending, or never
answers, cannot hold up a run.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from udtharness import processes
from udtharness.ports import free_udp_port, udp_port_bound
from udtharness.stacks import Stack, stop
from udtharness.testdata import random_file

from ... import active
from ...active import Outcome, ProbeResult
from ...diagnosis import exit_text
from ..cases import CASES
from ..peer import PAYLOAD, Addr, ClientSession, DeadlinePassed, ListenerSession, Wire, connect


@dataclass
class ProbeEnv(active.ProbeEnv):
    deadline: float = float("inf")  # time.monotonic() at which the probe's time is up (run_probe)

    def wire(self, bind: Addr = ("127.0.0.1", 0)) -> Wire:
        """A tester socket whose datagrams go to the probe's pcap, and which waits for nothing
        past the probe's deadline."""
        return Wire(bind, self.recorder, deadline=self.deadline)

    def left(self) -> float:
        """Seconds to the probe's deadline; DeadlinePassed once it has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the probe's deadline passed")
        return left


Probe = active.Probe[ProbeEnv]
MULTI_CONNECTIONS = CASES["multiconnect"].clients  # server/many-connections-one-port: CONNECTIONS


class _StackServer:
    """The stack's ``server`` role on a fresh loopback port, for server-side probes: TESTCASE is
    the probe's (``transfer``: one connection, OUTPUT a file; ``multiconnect``: CONNECTIONS
    connections, OUTPUT a directory)."""

    def __init__(self, env: ProbeEnv, workdir: Path | None = None) -> None:
        env.left()  # no new stack process past the probe's deadline
        self.port = free_udp_port()
        self.addr: Addr = ("127.0.0.1", self.port)
        case = env.probe.testcase
        self.workdir = workdir or env.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        extra: dict[str, str | int | Path] = {}
        if case == "multiconnect":
            self.output = self.workdir / "output"
            self.output.mkdir(exist_ok=True)
            extra["CONNECTIONS"] = MULTI_CONNECTIONS
        else:
            self.output = self.workdir / "output.bin"
        self.proc = env.stack.start(
            "server", case, self.workdir, SERVER_ADDR="127.0.0.1", SERVER_PORT=self.port, OUTPUT=self.output, **extra
        )
        deadline = time.monotonic() + min(5.0, env.left())
        while not udp_port_bound(self.port) and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.02)
        time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout: float = 10.0) -> int | None:
        return active.ended(self.proc, timeout)

    def close(self) -> None:
        stop(self.proc)


def _exit_desc(rc: int | None) -> str:
    if rc is None:
        return "hung (killed after timeout)"
    if rc < 0 or rc >= 128:
        return f"crashed ({exit_text(rc)})"
    return f"exit {rc}"


def _serve_transfer(
    env: ProbeEnv,
    srv: _StackServer,
    payload: bytes,
    sess: ClientSession | None = None,
    wire: Wire | None = None,
    before_send: Callable[[int, bytes], None] | None = None,
    timeout: float = 20.0,
) -> tuple[bool, str]:
    """Finish a tester → stack transfer and check the stack wrote exactly ``payload``."""
    own = wire is None
    wire = wire or env.wire()
    try:
        sess = sess or connect(wire, srv.addr)
        ok = sess.send_stream(payload, before_send=before_send, timeout=timeout, alive=srv.alive)
        sess.shutdown()
        rc = srv.finish(min(timeout, 10.0))
        if not ok:
            return False, f"transfer not acknowledged; stack {_exit_desc(rc)}"
        if rc != 0:
            return False, f"stack {_exit_desc(rc)} after a complete transfer"
        got = srv.output.read_bytes() if srv.output.exists() else b""
        if got != payload:
            return False, f"stack wrote {len(got)} bytes, expected {len(payload)} — data corrupted"
        return True, f"{len(payload)} bytes delivered intact"
    finally:
        if own:
            wire.close()


class _StackClient:
    """The stack's ``client`` role sending INPUT to the tester's listener."""

    def __init__(
        self, env: ProbeEnv, size: int = 400 * PAYLOAD, workdir: Path | None = None, lst: ListenerSession | None = None
    ) -> None:
        env.left()  # no new stack process past the probe's deadline
        self.wire = lst.wire if lst else env.wire()
        self.workdir = workdir or env.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.input = self.workdir / "input.bin"
        random_file(self.input, size, seed=env.probe.id)
        self.payload = self.input.read_bytes()
        self.proc = env.stack.start(
            "client",
            env.probe.testcase,
            self.workdir,
            SERVER_ADDR="127.0.0.1",
            SERVER_PORT=self.wire.addr[1],
            INPUT=self.input,
        )
        self.lst = lst or ListenerSession(self.wire)

    def finish(self, timeout: float = 15.0) -> int | None:
        """Keep receiving and ACKing until the stack exits (or timeout)."""
        deadline = time.monotonic() + timeout
        self.lst.hold_acks = False
        while time.monotonic() < deadline and self.proc.poll() is None:
            self.lst.run(0.1)
        self.lst.run(0.1)
        if self.proc.poll() is None:
            stop(self.proc)
            return None
        return self.proc.returncode

    def close(self) -> None:
        stop(self.proc)
        self.wire.close()


# A probe's deadline: above the sum of the waits it may sit out against a stack that hangs or
# stays silent (a 20 s transfer, 10 s for the stack to exit, 15 s for a sender to finish, 5 s to
# bind, 2 s to stop each process), so that only a tester stuck on the stack meets it.
PROBE_DEADLINE = 60.0
DEADLINES = {  # the probes that start a fresh process for each of six handshakes
    "server/handshake-absurd-mss-ffs": 150.0,  # each: bind 5 s, handshake 1.5 s, 16 KiB 5 s, exit 5 s, stop
    "client/handshake-absurd-mss-ffs": 90.0,  # each: accept 3 s, finish 3 s, exit 1 s, stop
}


def deadline_of(p: Probe) -> float:
    """The probe's deadline, in seconds from its start."""
    return DEADLINES.get(p.id, PROBE_DEADLINE)


def _waiting_in(exc: BaseException) -> str:
    """Where the tester was waiting when its deadline passed: the innermost frame of ours (of a
    module of this package, the probes' or this one)."""
    here = Path(__file__).parent
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent == here]
    return f"in {ours[-1].name}(), tester/{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "at its end"


def _with_deadline(p: Probe, seconds: float) -> Probe:
    """``p`` under its deadline: its wires wait for nothing past it, no stack process starts after
    it, a watchdog stops the processes it started when it passes, and a probe that met it fails
    with a line that says so."""

    def bounded(env: ProbeEnv) -> ProbeResult:
        env.deadline = time.monotonic() + seconds
        before = len(processes.started())
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            for proc in processes.started()[before:]:
                if proc.poll() is None:
                    stop(proc)

        watchdog = threading.Timer(seconds, expire)
        watchdog.daemon = True
        watchdog.start()
        waiting: str | None = None
        try:
            res = p.fn(env)
        except DeadlinePassed as e:
            waiting = _waiting_in(e)
            res = env.result(Outcome.FAIL, "")
        finally:
            watchdog.cancel()
        if waiting is None and not expired.is_set():
            return res
        said = [f"the probe alone said: {res.verdict}"] if waiting is None else []
        where = f", still waiting on the stack {waiting}" if waiting else ""
        return env.result(
            Outcome.FAIL, f"ran into its {seconds:.0f} s deadline{where}: the stack was stopped there", said + res.notes
        )

    return replace(p, fn=bounded)


def run_probe(stack: Stack, p: Probe, workdir: Path, deadline: float | None = None) -> ProbeResult:
    """Run one probe against a fresh process of ``stack`` in ``workdir`` (emptied first), under its
    deadline (:func:`deadline_of`, or ``deadline`` seconds), and write its ``probe.log`` and
    ``probe.pcap`` there."""
    errors = (TimeoutError, ConnectionError)
    bounded = _with_deadline(p, deadline_of(p) if deadline is None else deadline)
    return active.run_probe(stack, bounded, workdir, ProbeEnv, spec="UDT4.md", side=p.role, plays=p.role, errors=errors)
