"""UDT4's interop run (:data:`run`, on :mod:`udtconf.runner`): a server stack and a client stack
play a TESTCASE on loopback while the suite captures the server's UDP port, then compares the
files and decodes the capture into :class:`UdtRunResult`'s connections.

The data always flows client → server; the cases are :data:`udtconf.udt.cases.CASES`.

A run that fails carries a :class:`~udtconf.diagnosis.Diagnosis` (crash lines, log tails, what
the capture shows: :mod:`udtconf.udt.diagnosis`); a run whose capture shows a role deaf or the
ACK number stalled is stopped early (:class:`~udtconf.udt.diagnosis.WireWatch`) instead of
sitting out the case's timeout.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from udtharness.capture import Capture
from udtharness.pcap import read_udp
from udtharness.ports import free_udp_port, udp_port_bound
from udtharness.stacks import EXIT_OK, EXIT_UNSUPPORTED, Stack
from udtharness.testdata import random_file

from ..diagnosis import exit_text
from ..runner import (
    SERVER_GRACE,
    InteropCase,
    Proc,
    RunResult,
    RunStatus,
    compare,
    end_run,
    new_run,
    start,
    supervise,
    unsupported,
)
from .cases import CASES
from .checks import Context
from .diagnosis import NO_CAPTURE, WireWatch, diagnose
from .relay import LossRelay, wrap_target
from .trace import Connection, connections

LOSS_DROPS = [5, 20, 21, *range(40, 60), 99, 100, 101, 300]
LOSS_RATE_PPS = 3000.0  # ≈ 35 Mb/s bottleneck: makes the sender's pacing (and packet pairs) visible
LOSS_QUEUE = 64
WRAP_AT = 100  # the server sees 0x7fffffff at offset 99 and 0x00000000 at offset 100
# 0x7ffffffe lost: the receiver's loss list and ACK number stay before the wrap while 0x7fffffff
# and 0x00000000 arrive in order across it; then 0x00000001–2 lost (a NAK range after the wrap),
# so the loss list spans the wrap and the ACK number jumps across it when the holes fill.
WRAP_DROPS = [WRAP_AT - 2, WRAP_AT + 1, WRAP_AT + 2]


@dataclass
class UdtRunResult(RunResult):
    """A UDT4 run's result, with the connections its capture shows."""

    conns: list[Connection] = field(default_factory=list, repr=False)
    client_leg: Connection | None = field(default=None, repr=False)  # relay cases: client ↔ relay


RelayFactory = Callable[[str, tuple[str, int], Path | None], LossRelay]


def case_relay(case: str, server: tuple[str, int], capture: Path | None) -> LossRelay:
    """The started relay of a relay case (``loss``, ``wrap``) in front of ``server``."""
    if case == "wrap":
        relay = LossRelay(server, drop=WRAP_DROPS, isn_target=wrap_target(WRAP_AT), capture=capture)
    else:
        relay = LossRelay(server, drop=LOSS_DROPS, capture=capture, rate_pps=LOSS_RATE_PPS, queue=LOSS_QUEUE)
    return relay.__enter__()


class UdtRun:
    """UDT4's interop run (a :class:`~udtconf.runner.ProtocolRun`). A variant may change the
    cases (``cases``: e.g. a case's data size) and the relay of the relay cases (``relay``), as
    :class:`udtconf.udt.recovery.RecoveryRunner` does."""

    def __init__(self, cases: Mapping[str, InteropCase] = CASES, relay: RelayFactory = case_relay) -> None:
        self.cases = cases
        self.relay = relay

    def __call__(self, server: Stack, client: Stack, case: str, logdir: Path, *, capture: bool) -> UdtRunResult:
        res = new_run(server, client, case, logdir, UdtRunResult)
        if res.reason:
            return res

        c = self.cases[case]
        n_clients = c.clients
        inputs = [logdir / f"input-{i}.bin" for i in range(n_clients)]
        for i, p in enumerate(inputs):
            random_file(p, c.bytes, seed=f"{case}-{i}")
        output = logdir / ("output" if n_clients > 1 else "output.bin")  # a directory, a file per connection
        if n_clients > 1:
            output.mkdir()

        sport = free_udp_port()
        cport = free_udp_port() if c.rendezvous else None
        ports = [sport] + ([cport] if cport else [])
        relay: LossRelay | None = None
        cap: Capture | None = None
        procs: list[Proc] = []
        mss = c.mss
        t0_wall, t0 = time.time(), time.monotonic()
        try:
            if c.relay:
                relay = self.relay(case, ("127.0.0.1", sport), None if capture else logdir / "relay.pcap")
                ports.append(relay.address[1])
            if capture:
                res.pcap = logdir / "capture.pcap"
                cap = Capture(res.pcap, ports).__enter__()
            # CLIENT_* only where the client binds a chosen address: rendezvous (the contract)
            common: dict[str, str | int | Path] = dict(SERVER_ADDR="127.0.0.1", SERVER_PORT=sport)
            if cport:
                common.update(CLIENT_ADDR="127.0.0.1", CLIENT_PORT=cport)
            srv_env = dict(common, OUTPUT=output, CONNECTIONS=n_clients, **_mss_env(mss, "server"))
            srv = start(server, "server", case, logdir / "server", srv_env)
            procs.append(srv)
            if not _wait_bound(sport, srv.popen, 5.0):
                srv.check()
                if srv.rc == EXIT_UNSUPPORTED:
                    res.status, res.reason = (
                        RunStatus.UNSUPPORTED,
                        f"{server.name} server: TESTCASE {case} not supported (127)",
                    )
                else:
                    res.status = RunStatus.FAIL
                    res.reason = f"server {server.name} did not bind UDP port {sport} within 5 s ({exit_text(srv.rc)})"
                    srv.kill()
                    # the client never started: the capture, if any, was not read
                    not_read = "the run ended before a client started, so its capture was not read"
                    res.diagnosis = diagnose([srv.role()], [], t0_wall, uncaptured=not_read if cap else NO_CAPTURE)
                    res.reason += f"; {res.diagnosis.headline(2)}"
                return res
            if relay:
                common = dict(common, SERVER_PORT=relay.address[1])
            for i in range(n_clients):
                name = f"client-{i}" if n_clients > 1 else "client"
                env = dict(common, INPUT=inputs[i], **_mss_env(mss, "client"))
                procs.append(start(client, name, case, logdir / name, env))
            capfile = res.pcap or (logdir / "relay.pcap" if relay else None)
            names = {"server": server.name, "client": client.name}
            entry = relay.address if relay else None
            watch = WireWatch(capfile, ("127.0.0.1", sport), entry, names) if capfile else None
            res.stopped = supervise(srv, procs[1:], t0 + c.timeout, watch)
        finally:
            end_run(res, procs, relay, cap, t0)
        if unsupported(res, procs, server, client):
            return res
        timeout = c.timeout
        problems = [f"stopped early after {res.seconds:.1f} s: {res.stopped}"] if res.stopped else []
        # the role that ended first (on its own) is the likeliest cause: its exit comes first
        by_end = sorted(procs, key=lambda p: p.ended or 0.0)
        for proc in by_end:
            if why := _exit_problem(proc, res.stopped, timeout, res.server_rc, res.client_rc):
                problems.append(why)
        problems.extend(compare(case, inputs, output))
        capfile = res.pcap if res.pcap and res.pcap.exists() else (logdir / "relay.pcap" if relay else None)
        if capfile and capfile.exists():
            res.pcap = capfile
            datagrams = read_udp(capfile)
            res.conns = [c for c in connections(datagrams, ("127.0.0.1", sport)) if c.records]
            if relay:
                legs = [c for c in connections(datagrams, relay.address) if c.records]
                res.client_leg = legs[0] if legs else None
            problems.extend(_mss_problems(res.conns, mss, server.name, client.name))
        uncaptured = NO_CAPTURE
        if capfile and capfile.exists():
            uncaptured = f"{capfile.name} holds no packet of the server's port"
        elif res.pcap:
            uncaptured = f"no capture: {res.pcap.name} was not written"
        res.status = RunStatus.FAIL if problems else RunStatus.PASS
        res.reason = "; ".join(problems) or f"{sum(p.stat().st_size for p in inputs)} bytes delivered intact"
        if problems:
            ctx = Context(case, set(res.dropped), res.client_leg)  # the wire rules name who spoiled the exchange
            res.diagnosis = diagnose(
                [p.role() for p in procs], res.conns, t0_wall, res.client_leg, res.stopped, ctx, uncaptured
            )
            # a crash line (or the cap it hit) replaces the bare exit status it explains
            findings = res.diagnosis.findings
            problems = [next((f for f in findings if f.startswith((f"{p}: ", f"{p} ("))), p) for p in problems]
            # the side whose invalid packet the failure follows from leads; a stop, or the crash of
            # its receiver (a finding that replaced the bare exit), came after it
            lead = [res.diagnosis.culprit] if res.diagnosis.culprit else []
            more = [f for f in findings if f not in problems + lead][:3]
            if lead and (res.stopped or problems[0] in findings):
                problems[0] = f"then {problems[0]}"
            res.reason = "; ".join(lead + problems + more)
        if relay and (missed := relay.wrap_missed()):
            # a case that did not exercise what it is named for is inconclusive, never a pass
            if res.status == RunStatus.PASS:
                res.status, res.reason = RunStatus.INCONCLUSIVE, f"inconclusive: {missed}; {res.reason}"
            else:
                res.reason += f"; the {case} case was not exercised: {missed}"
        (logdir / "result.json").write_text(json.dumps(res.to_json(), indent=2, ensure_ascii=False))
        return res


run = UdtRun()  # the family's UDT4 run (udtconf.family.RUNS)


def _exit_problem(
    p: Proc, stopped: str | None, timeout: float, server_rc: int | None, client_rcs: list[int | None]
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
