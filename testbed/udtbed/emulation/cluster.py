"""A run across several servers: the servers file, placement, preflight and each server's sweep.

One machine is the default. With a servers file (``udtbed run --servers servers.toml``,
``make testbed SERVERS=servers.toml``; docs/cluster.md) the runner, on the *head*, drives every
server over SSH, one multiplexed connection each (``ControlMaster``), as Mininet's cluster edition
does; the network is built with that edition's ``RemoteNode`` and ``RemoteLink``
(:mod:`udtbed.emulation.network`), with two of its known faults worked around:

- A segment between two servers is not a GRE or SSH tunnel (``RemoteGRELink`` sets MTU 1450
  everywhere; ``RemoteSSHLink`` is Ethernet in TCP with a fixed ``tap9``): it is a *physical*
  underlay interface the servers file names, given to the node's namespace as a ``macvlan`` in
  ``passthru`` mode (every frame of the interface, the lower device's MAC), which vanishes with
  the namespace and leaves the interface as it was. :func:`preflight` sends 1500-byte
  don't-fragment probes across every underlay the placement uses, before anything is built.
- ``ClusterCleanup`` runs ``mn -c`` over SSH, which kills by name: never used. Each server is
  swept by :func:`sweep` (its ``udtb-`` namespaces, the processes in them, the run's process
  groups), over the same connection, at the end of every part and on Ctrl-C.

The run directory and the repository must be on paths every server sees as the head does (an
NFS export, CloudLab's ``/proj``): processes write their outputs there, and :func:`preflight`
checks it with a file the head writes and every server reads, and the stack binaries by sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import subprocess
import time
import tomllib
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from udtharness import processes

from .. import REPO
from .cores import CHECKED_FROM, CoreCheck, CorePlan, CoresError, Pins, Seat, cpu_list, parse_cpus
from .topology import Topology

PREFIX = "udtb-"  # udtbed.emulation.network.PREFIX (not imported: network imports this module)
SSH_TIMEOUT_S = 8
# What every server must have on PATH (iproute2, ethtool, iputils, Mininet's launcher, util-linux).
TOOLS = ("ip", "tc", "ethtool", "ping", "mnexec", "setsid", "taskset", "sha256sum")
# The files a run executes on the servers, by path in the repository: the same bytes everywhere.
RUN_FILES = (
    "impl/target/release/udt",
    "impl/target/release/sabul",
    "impl/target/release/udt-linkem",
    "build/libudt-peer",
    "testbed/udtbed/emulation/probe.py",
)
SERVER_KEYS = {"ssh", "ssh_config", "cpus", "repo", "underlay"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class ClusterError(RuntimeError):
    """A servers file that cannot be used, or a server that fails the preflight; the message
    names the file's key or the server, and what to do."""


@dataclass
class Server:
    """One machine of a cluster run, reached as ``ssh [-F ssh_config] <ssh>``."""

    name: str
    ssh: str
    ssh_config: str | None = None
    cpus: str | None = None  # the CPUs the run may use there (cpuset list), None: all
    repo: Path = REPO
    underlay: dict[str, list[str]] = field(default_factory=dict)  # other server -> its interfaces to it
    control: str = ""  # the ControlPath of this run's connection (set by Cluster)
    sudo: bool = False  # the SSH user is not root: commands go through `sudo -n` (found by preflight)

    def ssh_argv(self, *, tt: bool = False) -> list[str]:
        """``ssh`` up to the destination; a remote command line follows."""
        argv = ["ssh"]
        if self.ssh_config:
            argv += ["-F", os.path.expanduser(self.ssh_config)]
        argv += [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={SSH_TIMEOUT_S}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]
        if self.control:  # the run's connection (Cluster.connect); without it, a connection of its own
            argv += ["-o", "ControlMaster=no", "-o", f"ControlPath={self.control}"]
        if tt:
            argv.append("-tt")
        return [*argv, self.ssh]

    def remote(self, argv: Sequence[str], ns: str | None = None) -> str:
        """The remote command line of ``argv`` (in namespace ``ns``), as root."""
        cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in argv]
        return shlex.join((["sudo", "-n"] if self.sudo else []) + cmd)

    def command(self, argv: Sequence[str], ns: str | None = None) -> list[str]:
        return [*self.ssh_argv(), "--", self.remote(argv, ns)]

    def run(
        self,
        *argv: str,
        ns: str | None = None,
        check: bool = True,
        input: str | None = None,
        timeout: float | None = 60,
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` on this server (in ``ns``); with ``check`` a failure raises, naming the server."""
        try:
            p = subprocess.run(
                self.command(argv, ns),
                capture_output=True,
                text=True,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise ClusterError(f"server {self.name}: `{shlex.join(argv)}` did not finish in {timeout} s") from e
        if check and p.returncode != 0:
            why = p.stderr.strip() or p.stdout.strip()
            if p.returncode == 255:
                why = f"SSH to {self.ssh} failed: {why}"
            raise ClusterError(f"server {self.name}: `{shlex.join(argv)}` failed ({p.returncode}): {why}")
        return p

    def shell(self, script: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A POSIX shell script on this server, as root, from stdin."""
        return self.run("sh", "-s", check=check, input=script, timeout=timeout)


class RemoteProcess:
    """A process started on a server (:meth:`Cluster.spawn`): the local ``ssh`` streams its
    stdout and stderr into files here; it runs in a session of its own there, its group id in
    a file under ``/tmp/udtb-<tag>-<server>/``, so :meth:`stop` signals the whole group, there."""

    STOP_SIGNALS = ("INT", "TERM")

    def __init__(self, server: Server, local: processes.StackProcess, pidfile: str, argv: Sequence[str]):
        self.server, self.local, self.pidfile, self.argv = server, local, pidfile, list(argv)
        self.log = local.log

    @property
    def pid(self) -> int:
        """The local ``ssh``'s (the process there has another, in another PID space)."""
        return self.local.pid

    @property
    def returncode(self) -> int | None:
        return self.local.returncode

    def poll(self) -> int | None:
        return self.local.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.local.wait(timeout)

    def signal(self, sig: str) -> None:
        script = f'f={shlex.quote(self.pidfile)}; [ -s "$f" ] && kill -{sig} -"$(cat "$f")" 2>/dev/null; true'
        try:
            self.server.shell(script, check=False, timeout=15)
        except ClusterError:
            pass

    def stop(self, timeout: float = 3.0) -> int:
        """SIGINT to the group there (a sender's final stats line), then TERM, then KILL,
        ``timeout`` seconds apart; then the local ``ssh``."""
        for sig in (*self.STOP_SIGNALS, "KILL"):
            if self.local.poll() is not None:
                break
            self.signal(sig)
            try:
                self.local.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
        if self.local.poll() is None:
            processes.stop(self.local, grace=1.0)
        try:  # its group id is free for another's now
            self.server.run("rm", "-f", self.pidfile, check=False, timeout=15)
        except ClusterError:
            pass
        return self.local.wait()


@dataclass
class Cluster:
    """The servers of a run (a servers file), their placement of nodes, and their connections."""

    servers: dict[str, Server]
    placement: dict[str, str] = field(default_factory=dict)  # node or "link<N>" -> server, from the file
    path: Path | None = None
    tag: str = field(default_factory=lambda: str(os.getpid()))
    report: dict[str, object] = field(default_factory=dict)  # what preflight found (run metadata)
    _used: dict[str, int] = field(default_factory=dict)  # unique pidfile numbers

    # --- the servers file ---------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Cluster:
        """Parse and check a servers file (docs/cluster.md); :class:`ClusterError` names the key."""
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except OSError as e:
            raise ClusterError(f"servers file {path}: cannot be read ({e.strerror})") from None
        except tomllib.TOMLDecodeError as e:
            raise ClusterError(f"servers file {path}: not TOML ({e})") from None

        def fail(msg: str) -> ClusterError:
            return ClusterError(f"servers file {path}: {msg}")

        if unknown := set(data) - {"servers", "placement"}:
            raise fail(f"unknown table {sorted(unknown)[0]!r} (known: servers, placement)")
        raw = data.get("servers")
        if not isinstance(raw, dict) or len(raw) < 2:
            raise fail('name two servers or more, each a table [servers.NAME] with ssh = "user@host"')
        servers: dict[str, Server] = {}
        for name, s in raw.items():
            if not NAME_RE.match(name) or name == "localhost":
                raise fail(
                    f"server name {name!r}: 1-32 lowercase letters, digits, - or _, starting with a letter "
                    "(not localhost, which Mininet's cluster edition takes for the head)"
                )
            if not isinstance(s, dict):
                raise fail(f"[servers.{name}] must be a table")
            if unknown := set(s) - SERVER_KEYS:
                raise fail(
                    f"[servers.{name}]: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(SERVER_KEYS))})"
                )
            if not isinstance(s.get("ssh"), str) or not s["ssh"]:
                raise fail(f'[servers.{name}]: ssh = "user@host" is required (what `ssh` is given)')
            for k in ("ssh_config", "cpus", "repo"):
                if k in s and not isinstance(s[k], str):
                    raise fail(f"[servers.{name}]: {k} must be a string")
            if "cpus" in s:
                try:
                    parse_cpus(s["cpus"])
                except CoresError as e:
                    raise fail(f"[servers.{name}]: cpus: {e}") from None
            underlay: dict[str, list[str]] = {}
            u = s.get("underlay", {})
            if not isinstance(u, dict):
                raise fail(f'[servers.{name}.underlay] must map other servers to interfaces: peer = "eth1"')
            for peer, ifs in u.items():
                ifs = [ifs] if isinstance(ifs, str) else ifs
                if not (isinstance(ifs, list) and ifs and all(isinstance(i, str) and i for i in ifs)):
                    raise fail(f'[servers.{name}.underlay]: {peer} = "eth1" (or a list of interfaces)')
                underlay[peer] = list(ifs)
            servers[name] = Server(
                name,
                s["ssh"],
                s.get("ssh_config"),
                s.get("cpus"),
                Path(s["repo"]) if "repo" in s else REPO,
                underlay,
            )
        for name, srv in servers.items():
            for peer in srv.underlay:
                if peer not in servers:
                    raise fail(f"[servers.{name}.underlay]: {peer!r} is not a server (servers: {', '.join(servers)})")
        placement = data.get("placement", {})
        if not isinstance(placement, dict) or not all(isinstance(v, str) for v in placement.values()):
            raise fail('[placement] maps nodes to servers: chicago = "sender", link1 = "delay"')
        for node, srv_name in placement.items():
            if srv_name not in servers:
                raise fail(f"[placement]: {node} = {srv_name!r}, which is not a server (servers: {', '.join(servers)})")
        return cls(servers, dict(placement), path)

    # --- placement ------------------------------------------------------------------------------

    def place(self, topo: Topology) -> dict[str, str]:
        """Each node of ``topo`` (hosts, switches, and ``link<N>``: the delay node of the N-th
        ``[[link]]``, counted from 1) -> its server: the servers file's ``[placement]``, then the
        topology's ``server =`` keys, then by default each emulated link's first end on the first
        server, its delay node on the second and its second end on the last (senders, delay node,
        receivers), and whatever is left on the first."""
        names = list(self.servers)
        first, middle, last = names[0], names[1] if len(names) > 2 else names[0], names[-1]
        out: dict[str, str] = {}
        for link in topo.links:
            if link.emulated:
                out.setdefault(link.a, first)
                out[f"link{link.index + 1}"] = middle
                out.setdefault(link.b, last)
        for node in [*topo.hosts, *topo.switches]:
            out.setdefault(node, first)
        for node, srv in {**topo.servers, **self.placement}.items():
            out[node] = srv
        known = set(topo.hosts) | set(topo.switches) | {f"link{link.index + 1}" for link in topo.links if link.emulated}
        for node, srv in {**topo.servers, **self.placement}.items():
            if node not in known:
                raise ClusterError(
                    f"placement of {node!r}: {topo.name} has no such host, switch or emulated link "
                    f"(it has {', '.join(sorted(known))})"
                )
            if srv not in self.servers:
                raise ClusterError(
                    f"{topo.name} places {node!r} on server {srv!r}, which the servers file does not name"
                )
        return out

    def segments(self, topo: Topology, where: Mapping[str, str]) -> list[tuple[str, str]]:
        """The (server, server) pairs the placement joins with an underlay, once per segment."""
        out = []
        for link in topo.links:
            ends = [link.a, f"link{link.index + 1}", link.b] if link.emulated else [link.a, link.b]
            for x, y in zip(ends, ends[1:], strict=False):
                if where[x] != where[y]:
                    out.append((where[x], where[y]))
        return out

    def underlays(self, topo: Topology, where: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
        """(server a, interface on a, server b, interface on b) of each segment, in order; an
        interface serves one segment (a ``passthru`` macvlan takes all its frames)."""
        used: dict[tuple[str, str], int] = {}
        out = []
        for a, b in self.segments(topo, where):
            ends = []
            for x, y in ((a, b), (b, a)):
                ifs = self.servers[x].underlay.get(y)
                if not ifs:
                    raise ClusterError(
                        f'server {x} has no underlay interface to server {y}: add [servers.{x}.underlay] {y} = "eth1" '
                        "(the interface on the link between them) to the servers file"
                    )
                n = used.get((x, y), 0)
                if n >= len(ifs):
                    raise ClusterError(
                        f"server {x} needs {n + 1} interfaces to server {y} for this topology's placement "
                        f"(one per segment), the servers file names {len(ifs)}: list more, or place the nodes otherwise"
                    )
                used[(x, y)] = n + 1
                ends.append(ifs[n])
            out.append((a, ends[0], b, ends[1]))
        return out

    # --- connections and processes -------------------------------------------------------------

    def connect(self) -> None:
        """One multiplexed SSH connection to each server (``ControlMaster``, in a session of its
        own so that no process group the run stops takes it along; :meth:`close` ends it).
        :class:`ClusterError` names a server that cannot be reached, and what to check."""
        for s in self.servers.values():
            if s.control and Path(s.control).exists():
                continue
            control = f"/tmp/{PREFIX}ssh-{self.tag}-{s.name}"
            argv = [*s.ssh_argv()[:-1], "-o", "ControlMaster=yes", "-o", f"ControlPath={control}"]
            argv += ["-o", "ControlPersist=yes", "-f", "-N", s.ssh]
            try:
                p = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=SSH_TIMEOUT_S + 20,
                    start_new_session=True,
                )
                why = (p.stderr.strip().splitlines() or ["no answer"])[-1] if p.returncode else ""
            except subprocess.TimeoutExpired:
                why = "no answer"
            if why or not Path(control).exists():
                raise ClusterError(
                    f"server {s.name} ({s.ssh}) cannot be reached over SSH: {why or 'no connection'}. Check that "
                    f"`{shlex.join(s.ssh_argv())} true` works without a password (keys, BatchMode), and nothing "
                    "was built"
                )
            s.control = control

    @classmethod
    @contextlib.contextmanager
    def session(cls, path: str | Path) -> Iterator[Cluster]:
        """The servers file at ``path``, connected (:meth:`connect`) until the block ends."""
        cluster = cls.load(path)
        try:
            cluster.connect()
            yield cluster
        finally:
            cluster.close()

    def close(self) -> None:
        for s in self.servers.values():
            if s.control and Path(s.control).exists():
                subprocess.run([*s.ssh_argv(), "-O", "exit"], capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
            if s.control:
                Path(s.control).unlink(missing_ok=True)
            s.control = ""

    def spawn(
        self,
        server: str,
        argv: Sequence[str],
        *,
        ns: str | None,
        stdout: Path | None = None,
        stderr: Path | None = None,
        env: Mapping[str, str] | None = None,
        cpus: Collection[int] | None = None,
    ) -> RemoteProcess:
        """``argv`` on ``server`` in ``ns`` as root, in a session of its own there (its group in a
        pid file), with ``env`` added, confined to ``cpus`` there; stdout and stderr streamed by
        the local ``ssh`` into the files given. Registered with the run's processes."""
        s = self.servers[server]
        n = self._used[server] = self._used.get(server, 0) + 1
        rundir = run_dir(self.tag, s.name)
        pidfile = f"{rundir}/p{n}.pid"
        cmd = [str(a) for a in argv]
        if cpus:
            cmd = ["taskset", "-c", cpu_list(cpus), *cmd]
        if env:
            cmd = ["env", *(f"{k}={v}" for k, v in env.items()), *cmd]
        if ns:
            cmd = ["ip", "netns", "exec", ns, *cmd]
        wrapper = f'mkdir -p {rundir} && echo $$ > {pidfile} && exec "$@"'
        remote = s.remote(["setsid", "--wait", "sh", "-c", wrapper, "sh", *cmd])
        local = processes.start(
            [*s.ssh_argv(), "--", remote], os.environ, limits=processes.UNCAPPED, stdout=stdout, stderr=stderr
        )
        return RemoteProcess(s, local, pidfile, argv)

    # --- cleanup ---------------------------------------------------------------------------------

    def sweep(self, prefix: str | None = None, only_gone: bool = False) -> dict[str, list[str]]:
        """Each server's namespaces named ``prefix`` (default: this run's, ``udtb-<tag>-``) and the
        processes in them, and the process groups this run started there: gone. ``only_gone``:
        only those of runs whose head process (``udtb-<pid>-``) no longer runs here. Returns the
        namespaces removed, by server; a server that cannot be reached is reported, not skipped."""
        prefix = prefix or f"{PREFIX}{self.tag}-"
        out: dict[str, list[str]] = {}
        errors = []
        for s in self.servers.values():
            try:
                if only_gone:
                    names = s.run("ip", "netns", "list").stdout.split()
                    tags = {n[len(PREFIX) :].split("-")[0] for n in names if n.startswith(prefix)}
                    gone = [t for t in tags if t.isdigit() and not Path(f"/proc/{t}").exists()]
                    scripts = [sweep_script(f"{PREFIX}{t}-", t, s.name) for t in gone]
                    out[s.name] = [ns for script in scripts for ns in s.shell(script).stdout.split()]
                    continue
                mine = self.tag if prefix.startswith(f"{PREFIX}{self.tag}") else None
                p = s.shell(sweep_script(prefix, mine, s.name))
                out[s.name] = p.stdout.split()
            except ClusterError as e:
                errors.append(str(e))
        if errors:
            raise ClusterError("; ".join(errors) + " (run `udtbed cleanup --servers FILE` once it answers)")
        return out


def run_dir(tag: str, server: str) -> str:
    """Where the run ``tag`` keeps the process-group files of its processes on ``server``: named
    after the server too, so that servers sharing a /tmp (the lab's) never read each other's."""
    return f"/tmp/{PREFIX}{tag}-{server}"


def sweep_script(prefix: str, tag: str | None, server: str) -> str:
    """The shell script ``server`` runs to remove ``prefix``'s namespaces (TERM, then KILL to every
    process in each, then delete) and the run ``tag``'s process groups there (every run's where None)."""
    groups = run_dir(tag, server) if tag else run_dir("[0-9]*", server)
    return f"""
for f in {groups}/*.pid; do [ -s "$f" ] && kill -KILL -"$(cat "$f")" 2>/dev/null; done
rm -rf {groups}
for ns in $(ip netns list | awk '{{print $1}}' | grep '^{prefix}'); do
  for sig in TERM KILL; do
    for p in $(ip netns pids "$ns"); do kill -$sig "$p" 2>/dev/null; done
    for i in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(ip netns pids "$ns")" ] && break; sleep 0.1; done
  done
  ip netns del "$ns" && echo "$ns"
done
true
"""


# --- preflight -------------------------------------------------------------------------------------


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def preflight(
    cluster: Cluster,
    run_dir: Path,
    segments: Iterable[tuple[str, str, str, str]] = (),
    files: Sequence[str] = RUN_FILES,
    log: object = None,
) -> dict[str, object]:
    """Check every server before anything is built; :class:`ClusterError` names the server and
    what to do. In order: it answers over SSH; root (or ``sudo -n``); :data:`TOOLS`; the run
    directory is the same there (a file the head writes is read there); the stack binaries are
    the head's (sha256); each underlay carries a 1500-byte frame unfragmented
    (``ping -M do -s 1472`` between two scratch namespaces); its clock's offset from the head's.
    Returns what it found, by server (the run's metadata)."""
    say = log if callable(log) else (lambda line: None)
    report: dict[str, object] = {}
    run_dir.mkdir(parents=True, exist_ok=True)
    nonce = uuid.uuid4().hex
    probe = run_dir / f".preflight-{cluster.tag}"
    probe.write_text(nonce)
    local = {f: _sha256(REPO / f) for f in files}
    try:
        cluster.connect()
        for s in cluster.servers.values():
            r: dict[str, object] = {"ssh": s.ssh}
            p = subprocess.run(
                [*s.ssh_argv(), "--", "id -u"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30
            )
            if p.stdout.strip() != "0":
                s.sudo = True
                if s.run("true", check=False).returncode != 0:
                    raise ClusterError(
                        f"server {s.name}: the SSH user is not root and `sudo -n` asks for a password: "
                        "give it passwordless sudo (or log in as root)"
                    )
            missing = s.shell(
                "".join(f"command -v {t} >/dev/null || echo {t}\n" for t in TOOLS), check=False
            ).stdout.split()
            if missing:
                raise ClusterError(
                    f"server {s.name} lacks {', '.join(missing)}: install iproute2, ethtool, iputils-ping, "
                    "mininet and util-linux there (docs/cluster.md)"
                )
            seen = s.run("cat", str(probe), check=False)
            if seen.stdout.strip() != nonce:
                raise ClusterError(
                    f"server {s.name} does not see the run directory {run_dir} (a file the head wrote there is "
                    "not there): put the results on a filesystem every server mounts at the same path (NFS, /proj)"
                )
            sums = s.run("sha256sum", *[str(s.repo / f) for f in files], check=False).stdout
            theirs = {
                Path(line.split(None, 1)[1].strip()): line.split()[0] for line in sums.splitlines() if " " in line
            }
            for f in files:
                if local[f] is None:
                    continue
                if theirs.get(s.repo / f) != local[f]:
                    what = "is missing" if s.repo / f not in theirs else "differs from the head's"
                    raise ClusterError(
                        f"server {s.name}: {s.repo / f} {what}: build the same commit there "
                        "(`make build` in the repository at the servers file's repo path)"
                    )
            r["sudo"] = s.sudo
            r["clock_offset_ms"], r["clock_uncertainty_ms"] = clock_offset(s)
            r["cores"] = len(server_cpus(s))
            report[s.name] = r
            say(
                f"  server {s.name} ({s.ssh}): ok; clock {r['clock_offset_ms']:+.1f} ms "
                f"(±{r['clock_uncertainty_ms']:.1f}); {r['cores']} CPUs"
            )
        for a, ia, b, ib in segments:
            mtu_probe(cluster, a, ia, b, ib)
            say(f"  underlay {a}:{ia} <-> {b}:{ib}: 1500-byte frames pass")
    finally:
        probe.unlink(missing_ok=True)
    cluster.report = report
    return report


def clock_offset(s: Server, samples: int = 9) -> tuple[float, float]:
    """(offset of the server's clock from the head's, ± half the round trip) in ms: a shell there
    answers each line the head sends with its clock, and the quickest of ``samples`` exchanges
    gives the estimate (NTP's): the server's reading against the midpoint of the exchange."""
    p = subprocess.Popen(
        [*s.ssh_argv(), "--", s.remote(["sh", "-c", "while read x; do date +%s.%N; done"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert p.stdin is not None and p.stdout is not None
    best: tuple[float, float] | None = None
    try:
        for _ in range(samples):
            t0 = time.time()
            p.stdin.write("x\n")
            p.stdin.flush()
            line = p.stdout.readline()
            t1 = time.time()
            if not line:
                raise ClusterError(f"server {s.name}: its clock could not be read over SSH")
            off, half = (float(line) - (t0 + t1) / 2) * 1e3, (t1 - t0) / 2 * 1e3
            if best is None or half < best[1]:
                best = (off, half)
    finally:
        p.stdin.close()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    assert best is not None
    return round(best[0], 3), round(best[1], 3)


def server_cpus(s: Server) -> list[int]:
    """The CPUs a run may use on ``s``: its ``cpus``, else every one it has online."""
    if s.cpus:
        return parse_cpus(s.cpus)
    n = int(s.run("nproc", "--all").stdout.strip() or "1")
    return list(range(n))


def mtu_probe(cluster: Cluster, a: str, ia: str, b: str, ib: str) -> None:
    """A 1500-byte frame (1472 bytes of ICMP payload, don't fragment) each way across the underlay
    between ``a``'s ``ia`` and ``b``'s ``ib``, from two scratch namespaces on macvlans as the run's
    nodes will have; :class:`ClusterError` where it does not pass."""
    sa, sb = cluster.servers[a], cluster.servers[b]
    ns = f"{PREFIX}{cluster.tag}-mtu"
    made = []
    try:
        for s, ifn, addr in ((sa, ia, "169.254.77.1"), (sb, ib, "169.254.77.2")):
            made.append(s)
            s.shell(
                f"""set -e
ip link show dev {shlex.quote(ifn)} >/dev/null
ip link set dev {shlex.quote(ifn)} up
ip netns add {ns}
ip link add link {shlex.quote(ifn)} name u0 netns {ns} type macvlan mode passthru
ip -n {ns} link set dev u0 up
ip -n {ns} addr add {addr}/30 dev u0
"""
            )
        p = sa.run(
            "ping", "-c", "3", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1472", "169.254.77.2", ns=ns, check=False
        )
        if " 0% packet loss" not in p.stdout and not re.search(r"[1-9]\d* received", p.stdout):
            mtu = sa.run("cat", f"/sys/class/net/{ia}/mtu", check=False).stdout.strip()
            mtu_b = sb.run("cat", f"/sys/class/net/{ib}/mtu", check=False).stdout.strip()
            raise ClusterError(
                f"the underlay between server {a} ({ia}, MTU {mtu or '?'}) and server {b} ({ib}, MTU {mtu_b or '?'}) "
                "does not carry a 1500-byte frame unfragmented (ping -M do -s 1472 got no reply): UDT sends "
                "1500-byte packets; give these interfaces (and the switch between them) an MTU of 1500 or more, "
                "or use an underlay with jumbo frames under a VXLAN/gretap"
            )
    finally:
        for s in made:
            s.run("ip", "netns", "del", ns, check=False)


# --- cores per server --------------------------------------------------------------------------


@dataclass
class ClusterCoreCheck(CoreCheck):
    """A part's seats placed on the servers (udtbed.emulation.cores): each server's seats against its CPUs;
    the runner's seat is the head's and is not counted."""

    need_by_server: dict[str, int] = field(default_factory=dict)
    have_by_server: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.checked or all(n <= self.have_by_server[s] for s, n in self.need_by_server.items())

    def shortfall(self) -> str:
        short = [
            f"server {s} needs {n} ({self.have_by_server[s]} there)"
            for s, n in self.need_by_server.items()
            if n > self.have_by_server[s]
        ]
        return f"at scale {self.scale:g} ({self.plan.summary()}): " + "; ".join(short or ["fits"])

    def as_json(self) -> dict[str, object]:
        return super().as_json() | {"need_by_server": self.need_by_server, "have_by_server": self.have_by_server}


def seat_server(seat: Seat, where: Mapping[str, str]) -> str | None:
    """The server a seat is on: its node's (None: the head's runner)."""
    return where[seat.node] if seat.node is not None else None


def core_check(
    plan: CorePlan,
    where: Mapping[str, str],
    cpus: Mapping[str, Sequence[int]],
    head: Sequence[int],
    scale: float,
    pin: str,
) -> ClusterCoreCheck:
    """:func:`udtbed.emulation.cores.check` with every seat on its server's CPUs (``cpus``, by server)."""
    if pin not in ("auto", "on", "off"):
        raise CoresError(f"pin {pin!r}: want auto, on or off")
    need: dict[str, int] = {}
    for seat in plan.seats:
        if (srv := seat_server(seat, where)) is not None:
            need[srv] = need.get(srv, 0) + seat.cores
    c = ClusterCoreCheck(
        plan,
        sum(len(cpus[s]) for s in need),
        scale,
        checked=scale >= CHECKED_FROM or pin == "on",
        need_by_server=need,
        have_by_server={s: len(cpus[s]) for s in need},
    )
    if c.checked and c.ok and pin != "off":
        pins, used = Pins(rest=frozenset(head)), dict.fromkeys(need, 0)
        for seat in plan.seats:
            if (srv := seat_server(seat, where)) is None:
                continue
            pins.seats[seat.key] = frozenset(cpus[srv][used[srv] : used[srv] + seat.cores])
            pins.what[seat.key] = f"{seat.what} (server {srv})"
            used[srv] += seat.cores
        c.pins = pins
    return c
