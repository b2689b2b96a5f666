"""One interop run: a server stack and a client stack play a TESTCASE on loopback while the
suite captures the server's UDP port, then compares the files and decodes the capture.

The data always flows client → server. Per test case:

==============  =================================================================================
handshake       1 KiB, STREAM: connection set-up, a one-packet message, close
transfer        2 MiB STREAM bulk
dgram           1 MiB in DGRAM (message) mode
rendezvous      256 KiB, both sides bind and connect to each other (UDT_RENDEZVOUS)
loss            1 MiB STREAM through :class:`~udtconf.relay.LossRelay`, which drops chosen packets
                (single, a run of 2, a long run, a run across the 2^31 wrap), moves the
                sequence space so the wrap happens 100 packets in, and forms a 3000 packet/s
                drop-tail bottleneck (64-packet queue)
close           64 KiB then a graceful close: both roles must exit 0 and a Shutdown is on the wire
multiconnect    3 clients at once to one server port (OUTPUT is a directory, one file per connection)
==============  =================================================================================
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .capture import Capture, can_capture
from .pcap import read_udp
from .ports import free_udp_port, udp_port_bound
from .relay import LossRelay, wrap_target
from .stacks import EXIT_OK, EXIT_UNSUPPORTED, REPO_ROOT, Stack, stop
from .testdata import random_file, sha256_file
from .trace import Connection, connections

RESULTS_DIR = REPO_ROOT / "results" / "conformance"

CASE_BYTES = {
    "handshake": 1024,
    "transfer": 2 * 1024 * 1024,
    "dgram": 1024 * 1024,
    "rendezvous": 256 * 1024,
    "loss": 1024 * 1024,
    "close": 64 * 1024,
    "multiconnect": 128 * 1024,
}
CASE_TIMEOUT = {"rendezvous": 45.0, "loss": 60.0}
LOSS_DROPS = [5, 20, 21, *range(40, 60), 99, 100, 101, 300]
LOSS_WRAP_AT = 100
LOSS_RATE_PPS = 3000.0  # ≈ 35 Mb/s bottleneck: makes the sender's pacing (and packet pairs) visible
LOSS_QUEUE = 64
MULTI_CONNECTIONS = 3
SERVER_GRACE = 10.0  # seconds a server may take to finish after the last client exited


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
    conns: list[Connection] = field(default_factory=list, repr=False)
    client_leg: Connection | None = field(default=None, repr=False)  # loss case: client ↔ relay

    @property
    def key(self) -> str:
        return f"{self.server}__{self.client}__{self.case}"

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d.pop("conns")
        d.pop("client_leg")
        d["logdir"] = str(self.logdir)
        d["pcap"] = str(self.pcap) if self.pcap else None
        d["dropped"] = len(self.dropped)
        return d


class InteropRunner:
    """Runs (server, client, case) once per session and remembers the result."""

    def __init__(self, results_dir: Path = RESULTS_DIR, capture: bool | None = None) -> None:
        self.results_dir = results_dir
        self.capture = can_capture() if capture is None else capture
        self._memo: dict[str, RunResult] = {}

    def run(self, server: Stack, client: Stack, case: str) -> RunResult:
        key = f"{server.name}__{client.name}__{case}"
        if key not in self._memo:
            self._memo[key] = self._run(server, client, case, self.results_dir / "runs" / key)
        return self._memo[key]

    def results(self) -> list[RunResult]:
        return list(self._memo.values())

    # -----------------------------------------------------------------------------------------

    def _run(self, server: Stack, client: Stack, case: str, logdir: Path) -> RunResult:
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

        n_clients = MULTI_CONNECTIONS if case == "multiconnect" else 1
        inputs = [logdir / f"input-{i}.bin" for i in range(n_clients)]
        for i, p in enumerate(inputs):
            random_file(p, CASE_BYTES[case], seed=f"{case}-{i}")
        output = logdir / ("output" if case == "multiconnect" else "output.bin")
        if case == "multiconnect":
            output.mkdir()

        sport = free_udp_port()
        cport = free_udp_port() if case == "rendezvous" else None
        ports = [sport] + ([cport] if cport else [])
        relay: LossRelay | None = None
        cap: Capture | None = None
        procs: list[subprocess.Popen[bytes]] = []
        t0 = time.monotonic()
        try:
            if case == "loss":
                relay = LossRelay(
                    ("127.0.0.1", sport),
                    drop=LOSS_DROPS,
                    isn_target=wrap_target(LOSS_WRAP_AT),
                    capture=None if self.capture else logdir / "relay.pcap",
                    rate_pps=LOSS_RATE_PPS,
                    queue=LOSS_QUEUE,
                ).__enter__()
                ports.append(relay.address[1])
            if self.capture:
                res.pcap = logdir / "capture.pcap"
                cap = Capture(res.pcap, ports).__enter__()
            common: dict[str, str | int | Path] = dict(
                SERVER_ADDR="127.0.0.1", SERVER_PORT=sport, CLIENT_ADDR="127.0.0.1"
            )
            if cport:
                common["CLIENT_PORT"] = cport
            srv = server.start("server", case, logdir / "server", OUTPUT=output, CONNECTIONS=n_clients, **common)
            procs.append(srv)
            if not self._wait_bound(sport, srv, 5.0):
                res.server_rc = srv.poll()
                if res.server_rc == EXIT_UNSUPPORTED:
                    res.status, res.reason = "unsupported", f"{server.name} server: TESTCASE {case} not supported (127)"
                else:
                    res.status, res.reason = (
                        "fail",
                        f"{server.name} server did not bind UDP port {sport} (exit {res.server_rc})",
                    )
                return res
            if relay:
                common = dict(common, SERVER_PORT=relay.address[1])
            clients = [
                client.start(
                    "client", case, logdir / (f"client-{i}" if n_clients > 1 else "client"), INPUT=inputs[i], **common
                )
                for i in range(n_clients)
            ]
            procs.extend(clients)
            deadline = t0 + CASE_TIMEOUT.get(case, 30.0)
            res.client_rc = [self._wait(p, deadline) for p in clients]
            # Once every client has exited, a server that got its data closes within seconds;
            # don't sit out the whole case timeout when a client gave up early.
            res.server_rc = self._wait(srv, min(max(deadline, time.monotonic() + 5.0), time.monotonic() + SERVER_GRACE))
        finally:
            for proc in procs:
                stop(proc)
            if relay:
                relay.close()
                res.dropped = list(relay.dropped)
            if cap:
                cap.stop()
                res.capture_lost = cap.dropped()
            res.seconds = time.monotonic() - t0

        rcs = [res.server_rc, *res.client_rc]
        if EXIT_UNSUPPORTED in rcs:
            res.status = "unsupported"
            who = server.name if res.server_rc == EXIT_UNSUPPORTED else client.name
            res.reason = f"{who}: TESTCASE {case} not supported (127)"
            return res
        problems = []
        if res.server_rc != EXIT_OK:
            problems.append(f"server {server.name} exit {res.server_rc if res.server_rc is not None else 'timeout'}")
        for i, rc in enumerate(res.client_rc):
            if rc != EXIT_OK:
                problems.append(f"client {client.name}#{i} exit {rc if rc is not None else 'timeout'}")
        problems.extend(self._compare(case, inputs, output))
        capfile = res.pcap if res.pcap and res.pcap.exists() else (logdir / "relay.pcap" if relay else None)
        if capfile and capfile.exists():
            res.pcap = capfile
            datagrams = read_udp(capfile)
            res.conns = [c for c in connections(datagrams, ("127.0.0.1", sport)) if c.records]
            if relay:
                legs = [c for c in connections(datagrams, relay.address) if c.records]
                res.client_leg = legs[0] if legs else None
        res.status = "fail" if problems else "pass"
        res.reason = "; ".join(problems) or f"{sum(p.stat().st_size for p in inputs)} bytes delivered intact"
        (logdir / "result.json").write_text(json.dumps(res.to_json(), indent=2))
        return res

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

    @staticmethod
    def _wait(p: subprocess.Popen[bytes], deadline: float) -> int | None:
        try:
            return p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop(p)
            return None
