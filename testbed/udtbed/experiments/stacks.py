"""Transport stacks under test, behind one interface: start a bulk receiver and sender, and
read the receiver's progress as ``(t, cumulative bytes)`` samples, a line at a time.

Which stacks exist is not decided here: the one registry is ``stacks/*/meta.toml``
(:func:`udtharness.stacks.registry`), whose ``[bulk]`` table says how each runs a bulk transfer:

- ``contract = "udt-cli"`` → :class:`UdtCli`: the shared ``udt`` CLI contract (docs/cli.md) of
  our Rust ``udt`` and the libudt 4.11 peer: ``recv --listen --output /dev/null --stats``,
  ``send --connect --input /dev/zero --stats`` (an endless stream the runner stops at the end).
- ``contract = "sabul-cli"`` → :class:`SabulCli`: the ``sabul`` command line (docs/cli.md) of
  our Rust ``sabul`` (``$SABUL_BIN`` overrides, e.g. the suite's Python peer for development):
  the *sender* listens (``send --listen --input /dev/zero``) and the receiver connects to it
  (``recv --connect --output /dev/null --stats``); data flows over UDP from sender to receiver.
- ``contract = "frtp-cli"`` → :class:`FrtpCli`: the ``frtp`` command line (docs/cli.md): SABUL's
  roles on two paths. The sender listens on its host's **control** address; the receiver
  connects there and binds its data socket on its **data** (circuit) address, asking for a
  fixed rate (FRTP.md §1-2). A stack whose :attr:`BulkStack.control_net` is set is given both.
- ``contract = "iperf3"`` → :class:`Iperf3Tcp`: kernel TCP with a chosen congestion control
  (cubic, bbr) via iperf3; the server's per-interval report (``--forceflush``) is the
  receiver's series.

Which end of a transfer listens is the stack's (:attr:`BulkStack.listener`): the runner starts the
listening ends first and then the other ends, each connecting to the listener's host. Both ends
are given the same meeting point, ``addr:port`` on the listener's host, and one :class:`Transfer`:
the flow's settings at the run's scale (a fixed rate, buffers, a file instead of memory), which
each contract maps to its options as far as it has them.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from udtharness import stacks as registry
from udtharness.cli import recv_argv, sabul_recv_argv, sabul_send_argv, send_argv, stats_json

# Every flow's stats line period (docs/cli.md `--stats-interval`): five samples a second.
STATS_INTERVAL_MS = 200


@dataclass
class Sample:
    t: float  # seconds since the receiver's start of measurement
    bytes: int  # cumulative bytes received
    # The whole line, for stacks whose progress lines carry more (the stats JSON contract).
    stats: dict[str, Any] | None = field(default=None, compare=False, repr=False)


Role = Literal["receiver", "sender"]


@dataclass(frozen=True)
class Transfer:
    """One flow's settings at the run's scale (:class:`udtbed.experiments.experiment.FlowOptions` scaled),
    given to both ends. The defaults are a memory-to-memory transfer with the stack's own
    settings; a contract that has no option for a setting leaves it out (:meth:`BulkStack.takes`)."""

    data_addr: str | None = None  # the receiver's data-path address (FRTP's circuit), if not addr
    rate_mbps: float | None = None  # a fixed sending rate, Mb/s of IP packets
    udp_buffer: int | None = None  # bytes, the data socket's buffers (the udt CLI: the sender's send buffer)
    frtp_buffer: int | None = None  # bytes, FRTP's retransmission / resequencing buffer
    # UDT's flow window and receive buffer, packets (`--flow-window`, `--rcvbuf`; `--sndbuf` twice
    # that): what the path needs in flight, set by the runner for every UDT stack that takes them.
    udt_window: int | None = None
    input: str = "/dev/zero"
    output: str = "/dev/null"


class BulkStack:
    """A stack as the testbed runs it: one bulk transfer through its ``[bulk]`` contract (the
    registry entry, :class:`udtharness.stacks.Stack`, says which); the argv of each end."""

    name: str
    protocol: str  # "udt", "sabul", "frtp" or "tcp": which of the papers' numbers and bands apply
    # Which end waits for the other: it starts first, bound to ``addr:port`` on its own host, and
    # the other end connects there. UDT and TCP: the receiver; SABUL: the sender (SABUL.md §2).
    listener: Role = "receiver"
    # Whether the sender writes the stats JSON lines of docs/cli.md (its pacing, for hostwatch).
    sender_stats: bool = False
    # The net whose address the listener is met at (FRTP: "control", FRTP.md §1); None: the
    # data net, which then carries everything.
    control_net: str | None = None
    # The :class:`Transfer` settings the contract has options for.
    settings: frozenset[str] = frozenset({"input", "output"})
    # Goodput over the IP packets' rate at the default MSS: a fixed rate's goodput ceiling.
    goodput_share: float = 1.0

    # The :class:`Transfer` settings a flow of this stack must have (FRTP: its fixed rate).
    required: frozenset[str] = frozenset()

    def takes(self, setting: str) -> bool:
        """Whether this stack can run a flow with ``setting`` (a :class:`Transfer` field) set."""
        return setting in self.settings

    def available(self) -> tuple[bool, str]:
        raise NotImplementedError

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = Transfer()
    ) -> tuple[list[str], Path | None]:
        """(argv, path the process's stdout goes to, or None). ``addr:port`` is the listener's:
        the receiver binds it when it listens (it may bind the wildcard address instead) and
        connects to it otherwise."""
        raise NotImplementedError

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = Transfer(),
    ) -> list[str]:
        """argv of a bulk sender, meeting the receiver at the listener's ``addr:port`` as above;
        ``stats``: where a stack that has them (:attr:`sender_stats`) writes its sender stats;
        ``scale``: the run's rate multiplier, for a stack whose defaults are absolute rates."""
        raise NotImplementedError

    def connector(self) -> Role:
        """The end that connects to the listener."""
        return "sender" if self.listener == "receiver" else "receiver"

    def line_parser(self) -> Callable[[str], Sample | None]:
        """A parser for one receiver's progress file, fed its complete lines in order: the
        sample a line holds, if any. One parser per file (it may keep state across lines)."""
        raise NotImplementedError


@cache
def _help_text(binary: str, command: str) -> str:
    """``binary command --help`` (stdout and stderr), read once per run and binary: every flow
    asks what its stack takes."""
    try:
        p = subprocess.run([binary, command, "--help"], capture_output=True, text=True)
    except OSError:  # not built: it takes nothing (available() says why it cannot run)
        return ""
    return p.stdout + p.stderr


def _stats(path: Path | None) -> dict[str, Any]:
    """The stats options every flow of the testbed gives its stacks: a line every 200 ms."""
    return {"stats": path, "interval_ms": STATS_INTERVAL_MS} if path is not None else {}


def parse_stats_line(line: str) -> Sample | None:
    """A receiver's periodic stats line (docs/cli.md) as a sample, the line's fields kept."""
    d = stats_json(line)
    if d is None or not isinstance(d.get("bytes"), int):
        return None
    return Sample(float(d["t"]), d["bytes"], d)


class CliStack(BulkStack):
    """A stack run through one of the family's command lines (docs/cli.md): a binary whose
    ``--help`` shows ``send`` and ``recv``."""

    contract: str  # the contract's name, for the message when the binary does not follow it

    def __init__(self, name: str, binary: Path, build: str | None = None):
        self.name, self.binary, self.build = name, binary, build

    def available(self) -> tuple[bool, str]:
        if not os.access(self.binary, os.X_OK):
            return False, f"{self.binary} is not built" + (f" ({self.build})" if self.build else "")
        p = subprocess.run([str(self.binary), "--help"], capture_output=True, text=True)
        if "recv" not in p.stdout + p.stderr or "send" not in p.stdout + p.stderr:
            return False, f"{self.binary} --help does not show the {self.contract} CLI contract"
        return True, str(self.binary)

    def line_parser(self) -> Callable[[str], Sample | None]:
        return parse_stats_line


class UdtCli(CliStack):
    protocol = "udt"
    contract = "udt"
    sender_stats = True
    goodput_share = 1456 / 1500  # UDT4.md §3: 16-byte header, 28 of IP and UDP

    def takes(self, setting: str) -> bool:
        # A fixed rate is our udt's `--cc fixed:<Mbit/s>` (no congestion control), for FRTP's
        # comparisons; a binary whose `send --help` has no such controller takes none.
        if setting == "rate_mbps":
            return "fixed:" in self._help("send")
        if setting == "udt_window":
            return "--flow-window" in self._help("recv") and "--flow-window" in self._help("send")
        # The data socket's buffer is the sender's kernel send buffer (`--udp-sndbuf`): where
        # the sending host's NIC is the bottleneck, it decides whether the sender blocks or the
        # NIC's queue drops (docs/testbed/topologies.md, "A host's NIC as the bottleneck").
        if setting == "udp_buffer":
            return "--udp-sndbuf" in self._help("send")
        return super().takes(setting)

    def _help(self, command: str) -> str:
        return _help_text(str(self.binary), command)

    @staticmethod
    def _window(transfer: Transfer) -> list[str]:
        # The send buffer holds the window's unacknowledged packets and as many waiting to go.
        n = transfer.udt_window
        return [] if n is None else ["--flow-window", str(n), "--rcvbuf", str(n), "--sndbuf", str(2 * n)]

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = Transfer()
    ) -> tuple[list[str], Path | None]:
        return recv_argv(
            self.binary, f"0.0.0.0:{port}", transfer.output, *self._window(transfer), **_stats(stats)
        ), None

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = Transfer(),
    ) -> list[str]:
        # UDT's start-up follows the path (slow start, then the receiver's arrival speed): no
        # absolute rate to scale.
        extra = self._window(transfer)
        if transfer.rate_mbps is not None:
            extra += ["--cc", f"fixed:{transfer.rate_mbps:g}"]
        if transfer.udp_buffer is not None:
            extra += ["--udp-sndbuf", str(transfer.udp_buffer)]
        # The sender's pacing (period_us) shows whether timing artifacts made it faster than the path.
        return send_argv(self.binary, f"{addr}:{port}", transfer.input, *extra, **_stats(stats))


class SabulCli(CliStack):
    """The ``sabul`` CLI contract (docs/cli.md): the sender listens on TCP and waits for one
    receiver, which connects and announces its UDP data port in its option block (SABUL.md §2).
    The sender listens on its host's own address (not the wildcard): its UDP data then leaves
    from the address the receiver connected to, the only one it accepts DATA from (§10.2)."""

    protocol = "sabul"
    contract = "sabul"
    listener: Role = "sender"
    sender_stats = True
    goodput_share = 1468 / 1500  # SABUL.md §3.1: a 4-byte header
    # SABUL.md §7.1: the initial interval is 10 µs, 1500 · 8 / 10 = 1200 Mb/s, a little above the
    # paper's 1 Gb/s links. A scaled run starts at that rate times the scale, as the links are, so
    # that the start-up meets the link as it does at full scale (from 12x the link instead, it
    # takes some 21 decreases of x1.125 to come down instead of 2). The limits an increase clamps
    # to (I_min 10 µs, I_max 1000 µs: 1200 and 12 Mb/s) scale the same way: unscaled, 12 Mb/s is
    # 1.2 % of the paper's link but 12 % of a 100 Mb/s one, a floor nine flows together cannot go
    # below (the SABUL paper's Table 2).
    INITIAL_MBPS = 1200.0
    MIN_MBPS = 12.0

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = Transfer()
    ) -> tuple[list[str], Path | None]:
        return sabul_recv_argv([str(self.binary)], f"{addr}:{port}", transfer.output, **_stats(stats)), None

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = Transfer(),
    ) -> list[str]:
        extra = []
        if scale != 1.0:
            top, floor = (f"{r * scale:g}" for r in (self.INITIAL_MBPS, self.MIN_MBPS))
            extra = ["--rate", top, "--max-rate", top, "--min-rate", floor]
        return sabul_send_argv([str(self.binary)], f"{addr}:{port}", transfer.input, *extra, **_stats(stats))


class FrtpCli(CliStack):
    """The ``frtp`` CLI contract (docs/cli.md): SABUL's roles (the sender listens on TCP, FRTP.md
    §2) on two paths. The sender listens on its host's control address; the receiver connects
    there over its own control interface, binds its data socket on its data (circuit) address,
    ``transfer.data_addr``, and asks for the fixed rate, which every FRTP flow must have (the
    receiver chooses it, normally the circuit rate, §2 step 4)."""

    protocol = "frtp"
    contract = "frtp"
    listener: Role = "sender"
    sender_stats = True
    control_net = "control"
    goodput_share = 1468 / 1500  # FRTP.md §3.1: 1472 = 4 + 1468 bytes in a 1500-byte packet
    settings = frozenset({"input", "output", "rate_mbps", "udp_buffer", "frtp_buffer"})
    required = frozenset({"rate_mbps"})

    def _buffers(self, transfer: Transfer) -> list[str]:
        argv = ["--udp-buffer", str(transfer.udp_buffer)] if transfer.udp_buffer is not None else []
        return argv + (["--frtp-buffer", str(transfer.frtp_buffer)] if transfer.frtp_buffer is not None else [])

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = Transfer()
    ) -> tuple[list[str], Path | None]:
        if transfer.rate_mbps is None:
            raise ValueError("an FRTP flow needs a fixed rate (rate = Mb/s in the experiment's flow)")
        data = transfer.data_addr or "0.0.0.0"  # 0.0.0.0: the control connection's address
        extra = ["--data-bind", f"{data}:0", "--rate", f"{transfer.rate_mbps:g}", *self._buffers(transfer)]
        return sabul_recv_argv([str(self.binary)], f"{addr}:{port}", transfer.output, *extra, **_stats(stats)), None

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = Transfer(),
    ) -> list[str]:
        return sabul_send_argv(
            [str(self.binary)], f"{addr}:{port}", transfer.input, *self._buffers(transfer), **_stats(stats)
        )


_IPERF_LINE = re.compile(
    r"\[\s*\d+\]\s+([\d.]+)-\s*([\d.]+)\s+sec\s+([\d.]+)\s+([KMGT]?)Bytes\s+[\d.]+\s+[KMGT]?bits/sec\s*$"
)
_UNIT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


class Iperf3Tcp(BulkStack):
    protocol = "tcp"

    def __init__(self, name: str, cc: str):
        self.name, self.cc = name, cc

    def available(self) -> tuple[bool, str]:
        if not shutil.which("iperf3"):
            return False, "iperf3 is not installed"
        avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        if self.cc not in avail:
            subprocess.run(["modprobe", f"tcp_{self.cc}"], capture_output=True)
            avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        if self.cc not in avail:
            return False, f"congestion control {self.cc} is not available (have {' '.join(avail)})"
        return True, f"kernel TCP {self.cc} via iperf3"

    def receiver(
        self, addr: str, port: int, stats: Path, transfer: Transfer = Transfer()
    ) -> tuple[list[str], Path | None]:
        return ["iperf3", "-s", "-1", "-p", str(port), "-i", "0.2", "--forceflush", "-f", "k"], stats

    settings: frozenset[str] = frozenset()  # memory to memory only

    def sender(
        self,
        addr: str,
        port: int,
        seconds: float,
        stats: Path | None = None,
        scale: float = 1.0,
        transfer: Transfer = Transfer(),
    ) -> list[str]:
        return ["iperf3", "-c", addr, "-p", str(port), "-t", str(int(seconds) + 30), "-C", self.cc, "-i", "0"]

    def line_parser(self) -> Callable[[str], Sample | None]:
        total = 0

        def parse(line: str) -> Sample | None:
            # Interval lines only: the final summary ends in 'sender'/'receiver'. iperf3 reports
            # bytes per interval; the sample carries the running total.
            nonlocal total
            m = _IPERF_LINE.search(line)
            if not m:
                return None
            total += int(float(m.group(3)) * _UNIT[m.group(4)])
            return Sample(float(m.group(2)), total)

        return parse


def from_registry(entry: registry.Stack) -> BulkStack | None:
    """The testbed's driver of a registry stack, or None when it has no ``[bulk]`` table or one
    whose contract the testbed does not drive."""
    bulk = entry.bulk
    if bulk is None:
        return None
    if bulk.contract == "udt-cli":
        assert bulk.binary is not None  # the registry's loader checked it
        return UdtCli(entry.name, bulk.binary, bulk.build)
    if bulk.contract == "sabul-cli":
        assert bulk.binary is not None
        return SabulCli(entry.name, bulk.binary, bulk.build)
    if bulk.contract == "frtp-cli":
        assert bulk.binary is not None
        return FrtpCli(entry.name, bulk.binary, bulk.build)
    if bulk.contract == "iperf3":
        assert bulk.congestion_control is not None
        return Iperf3Tcp(entry.name, bulk.congestion_control)
    return None


def all_stacks() -> dict[str, BulkStack]:
    """Every stack of the registry that can run a bulk transfer, by its registry name."""
    out = {}
    for name, entry in registry.registry().items():
        stack = from_registry(entry)
        if stack is not None:
            out[name] = stack
    return out


def resample(samples: list[Sample], offset: float, step: float, end: float) -> list[tuple[float, float]]:
    """Throughput (Mb/s) per ``step`` seconds on a common time axis (run time = offset + t)."""
    pts = [(offset + s.t, s.bytes) for s in samples]
    if len(pts) < 2:
        return []

    def at(x: float) -> float:
        if x <= pts[0][0]:
            return 0.0 if x < pts[0][0] else pts[0][1]
        for (t0, b0), (t1, b1) in itertools.pairwise(pts):
            if t0 <= x <= t1:
                return b0 + (b1 - b0) * (x - t0) / (t1 - t0) if t1 > t0 else b1
        return pts[-1][1]

    end = min(end, pts[-1][0])  # no bin past the last sample
    out, x = [], 0.0
    while x + step <= end + 1e-9:
        out.append((round(x + step, 6), (at(x + step) - at(x)) * 8 / step / 1e6))
        x += step
    return out
