"""One interop run: a server stack and a client stack play a TESTCASE on loopback while the
suite captures the server's UDP port, then compares the files and decodes the capture.

The data always flows client → server. Per test case:

==============  =================================================================================
handshake       1 KiB, STREAM: connection set-up, a one-packet message, close
mss             16 KiB, STREAM with MSS negotiation (server MSS=1052, client MSS=1280: the
                connection uses 1052, so payloads are cut at 1008 bytes, UDT4.md §6.1)
transfer        2 MiB STREAM bulk
dgram           1 MiB in DGRAM (message) mode
rendezvous      256 KiB, both sides bind and connect to each other (UDT_RENDEZVOUS)
loss            1 MiB STREAM through :class:`~udtconf.relay.LossRelay`, which drops chosen packets
                (single, a run of 2, a long run, a run of 3) and forms a 3000 packet/s drop-tail
                bottleneck (64-packet queue)
wrap            1 MiB STREAM through the relay, which moves the sequence space so that the server
                sees the 2^31 wrap 100 packets in (UDT4.md §4), with three drops around it
close           64 KiB then a graceful close: both roles must exit 0 and a Shutdown is on the wire
multiconnect    3 clients at once to one server port (OUTPUT is a directory, one file per connection)
==============  =================================================================================

A run that fails carries a :class:`~udtconf.diagnosis.Diagnosis` (crash lines, log tails, what
the capture shows); a run whose capture shows a role deaf or the ACK number stalled is stopped
early (:class:`~udtconf.diagnosis.WireWatch`) instead of sitting out the case's timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from udtharness.capture import Capture, can_capture
from udtharness.pcap import read_udp
from udtharness.ports import free_udp_port, udp_port_bound
from udtharness.processes import StackProcess, limit_note
from udtharness.stacks import EXIT_OK, EXIT_UNSUPPORTED, REPO_ROOT, Stack, stop
from udtharness.testdata import random_file, sha256_file

from .checks import Context
from .diagnosis import Diagnosis, Role, WireWatch, diagnose, exit_text, log_crash
from .relay import LossRelay, Relay, wrap_target
from .trace import Connection, connections

if TYPE_CHECKING:
    from .sabul.trace import SabulSession

RESULTS_DIR = Path(os.environ.get("UDTC_RESULTS") or REPO_ROOT / "results" / "conformance").absolute()

CASE_BYTES = {
    "handshake": 1024,
    "transfer": 2 * 1024 * 1024,
    "dgram": 1024 * 1024,
    "rendezvous": 256 * 1024,
    "loss": 1024 * 1024,
    "wrap": 1024 * 1024,
    "close": 64 * 1024,
    "mss": 16 * 1024,
    "multiconnect": 128 * 1024,
}
CASE_TIMEOUT = {"rendezvous": 45.0, "loss": 60.0}
# MSS per role where a case sets it (the contract's MSS variable); the connection uses the min (§6.1).
CASE_MSS = {"mss": {"server": 1052, "client": 1280}}
LOSS_DROPS = [5, 20, 21, *range(40, 60), 99, 100, 101, 300]
LOSS_RATE_PPS = 3000.0  # ≈ 35 Mb/s bottleneck: makes the sender's pacing (and packet pairs) visible
LOSS_QUEUE = 64
WRAP_AT = 100  # the server sees 0x7fffffff at offset 99 and 0x00000000 at offset 100
# 0x7ffffffe lost: the receiver's loss list and ACK number stay before the wrap while 0x7fffffff
# and 0x00000000 arrive in order across it; then 0x00000001–2 lost (a NAK range after the wrap),
# so the loss list spans the wrap and the ACK number jumps across it when the holes fill.
WRAP_DROPS = [WRAP_AT - 2, WRAP_AT + 1, WRAP_AT + 2]
RELAY_CASES = ("loss", "wrap")
MULTI_CONNECTIONS = 3
SERVER_GRACE = 10.0  # seconds a server may take to finish after the last client exited
POLL = 0.05  # s between looks at the processes
WATCH_EVERY = 0.5  # s between looks at the growing capture


@dataclass
class RunResult:
    server: str
    client: str
    case: str
    status: str  # "pass" | "fail" | "unsupported" | "skipped"
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
    conns: list[Connection] = field(default_factory=list, repr=False)
    client_leg: Connection | None = field(default=None, repr=False)  # relay cases: client ↔ relay
    sabul: list[SabulSession] = field(default_factory=list, repr=False)  # SABUL runs: the captured sessions

    @property
    def key(self) -> str:
        return f"{self.server}__{self.client}__{self.case}"

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        for k in ("conns", "client_leg", "diagnosis", "sabul"):
            d.pop(k)
        d["logdir"] = str(self.logdir)
        d["pcap"] = str(self.pcap) if self.pcap else None
        d["dropped"] = len(self.dropped)
        d["diagnosis"] = self.diagnosis.to_json() if self.diagnosis else None
        return d


@dataclass
class _Proc:
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


class InteropRunner:
    """Runs (server, client, case) once per session and remembers the result. A subclass may
    change the data sizes (``case_bytes``) and the relay of the relay cases (``_relay``)."""

    case_bytes: dict[str, int] = CASE_BYTES

    def __init__(self, results_dir: Path = RESULTS_DIR, capture: bool | None = None) -> None:
        self.results_dir = results_dir
        self.capture = can_capture() if capture is None else capture
        self._memo: dict[str, RunResult] = {}

    def run(self, server: Stack, client: Stack, case: str) -> RunResult:
        key = f"{server.name}__{client.name}__{case}"
        if key not in self._memo:
            logdir = self.results_dir / "runs" / key
            if server.protocol in ("sabul", "frtp"):
                from .sabul import interop as sabul_interop  # it builds on this module

                self._memo[key] = sabul_interop.run(self, server, client, case, logdir)
            else:
                self._memo[key] = self._run(server, client, case, logdir)
        return self._memo[key]

    def results(self) -> list[RunResult]:
        return list(self._memo.values())

    # -----------------------------------------------------------------------------------------

    def _run(self, server: Stack, client: Stack, case: str, logdir: Path) -> RunResult:
        res = self._new_run(server, client, case, logdir)
        if res.reason:
            return res

        n_clients = MULTI_CONNECTIONS if case == "multiconnect" else 1
        inputs = [logdir / f"input-{i}.bin" for i in range(n_clients)]
        for i, p in enumerate(inputs):
            random_file(p, self.case_bytes[case], seed=f"{case}-{i}")
        output = logdir / ("output" if case == "multiconnect" else "output.bin")
        if case == "multiconnect":
            output.mkdir()

        sport = free_udp_port()
        cport = free_udp_port() if case == "rendezvous" else None
        ports = [sport] + ([cport] if cport else [])
        relay: LossRelay | None = None
        cap: Capture | None = None
        procs: list[_Proc] = []
        mss = CASE_MSS.get(case, {})
        t0_wall, t0 = time.time(), time.monotonic()
        try:
            if case in RELAY_CASES:
                relay = self._relay(case, ("127.0.0.1", sport), None if self.capture else logdir / "relay.pcap")
                ports.append(relay.address[1])
            if self.capture:
                res.pcap = logdir / "capture.pcap"
                cap = Capture(res.pcap, ports).__enter__()
            # CLIENT_* only where the client binds a chosen address: rendezvous (the contract)
            common: dict[str, str | int | Path] = dict(SERVER_ADDR="127.0.0.1", SERVER_PORT=sport)
            if cport:
                common.update(CLIENT_ADDR="127.0.0.1", CLIENT_PORT=cport)
            srv_env = dict(common, OUTPUT=output, CONNECTIONS=n_clients, **_mss_env(mss, "server"))
            srv = self._start(server, "server", case, logdir / "server", srv_env)
            procs.append(srv)
            if not self._wait_bound(sport, srv.popen, 5.0):
                srv.check()
                if srv.rc == EXIT_UNSUPPORTED:
                    res.status, res.reason = "unsupported", f"{server.name} server: TESTCASE {case} not supported (127)"
                else:
                    res.status = "fail"
                    res.reason = f"server {server.name} did not bind UDP port {sport} within 5 s ({exit_text(srv.rc)})"
                    srv.kill()
                    res.diagnosis = diagnose([srv.role()], [], t0_wall)
                    res.reason += f"; {res.diagnosis.headline(2)}"
                return res
            if relay:
                common = dict(common, SERVER_PORT=relay.address[1])
            for i in range(n_clients):
                name = f"client-{i}" if n_clients > 1 else "client"
                env = dict(common, INPUT=inputs[i], **_mss_env(mss, "client"))
                procs.append(self._start(client, name, case, logdir / name, env))
            capfile = res.pcap or (logdir / "relay.pcap" if relay else None)
            names = {"server": server.name, "client": client.name}
            entry = relay.address if relay else None
            watch = WireWatch(capfile, ("127.0.0.1", sport), entry, names) if capfile else None
            res.stopped = self._supervise(srv, procs[1:], t0 + CASE_TIMEOUT.get(case, 30.0), watch)
        finally:
            self._end_run(res, procs, relay, cap, t0)
        if self._unsupported(res, procs, server, client):
            return res
        timeout = CASE_TIMEOUT.get(case, 30.0)
        problems = [f"stopped early after {res.seconds:.1f} s: {res.stopped}"] if res.stopped else []
        # the role that ended first (on its own) is the likeliest cause: its exit comes first
        by_end = sorted(procs, key=lambda p: p.ended or 0.0)
        for proc in by_end:
            if why := self._exit_problem(proc, res.stopped, timeout, res.server_rc, res.client_rc):
                problems.append(why)
        problems.extend(self._compare(case, inputs, output))
        capfile = res.pcap if res.pcap and res.pcap.exists() else (logdir / "relay.pcap" if relay else None)
        if capfile and capfile.exists():
            res.pcap = capfile
            datagrams = read_udp(capfile)
            res.conns = [c for c in connections(datagrams, ("127.0.0.1", sport)) if c.records]
            if relay:
                legs = [c for c in connections(datagrams, relay.address) if c.records]
                res.client_leg = legs[0] if legs else None
            problems.extend(_mss_problems(res.conns, mss, server.name, client.name))
        res.status = "fail" if problems else "pass"
        res.reason = "; ".join(problems) or f"{sum(p.stat().st_size for p in inputs)} bytes delivered intact"
        if problems:
            ctx = Context(case, set(res.dropped), res.client_leg)  # the wire rules name who spoiled the exchange
            res.diagnosis = diagnose([p.role() for p in procs], res.conns, t0_wall, res.client_leg, res.stopped, ctx)
            # a crash line (or the cap it hit) replaces the bare exit status it explains
            findings = res.diagnosis.findings
            problems = [next((f for f in findings if f.startswith((f"{p}: ", f"{p} ("))), p) for p in problems]
            # the side whose invalid packet the failure follows from leads; a stop came after it
            lead = [res.diagnosis.culprit] if res.diagnosis.culprit else []
            if lead and res.stopped:
                problems[0] = f"then {problems[0]}"
            more = [f for f in findings if f not in problems + lead][:3]
            res.reason = "; ".join(lead + problems + more)
        (logdir / "result.json").write_text(json.dumps(res.to_json(), indent=2, ensure_ascii=False))
        return res

    @staticmethod
    def _relay(case: str, server: tuple[str, int], capture: Path | None) -> LossRelay:
        if case == "wrap":
            relay = LossRelay(server, drop=WRAP_DROPS, isn_target=wrap_target(WRAP_AT), capture=capture)
        else:
            relay = LossRelay(server, drop=LOSS_DROPS, capture=capture, rate_pps=LOSS_RATE_PPS, queue=LOSS_QUEUE)
        return relay.__enter__()

    @staticmethod
    def _new_run(server: Stack, client: Stack, case: str, logdir: Path) -> RunResult:
        """A fresh ``logdir`` and the run's result, with a reason where a stack cannot play
        ``case`` (not built: skipped; not in its meta.toml: unsupported)."""
        if logdir.exists():
            shutil.rmtree(logdir)
        logdir.mkdir(parents=True)
        res = RunResult(server.name, client.name, case, "skipped", "", logdir)
        for st in (server, client):
            if st.missing():
                res.reason = f"stack {st.name} not built: {', '.join(st.missing())}"
                return res
            if not st.supports(case):
                res.status, res.reason = "unsupported", f"{st.name} meta.toml does not list {case}"
                return res
        return res

    @staticmethod
    def _end_run(res: RunResult, procs: list[_Proc], relay: Relay | None, cap: Capture | None, t0: float) -> None:
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

    @staticmethod
    def _unsupported(res: RunResult, procs: list[_Proc], server: Stack, client: Stack) -> bool:
        """Records the exit statuses (the server is ``procs[0]``); True, with the run marked
        unsupported, where a role exited 127 (its TESTCASE not supported)."""
        res.server_rc = procs[0].rc
        res.client_rc = [p.rc for p in procs[1:]]
        if EXIT_UNSUPPORTED not in (res.server_rc, *res.client_rc):
            return False
        who = server.name if res.server_rc == EXIT_UNSUPPORTED else client.name
        res.status, res.reason = "unsupported", f"{who}: TESTCASE {res.case} not supported (127)"
        return True

    @staticmethod
    def _start(stack: Stack, name: str, case: str, logdir: Path, env: dict[str, str | int | Path]) -> _Proc:
        side = "server" if name == "server" else "client"
        started = time.time()
        return _Proc(name, stack, stack.start(side, case, logdir, **env), logdir, started)

    @staticmethod
    def _supervise(srv: _Proc, clients: list[_Proc], deadline: float, watch: WireWatch | None) -> str | None:
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

    @staticmethod
    def _exit_problem(
        p: _Proc, stopped: str | None, timeout: float, server_rc: int | None, client_rcs: list[int | None]
    ) -> str | None:
        """What is wrong with how a role ended, or None. A role that exited 0 with a crash line in
        its log crashed all the same (a thread died, the process went on)."""
        if p.rc == EXIT_OK:
            return f"{p.name} {p.stack.name} {exit_text(p.rc)}" if p.crash() else None
        if p.rc is None and stopped:
            return None  # a role the suite stopped early: the reason says why
        if p.rc is not None:
            return f"{p.name} {p.stack.name} {exit_text(p.rc)}"
        if p.side == "server" and all(rc == EXIT_OK for rc in client_rcs):
            return (
                f"server {p.stack.name} still running {SERVER_GRACE:.0f} s after the client finished (killed): "
                "it did not exit after the peer closed"
            )
        if p.side == "server" and None not in client_rcs:
            return (
                f"server {p.stack.name} still running {SERVER_GRACE:.0f} s after the client failed (killed; a "
                "receiver notices a vanished peer only by its EXP timer, §9.4)"
            )
        if p.side == "client" and server_rc is not None:
            return f"{p.name} {p.stack.name} still running {SERVER_GRACE:.0f} s after the server exited (killed)"
        return f"{p.name} {p.stack.name} still running at the {timeout:.0f} s case timeout (killed)"

    @staticmethod
    def _compare(case: str, inputs: list[Path], output: Path) -> list[str]:
        if case == "multiconnect":
            got = (
                sorted(sha256_file(p) if p.is_file() else "missing" for p in output.iterdir())
                if output.is_dir()
                else []
            )
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

    @staticmethod
    def _wait_bound(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if udp_port_bound(port):
                time.sleep(0.05)
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False


def _mss_env(mss: dict[str, int], side: str) -> dict[str, int]:
    return {"MSS": mss[side]} if side in mss else {}


def _mss_problems(conns: list[Connection], mss: dict[str, int], server: str, client: str) -> list[str]:
    """Whether each side's handshakes carry the MSS the case set (the adapter passed MSS on to
    the stack): the client's requests its own, the server's final response min(client, server)
    (UDT4.md §6.1). Nothing to say without handshakes."""
    if not mss:
        return []
    out = []
    want_resp = min(mss.values())
    for conn in conns:
        req = [h.mss for _, h in conn.handshakes("client") if h.req_type in (1, -1)]
        resp = [h.mss for _, h in conn.handshakes("server") if h.req_type == -1]
        if req and any(m != mss["client"] for m in req):
            out.append(
                f"client {client} ignored MSS={mss['client']}: its handshake requests carry MSS {sorted(set(req))} "
                "(the adapter must set UDT_MSS from MSS)"
            )
        if resp and resp[0] != want_resp:
            out.append(
                f"server {server}'s handshake response carries MSS {resp[0]}, expected min(client {mss['client']}, "
                f"server {mss['server']}) = {want_resp} (§6.1; the adapter must set UDT_MSS from MSS)"
            )
    return out
