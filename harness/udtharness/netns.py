"""Network namespaces, made and removed in one place.

Every namespace a run makes is named ``<prefix><pid>-…``: the prefix says whose it is (the
testbed's ``udtb-``, the interop tests' and benches' own), the pid which process made it, so a
sweep (:func:`cleanup` with ``live=False``) removes those of runs that are gone and leaves those
of runs still alive, and removes the processes inside each before the namespace itself. Nothing
is ever killed by name.

For the interop tests and the benches: a sender (a) and a receiver (b) in two namespaces joined
by a veth pair (:func:`veth_namespaces`), or joined through a third that runs ``udt-linkem``
(loss, delay and rate on the path; :func:`linkem_namespaces`). The testbed builds its
topologies with Mininet and cleans them up with the same :func:`cleanup`.

``udt-linkem`` (docs/link-emulation.md) is started in one place, :func:`start_linkem`, for the
interop tests' :func:`linkem_namespaces` and the testbed's emulated links alike; :func:`check_linkem`
says why it exited at start, :func:`stop_linkem` ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import processes


@dataclass(frozen=True)
class Net:
    """Where the sender (a) and the receiver (b) run and which addresses they use."""

    name: str
    addr_a: str
    addr_b: str
    ns_a: str | None = None
    ns_b: str | None = None
    # FRTP's second path (FRTP.md §1): the control addresses, when not addr_a / addr_b.
    ctrl_a: str | None = None
    ctrl_b: str | None = None

    def wrap(self, ns: str | None, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv] if ns else argv


LOOPBACK = Net("lo", "127.0.0.1", "127.0.0.1")


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def create_veth_namespaces(ns_a: str, ns_b: str, addr_a: str, addr_b: str, prefix: int = 24) -> None:
    """Two namespaces joined by a veth pair; deletes whatever it made if a step fails."""
    made: list[str] = []
    try:
        for ns in (ns_a, ns_b):
            _run("ip", "netns", "add", ns)
            made.append(ns)
        # Created directly inside the namespaces: no name is ever used in the root namespace.
        _run("ip", "link", "add", "veth0", "netns", ns_a, "type", "veth", "peer", "name", "veth0", "netns", ns_b)
        for ns, addr in ((ns_a, addr_a), (ns_b, addr_b)):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/{prefix}", "dev", "veth0")
            _run("ip", "-n", ns, "link", "set", "veth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
    except BaseException:
        delete_namespaces(made)
        raise


def delete_namespaces(names: list[str]) -> None:
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextmanager
def veth_namespaces(ns_prefix: str, addr_a: str, addr_b: str) -> Iterator[Net]:
    """Namespaces ``<ns_prefix><pid>-a`` and ``-b`` joined by a veth pair, deleted on exit even
    after a failure. The pid in the names keeps parallel runs apart and lets
    :func:`cleanup` (``live=False``) find those of runs that were killed."""
    pid = os.getpid()
    ns_a, ns_b = f"{ns_prefix}{pid}-a", f"{ns_prefix}{pid}-b"
    create_veth_namespaces(ns_a, ns_b, addr_a, addr_b)
    try:
        yield Net("veth", addr_a, addr_b, ns_a, ns_b)
    finally:
        delete_namespaces([ns_a, ns_b])


REPO = Path(__file__).resolve().parents[2]  # harness/udtharness/ -> the repository
LINKEM = Path(os.environ.get("UDT_LINKEM", REPO / "impl/target/release/udt-linkem"))


@contextmanager
def linkem_namespaces(
    ns_prefix: str,
    addr_a: str,
    addr_b: str,
    a_to_b: str,
    b_to_a: str,
    control: tuple[str, str] | None = None,
    stats: Path | None = None,
) -> Iterator[Net]:
    """Namespaces ``<ns_prefix><pid>-a`` and ``-b``, each with a veth to ``-m``, where
    ``udt-linkem`` forwards frames between the two with the link specs ``a_to_b`` and
    ``b_to_a`` (docs/testbed/backends.md, the link spec). Offloads are off on every interface: linkem
    forwards frames up to the MTU, and copies checksums as they are (a veth's checksum offload
    would leave them for a NIC that is not there). With ``control`` (two addresses), a and b
    also share a direct veth pair ``ctl0``, FRTP's control path beside the emulated circuit.
    With ``stats``, linkem appends its counters there (docs/link-emulation.md, `--stats`).
    The forwarder is stopped and the namespaces deleted on exit, even after a failure."""
    if not LINKEM.exists():
        raise FileNotFoundError(f"{LINKEM} is not built: run `make build` (or set UDT_LINKEM)")
    pid = os.getpid()
    ns_a, ns_b, ns_m = (f"{ns_prefix}{pid}-{x}" for x in "abm")
    made: list[str] = []
    linkem: processes.StackProcess | None = None
    log: Path | None = None
    try:
        for ns in (ns_a, ns_b, ns_m):
            _run("ip", "netns", "add", ns)
            made.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        for ns, addr, side in ((ns_a, addr_a, "la"), (ns_b, addr_b, "lb")):
            _run("ip", "link", "add", "veth0", "netns", ns, "type", "veth", "peer", "name", side, "netns", ns_m)
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "veth0")
            for where, dev in ((ns, "veth0"), (ns_m, side)):
                _run("ip", "-n", where, "link", "set", dev, "up")
                _run(
                    "ip",
                    "netns",
                    "exec",
                    where,
                    "ethtool",
                    "-K",
                    dev,
                    "tx",
                    "off",
                    "tso",
                    "off",
                    "gso",
                    "off",
                    "gro",
                    "off",
                )
        # Static neighbour entries across the emulated link: ARP through its delay would hold
        # the first packets of a paced flow in the neighbour queue and release them in a burst
        # that a packet sent meanwhile can overtake (a reordering no link spec asked for).
        _link_neighbours(ns_a, addr_a, ns_b, addr_b, "veth0")
        if control is not None:
            _run("ip", "link", "add", "ctl0", "netns", ns_a, "type", "veth", "peer", "name", "ctl0", "netns", ns_b)
            for ns, addr in zip((ns_a, ns_b), control, strict=True):
                _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "ctl0")
                _run("ip", "-n", ns, "link", "set", "ctl0", "up")
        fd, name = tempfile.mkstemp(prefix="udt-linkem-", suffix=".log")  # its output, for check_linkem
        log = Path(name)
        os.close(fd)
        linkem = start_linkem(ns_m, "la", "lb", a_to_b, b_to_a, stats=stats, log=log)
        time.sleep(0.2)  # its sockets are bound before it forwards; a start-up error ends it at once
        check_linkem(linkem)
        ctrl_a, ctrl_b = control or (None, None)
        yield Net("linkem", addr_a, addr_b, ns_a, ns_b, ctrl_a, ctrl_b)
    finally:
        if linkem is not None:
            stop_linkem([linkem], grace=5.0)
        if log is not None:
            log.unlink(missing_ok=True)
        delete_namespaces(made)


def linkem_argv(
    a: str,
    b: str,
    a_to_b: str,
    b_to_a: str,
    stats: Path | None = None,
    args: Sequence[str] = (),
    linkem: Path | None = None,
) -> list[str]:
    """``udt-linkem``'s command line: forward between the interfaces ``a`` and ``b`` with the
    link specs ``a_to_b`` and ``b_to_a`` (docs/link-emulation.md), append counters to ``stats``
    once a second where given (``--stats``), then ``args`` as they are (``--realtime``...).
    ``linkem``: the binary (default :data:`LINKEM`)."""
    argv = [str(linkem or LINKEM), "--a", a, "--b", b, "--a-to-b", a_to_b, "--b-to-a", b_to_a]
    if stats is not None:
        argv += ["--stats", str(stats)]
    return [*argv, *args]


def start_linkem(
    ns: str,
    a: str,
    b: str,
    a_to_b: str,
    b_to_a: str,
    *,
    log: Path,
    stats: Path | None = None,
    args: Sequence[str] = (),
    cpus: Collection[int] | None = None,
    linkem: Path | None = None,
) -> processes.StackProcess:
    """Start ``udt-linkem`` (:func:`linkem_argv`) in the namespace ``ns``, where ``a`` and ``b``
    are, through :func:`udtharness.processes.start`: no memory or CPU cap, the caller's
    environment, stdin closed, stdout and stderr both written to ``log`` (made anew), in a
    process group of its own (``ip netns exec`` execs it in place: the PID is the emulator's),
    confined to ``cpus`` where given. It is registered with the run's processes, so an
    interrupted run ends it (:func:`udtharness.processes.cleanup`). Nothing is waited for: a
    caller gives it a moment and :func:`check_linkem`, and ends it with :func:`stop_linkem`."""
    return processes.start(
        linkem_argv(a, b, a_to_b, b_to_a, stats, args, linkem),
        os.environ,
        limits=processes.UNCAPPED,
        stdout=log,
        stderr=log,
        netns=ns,
        cpus=cpus,
    )


def check_linkem(p: processes.StackProcess, what: str = "udt-linkem", *, show_log: bool = False) -> None:
    """Raise RuntimeError if the emulator ``p`` has already exited (a missing interface, missing
    privilege, a bad spec: it reports those at once), with its exit status and what it wrote
    (the end of its log); ``show_log`` adds the log's path. ``what`` names it in the message."""
    if p.poll() is None:
        return
    try:
        text = p.log.read_bytes()[-4000:].decode(errors="replace").strip()
    except OSError as e:
        text = f"(its log {p.log} cannot be read: {e})"
    see = f"; see {p.log}" if show_log else ""
    raise RuntimeError(f"{what} exited at start ({p.returncode}): {text or '(no output)'}{see}")


def stop_linkem(emulators: Iterable[processes.StackProcess], grace: float = 3.0) -> None:
    """End each emulator still running: SIGTERM to every one's process group at once (it writes
    a final stats line and exits 0), then :func:`udtharness.processes.stop` each one not yet
    gone (SIGTERM with SIGCONT, so a stopped one acts on it too; ``grace`` seconds; then SIGKILL
    to the group) and reap it. One already reaped is left alone: its group id may be another's
    by now."""
    running = [p for p in emulators if p.poll() is None]
    for p in running:
        p.stopped = True  # ended by the caller, not on its own (StackProcess.exit)
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    for p in running:
        if p.poll() is None:
            processes.stop(p, grace=grace)


def _mac(ns: str, dev: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "-o", "link", "show", dev], check=True, capture_output=True, text=True)
    words = out.stdout.split()
    return words[words.index("link/ether") + 1]


def _link_neighbours(ns_a: str, addr_a: str, ns_b: str, addr_b: str, dev: str) -> None:
    """Each of a and b knows the other's MAC on ``dev`` for good (no ARP on that link)."""
    for ns, peer_ns, peer_addr in ((ns_a, ns_b, addr_b), (ns_b, ns_a, addr_a)):
        mac = _mac(peer_ns, dev)
        _run("ip", "-n", ns, "neigh", "replace", peer_addr, "lladdr", mac, "dev", dev, "nud", "permanent")


def sh(*argv: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` (inside ``ns`` when given); with ``check`` a failure raises with its stderr."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


def list_namespaces(prefix: str) -> list[str]:
    """The namespaces whose names start with ``prefix``."""
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def kill_namespace(ns: str) -> None:
    """Kill every process inside ``ns`` (TERM, then KILL), then delete it.

    A Mininet node's shell gets HUP instead of TERM: an interactive bash ignores TERM."""
    for first in (True, False):
        pids = [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split()]
        for pid in pids:
            sig = (signal.SIGHUP if is_node_shell(pid) else signal.SIGTERM) if first else signal.SIGKILL
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"]
            time.sleep(0.02)
        if not pids:
            break
    sh("ip", "netns", "del", ns, check=False)


def is_node_shell(pid: int) -> bool:
    """Whether ``pid`` is a Mininet node's shell (``bash ... -is mininet:<node>``)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0] == b"bash" and any(a.startswith(b"mininet:") for a in argv)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def owner_alive(ns: str, prefix: str) -> bool:
    """Whether the process that made ``ns`` (``<prefix>…<pid>-…``: the first all-digit part
    after the prefix) still runs."""
    pid = next((p for p in ns.removeprefix(prefix).split("-") if p.isdigit()), None)
    return pid is not None and Path(f"/proc/{pid}").exists()


def cleanup(prefix: str, live: bool = True) -> list[str]:
    """Remove every namespace with ``prefix`` and the processes in it; returns their names.
    With ``live=False`` the namespaces of runs still alive are left alone."""
    gone = [ns for ns in list_namespaces(prefix) if live or not owner_alive(ns, prefix)]
    for ns in gone:
        kill_namespace(ns)
    return gone
