"""One SABUL interop run: a server stack (the **sender**, listening on TCP) and a client stack
(the **receiver**, connecting) play a TESTCASE on loopback while the suite captures both
channels; then the suite compares the server's INPUT with the client's OUTPUT.

==========  ====================================================================================
handshake   1 KiB: the smallest complete session (block, echo, one DATA packet, teardown)
mss         16 KiB with MSS set (server 1052, client 1280): the receiver proposes a 1252-byte
            packet, the sender's echo lowers it to 1024 (max_loss_length 254), DATA carries 1020
transfer    2 MiB
loss        1 MiB through :class:`~udtconf.sabul.relay.SabulRelay`, which drops DATA 5, 20–21,
            40–59, 99–101, 300 and the last packet (714: only EXP recovers a tail loss) once each
            (:data:`~udtconf.sabul.profile.LOSS_DROPS`)
empty       0 bytes: the echo, then the sender's FIN (SABUL.md §10.1)
==========  ====================================================================================

A protocol built on SABUL runs the same cases under its profile
(:class:`~udtconf.sabul.profile.SabulProfile`: the ``profile`` argument, else the one registered
for the server's protocol): the relay and the trace read its block, the ``loss`` case drops its
:attr:`~udtconf.sabul.profile.SabulProfile.loss_drops`, and the client gets its
:attr:`~udtconf.sabul.profile.SabulProfile.client_env` as well.

:data:`udtconf.family.RUNS` names :func:`run` (or a run built on it) for stacks of SABUL and of
the protocols built on it; it is built on :mod:`udtconf.runner`, and its result
(:class:`SabulRunResult`) carries the SABUL sessions of the capture.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from udtharness.capture import Capture
from udtharness.pcap import read_frames
from udtharness.ports import free_tcp_port, tcp_port_listening
from udtharness.stacks import EXIT_OK, EXIT_UNSUPPORTED, Stack
from udtharness.testdata import random_file

from ..diagnosis import Diagnosis, exit_text, last_stats, log_crash, log_tail, stats_text
from ..runner import SERVER_GRACE, Proc, RunResult, RunStatus, compare, end_run, new_run, start, supervise, unsupported
from . import trace
from .cases import CASES
from .profile import SabulProfile, profile_for
from .relay import SabulRelay

ROLE = {"server": "sender", "client": "receiver"}


@dataclass
class SabulRunResult(RunResult):
    """A SABUL run's result (under any profile), with the sessions its capture shows (on both
    legs of the relay in ``loss``: each judges the side it shows unaltered)."""

    sessions: list[trace.SabulSession] = field(default_factory=list, repr=False)


def run(
    server: Stack, client: Stack, case: str, logdir: Path, *, capture: bool, profile: SabulProfile | None = None
) -> SabulRunResult:
    """One SABUL run (a :class:`~udtconf.runner.ProtocolRun`) under ``profile``, by default the
    one registered for the server's protocol (:func:`~udtconf.sabul.profile.profile_for`)."""
    profile = profile or profile_for(server.protocol)
    res = new_run(server, client, case, logdir, SabulRunResult)
    if res.reason:
        return res
    c = CASES[case]
    source = logdir / "input-0.bin"
    random_file(source, c.bytes, seed=f"{server.protocol}-{case}")
    output = logdir / "output.bin"
    port = free_tcp_port()
    mss = c.mss
    relay: SabulRelay | None = None
    cap: Capture | None = None
    procs: list[Proc] = []
    timeout = c.timeout
    t0 = time.monotonic()
    try:
        if c.relay:
            relay = SabulRelay(("127.0.0.1", port), drop=profile.loss_drops, profile=profile).__enter__()
        if capture:
            res.pcap = logdir / "capture.pcap"
            tcp_ports = [port] + ([relay.address[1]] if relay else [])
            bpf = " or ".join(f"tcp port {p}" for p in tcp_ports) + " or udp"
            cap = Capture(res.pcap, [port], bpf=bpf).__enter__()
        common: dict[str, str | int | Path] = dict(SERVER_ADDR="127.0.0.1", SERVER_PORT=port)
        srv_env = dict(common, INPUT=source, **({"MSS": mss["server"]} if mss else {}))
        srv = start(server, "server", case, logdir / "server", srv_env)
        procs.append(srv)
        if not _wait_listening(port, srv, 5.0):
            srv.check()
            if srv.rc == EXIT_UNSUPPORTED:
                res.status, res.reason = (
                    RunStatus.UNSUPPORTED,
                    f"{server.name} server: TESTCASE {case} not supported (127)",
                )
            else:
                srv.kill()
                res.status = RunStatus.FAIL
                res.reason = (
                    f"server {server.name} (sender) did not listen on TCP port {port} within 5 s ({exit_text(srv.rc)})"
                )
                res.diagnosis = _diagnose([srv])
                res.reason += f"; {res.diagnosis.headline(2)}"
            return res
        cli_env = dict(common, OUTPUT=output, **({"MSS": mss["client"]} if mss else {}))
        cli_env.update(profile.client_env)
        if relay:
            cli_env["SERVER_PORT"] = relay.address[1]
        procs.append(start(client, "client", case, logdir / "client", cli_env))
        res.stopped = supervise(srv, procs[1:], t0 + timeout, None)
    finally:
        end_run(res, procs, relay, cap, t0)
    if unsupported(res, procs, server, client):
        return res
    by_end = sorted(procs, key=lambda p: p.ended or 0.0)  # the first to end is the likeliest cause
    problems = [why for p in by_end if (why := _exit_problem(p, procs, timeout))]
    problems += compare(case, [source], output)
    unwritten = res.pcap.name if res.pcap and not res.pcap.exists() else None
    if unwritten:
        res.pcap = None
    if res.pcap:
        frames = read_frames(res.pcap)
        if relay:  # two legs: each judges the rules of the side it shows unaltered
            res.sessions = trace.sessions(frames, port, frozenset({"sender"}), profile)
            res.sessions += trace.sessions(frames, relay.address[1], frozenset({"receiver"}), profile)
        else:
            res.sessions = trace.sessions(frames, port, profile=profile)
    res.status = RunStatus.FAIL if problems else RunStatus.PASS
    res.reason = "; ".join(problems) or f"{c.bytes} bytes delivered intact"
    if problems:
        res.diagnosis = _diagnose(procs)
        for s in res.sessions:
            leg = "" if s.judges == trace.BOTH else f"{'/'.join(sorted(s.judges))} leg: "
            res.diagnosis.findings.append(f"capture, {leg}{s.summary()}")
        if unwritten:  # capturing was on, and the run ended before the capture was written
            res.diagnosis.findings.append(f"no capture: {unwritten} was not written: no wire symptoms")
        elif res.pcap is None:
            res.diagnosis.findings.append("no capture (capturing needs root): no wire symptoms")
        crashes = [f for f in res.diagnosis.findings if f not in problems]
        res.reason = "; ".join(problems + crashes[:2])
    (logdir / "result.json").write_text(json.dumps(res.to_json(), indent=2, ensure_ascii=False))
    return res


def _wait_listening(port: int, proc: Proc, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tcp_port_listening(port):
            return True
        if proc.popen.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def _exit_problem(p: Proc, procs: list[Proc], timeout: float) -> str | None:
    who = f"{p.name} {p.stack.name} ({ROLE[p.side]})"
    if p.rc == EXIT_OK:
        return f"{who} {exit_text(p.rc)}" if p.crash() else None  # a crash line: a crash all the same
    if p.rc is not None:
        return f"{who} {exit_text(p.rc)}"
    others = [o for o in procs if o is not p]
    if others and all(o.rc is not None for o in others):
        return f"{who} still running {SERVER_GRACE:.0f} s after its peer exited (killed)"
    return f"{who} still running at the {timeout:.0f} s case timeout (killed)"


def _diagnose(procs: list[Proc]) -> Diagnosis:
    """Crash lines, log tails and last stats of each role (the capture's findings come later)."""
    diag = Diagnosis()
    for proc in procs:
        role = proc.role()
        label = f"{role.label} ({ROLE[proc.side]})"
        tail = log_tail(role.log)
        if tail:
            diag.tails[label] = tail
        crash = log_crash(role.log)
        limit = f" ({role.limit})" if role.limit else ""
        if crash:
            diag.findings.append(f"{label} {exit_text(role.rc)}: {crash}{limit}")
        elif limit:
            diag.findings.append(f"{label} {exit_text(role.rc)}{limit}")
        elif tail and role.rc not in (None, EXIT_OK):
            diag.findings.append(f"{label}: {tail[-1]}")
        if role.stats and (s := last_stats(role.stats)):
            diag.stats[label] = stats_text(s)
    return diag
