"""Builds a :class:`~udtbed.emulation.topology.Topology` with Mininet, under names that survive a crash.

Every node (host, switch, and the router of each emulated link) is a Mininet ``Node`` in its own
network namespace, and every link a Mininet ``Link``: a veth pair created inside the two nodes'
namespaces, with the interface names the experiments use (a host's is named after its net,
``data`` or ``control``; a switch's ports ``p1``, ``p2``...; a router's ends ``ra``/``rb``). A
switch is a Linux bridge ``br0`` inside its node. An emulated link's router is shaped by a
backend: ``linkem`` (our userspace ``udt-linkem``, an L2 forwarder) or ``netem`` (a bridge plus
``netem``+``tbf`` qdiscs on each egress). Mininet's ``TCLink`` shaping is not used (it needs
sch_netem too and does nothing without it), nor its ``Mininet`` class (no controller here, and
its start-up raises root-namespace sysctls). All hosts of a net share one subnet; ARP crosses the
emulated links like any frame.

Mininet's namespaces are anonymous: right after a node starts, ``ip netns attach`` names it
``udtb-<tag>-h-<host>``, ``udtb-<tag>-s-<switch>`` or ``udtb-<tag>-l<i>`` (router of link *i*).
Everything else runs its commands with ``ip netns exec <name>``, and cleanup works by name:
``udtbed cleanup`` kills every process in each ``udtb-*`` namespace (Mininet's node shells
included) and deletes it, so a crashed or killed run never blocks the next one. Nothing is
created in the root namespace. (``mn -c`` is never used: it kills by process name.)
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict

from udtharness import netns
from udtharness.netns import kill_namespace, sh
from udtharness.processes import StackProcess

from .cluster import Cluster, RemoteProcess, Server
from .topology import FRAME_BYTES, Direction, HostNic, Link, Topology, scaled_direction

PREFIX = "udtb-"
LINKEM = netns.LINKEM  # the harness's: UDT_LINKEM, else impl/target/release/udt-linkem
# Real-time forwarding threads that spin only the last 20 us: on 2 shared cores the default
# scheduling releases 18-40 % of a loaded direction's frames in bunches, which receivers timing
# arrivals (UDT's arrival speed, packet pairs) take for a faster link. UDT_LINKEM_ARGS overrides.
LINKEM_ARGS = "--realtime --spin-us 20"
# The netem backend's delay line: far above the frames 1 Gb/s x 110 ms holds in flight (~9 000).
NETEM_DELAY_LIMIT = 1_000_000
# Debian installs mininet for its own python3 only; the project's venv loads it from there.
MININET_SITE = Path(os.environ.get("UDTBED_MININET_SITE", "/usr/lib/python3/dist-packages"))


class MininetMissing(RuntimeError):
    """Mininet (its Python package or ``mnexec``) is not installed."""


class MininetNode(Protocol):
    """What the testbed uses of a Mininet ``Node`` (Mininet ships no type information)."""

    pid: int  # its shell's, in the node's namespace

    def stop(self) -> None: ...
    def cleanup(self) -> None: ...


class LinkSpec(TypedDict):
    """How link *i* was built (``Network.link_specs``, recorded with every result)."""

    ends: list[str]
    net: str
    built_by: str
    # linkem backend: udt-linkem's --a-to-b / --b-to-a specs, its --stats file, its extra arguments
    forward: NotRequired[str]
    reverse: NotRequired[str]
    stats: NotRequired[str]
    linkem_args: NotRequired[list[str]]
    # netem backend: the `tc qdisc add dev IF` arguments of each egress (see netem_args)
    forward_tc: NotRequired[list[list[str]]]
    reverse_tc: NotRequired[list[list[str]]]
    note: NotRequired[str]


class LinkemDirectionStats(TypedDict):
    """One direction of a udt-linkem stats line (impl/link-emulator/src/stats.rs): counters
    cumulative since start, ``in_flight``/``queue_frames`` gauges, ``*_avg_us``/``*_max_us``
    over the interval since the previous line. ``duplicated`` counts frames delivered twice
    (both copies in ``frames_out``), ``reordered`` frames held back (``reorder=`` in the spec)."""

    frames_in: int
    frames_out: int
    bytes_in: int
    bytes_out: int
    dropped_queue: int
    dropped_loss: int
    dropped_oversize: int
    send_errors: int
    duplicated: int
    reordered: int
    in_flight: int
    queue_frames: int
    queue_delay_avg_us: float
    queue_delay_max_us: float
    bunched: int
    late_avg_us: float
    late_max_us: float


class LinkCounters(TypedDict):
    """One direction of an emulated link, whichever backend built it (``Network.link_counters``):
    frames sent on, dropped by the DropTail queue, dropped by the loss model; cumulative."""

    frames_out: int
    dropped_queue: int
    dropped_loss: int


class LinkemStats(TypedDict):
    """One line of udt-linkem's ``--stats`` file: once a second, and once more (final) at exit."""

    t_s: float
    final: bool
    cpu_user_s: float
    cpu_sys_s: float
    a_to_b: LinkemDirectionStats
    b_to_a: LinkemDirectionStats


@functools.cache
def mininet_cluster() -> tuple[type, type]:
    """Mininet's cluster edition: ``RemoteNode`` and ``RemoteLink`` (mininet.examples.cluster)."""
    import warnings

    mininet()
    with warnings.catch_warnings():  # it imports distutils, deprecated in Python 3.10
        warnings.simplefilter("ignore", DeprecationWarning)
        from mininet.examples.cluster import (  # type: ignore[import-not-found, unused-ignore]
            RemoteLink,
            RemoteNode,
        )

    class ServerNode(RemoteNode):  # type: ignore[misc]
        """A ``RemoteNode`` reached with the server's own SSH command line (its ``-F``, the run's
        multiplexed connection): the cluster edition runs ``sudo -u <user> ssh`` on the head,
        which needs the remote user to exist here too."""

        def __init__(self, name: str, server: Server, **kwargs: object) -> None:
            self._server = server
            super().__init__(name, server=server.name, serverIP=server.ssh, user="-", **kwargs)

        @property
        def sshcmd(self) -> list[str]:
            return self._sshcmd

        @sshcmd.setter
        def sshcmd(self, value: list[str]) -> None:
            self._sshcmd = self._server.ssh_argv(tt=True) if value else []

        @property
        def dest(self) -> str:
            return self._server.ssh

        @dest.setter
        def dest(self, value: object) -> None:
            pass

    return ServerNode, RemoteLink


@functools.cache
def mininet() -> tuple[Callable[..., MininetNode], Callable[..., object], str]:
    """Mininet's ``Node`` and ``Link`` classes and its version.

    Where ``mininet`` is not importable (the venv), only that package is loaded from
    :data:`MININET_SITE`; nothing else of dist-packages goes on ``sys.path``."""
    no_pyc, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # not into a system directory
    try:
        if "mininet" not in sys.modules and importlib.util.find_spec("mininet") is None:
            spec = importlib.machinery.PathFinder.find_spec("mininet", [str(MININET_SITE)])
            if spec is None or spec.loader is None:
                raise MininetMissing(
                    f"Mininet is not installed (no mininet package in {MININET_SITE}): "
                    "run `make setup` (it installs Debian's mininet)"
                )
            module = importlib.util.module_from_spec(spec)
            sys.modules["mininet"] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules["mininet"]
                raise
        from mininet.link import Link as MnLink  # type: ignore[import-not-found, unused-ignore]
        from mininet.node import Node as MnNode  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise MininetMissing(f"Mininet cannot be imported ({e}): run `make setup`") from e
    finally:
        sys.dont_write_bytecode = no_pyc
    if shutil.which("mnexec") is None:
        raise MininetMissing("mnexec (Mininet's node launcher) is not on PATH: run `make setup`")
    init = sys.modules["mininet"].__file__
    if init is None:
        raise MininetMissing("the mininet found is not a regular package (no __init__.py): run `make setup`")
    site = Path(init).resolve().parents[1]
    version = next((d.version for d in importlib.metadata.distributions(name="mininet", path=[str(site)])), "?")
    return MnNode, MnLink, version


def cleanup(prefix: str = PREFIX, live: bool = True) -> list[str]:
    """Remove every testbed namespace (``udtb-…``) and the processes in it; returns their names.
    With ``live=False`` the namespaces of runs still alive are left alone (udtharness.netns)."""
    return netns.cleanup(prefix, live)


def owner_alive(ns: str) -> bool:
    """Whether the run that made the testbed namespace ``ns`` still runs."""
    return netns.owner_alive(ns, PREFIX)


# --- backends ------------------------------------------------------------------------------


def probe_netem() -> tuple[bool, str]:
    """Whether this kernel has sch_netem: add a netem qdisc in a scratch namespace."""
    ns = f"{PREFIX}probe-{os.getpid()}"
    sh("ip", "netns", "add", ns, check=False)
    try:
        sh("ip", "link", "set", "dev", "lo", "up", ns=ns, check=False)
        p = sh("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", ns=ns, check=False)
        if p.returncode == 0:
            return True, "`tc qdisc add ... netem` works in a scratch namespace"
        return False, f"`tc qdisc add ... netem` fails here: {p.stderr.strip()}"
    finally:
        sh("ip", "netns", "del", ns, check=False)


def choose_backend(requested: str = "auto") -> tuple[str, str]:
    """(backend, why): ``netem`` where the kernel has it, else ``linkem``; overridable."""
    if requested not in ("auto", "netem", "linkem"):
        raise ValueError(f"backend {requested!r}: want auto, netem or linkem")
    ok, why = probe_netem()
    if requested == "netem" and not ok:
        raise RuntimeError(f"backend netem requested but {why}; use BACKEND=linkem")
    if requested == "linkem":
        return "linkem", f"requested (netem probe: {why})"
    if requested == "netem":
        return "netem", "requested"
    return ("netem", why) if ok else ("linkem", why)


def linkem_spec(d: Direction, packets: int | None, nbytes: int | None) -> str:
    parts = [f"delay={round(d.delay_s * 1e9)}ns"]
    parts.append(f"rate={round(d.rate_bps)}bit" if d.rate_bps else "rate=unlimited")
    parts.append(f"queue={packets}p" if packets else f"queue={nbytes}b" if nbytes else "queue=1000p")
    if d.loss != "none":
        parts.append(f"loss={d.loss}")
    parts.append(f"seed={d.seed}")
    return ",".join(parts)


def netem_args(d: Direction, packets: int | None, nbytes: int | None) -> list[list[str]]:
    """tc commands (after ``tc qdisc add dev IF``) for one egress: a root netem for the delay and
    loss, with a child that is the link's rate and its DropTail queue. netem takes no seed here
    (bookworm's iproute2 has none): recorded as such.

    The child (docs/testbed/backends.md, "The netem backend: the traps"): where the queue is counted in
    packets, a second netem with ``rate`` and ``limit``. It is a virtual clock: each frame leaves
    one serialization time after the previous one, computed when it is queued, so a dequeue woken
    late (a loaded host, a VM) releases the frames that are due together but loses no capacity.
    tbf loses the tokens beyond its burst instead: in the VM it delivered 4-8 % below the rate.
    netem's ``limit`` counts the frames waiting and the one being sent: a DropTail of that many.
    Byte-counted queues (no netem equivalent) keep ``tbf`` with a ``bfifo`` child.

    The root's limit (default 1000 frames) must hold every frame in flight on the delay line, up
    to ~9 000 on 1 Gb/s x 110 ms: set far above it. Delay before the queue delivers each frame at
    the same time as a queue before the delay would, the delay being constant."""
    netem = ["root", "handle", "1:", "netem", "limit", str(NETEM_DELAY_LIMIT), "delay", f"{d.delay_s * 1e6:.3f}us"]
    if d.loss.startswith("ge:"):
        p, r, h, *k = [float(x) for x in d.loss[3:].split(",")]
        # `gemodel P R 1-H 1-K`: netem's h and k are the probabilities that a frame gets through
        # in Bad and Good, so its 1-H and 1-K are the loss probabilities, our h and k as they are.
        netem += ["loss", "gemodel", _percent(p), _percent(r), _percent(h), _percent(k[0] if k else 0.0)]
    elif d.loss != "none":
        t = d.loss.removeprefix("random:")
        netem += ["loss", "random", _percent(float(t[:-1]) / 100 if t.endswith("%") else float(t))]
    cmds = [netem]
    if d.rate_bps and packets:
        cmds.append(["parent", "1:1", "handle", "10:", "netem", "rate", f"{int(d.rate_bps)}bit", "limit", str(packets)])
    elif d.rate_bps:
        burst = max(FRAME_BYTES * 2, int(d.rate_bps / 8 / 1000))  # ~1 ms of tokens
        cmds.append(
            [
                "parent",
                "1:1",
                "handle",
                "10:",
                "tbf",
                "rate",
                f"{int(d.rate_bps)}bit",
                "burst",
                str(burst),
                "latency",
                "1s",
            ]
        )
        cmds.append(["parent", "10:1", "handle", "20:", "bfifo", "limit", str(nbytes)])
    return cmds


def nic_args(nic: HostNic, scale: float) -> list[str]:
    """The ``tc qdisc add dev data root`` arguments of a host's NIC (``nic`` in the topology):
    a tbf at the NIC's rate whose limit is its transmit queue. Its packets stay charged to their
    sockets' send buffers until they leave, so a full buffer blocks the socket's sender, UDP's
    too; a 1 ms burst (at least four frames) lets it send back to back as a NIC does."""
    rate = nic.rate_bps * scale
    burst = max(4 * FRAME_BYTES, round(rate / 8 * 0.001))
    return ["tbf", "rate", f"{rate:.0f}bit", "burst", str(burst), "limit", str(nic.limit_bytes(scale))]


def _percent(probability: float) -> str:
    return f"{probability * 100:.10g}%"


# --- the network ---------------------------------------------------------------------------


@dataclass
class Network:
    """A built topology. Use as a context manager; :meth:`close` is idempotent."""

    topo: Topology
    scale: float = 1.0
    backend: str = "linkem"
    workdir: Path = field(default_factory=lambda: Path("/tmp"))
    tag: str = field(default_factory=lambda: str(os.getpid()))
    namespaces: list[str] = field(default_factory=list)
    nodes: dict[str, MininetNode] = field(default_factory=dict)  # namespace name -> Mininet Node
    emulators: dict[int, StackProcess] = field(default_factory=dict)  # link -> its udt-linkem (netns.start_linkem)
    link_specs: dict[int, LinkSpec] = field(default_factory=dict)
    nic_specs: dict[str, list[str]] = field(default_factory=dict)  # host -> its NIC's tc qdisc arguments
    built_ifaces: list[tuple[str, str]] = field(default_factory=list)  # (namespace, interface) built here
    link_t0: dict[int, float] = field(default_factory=dict)  # wall clock at each emulator's start (its t_s = 0)
    link_cpus: dict[int, frozenset[int]] = field(default_factory=dict)  # link -> its emulator's CPUs (cores.Pins.links)
    built_by: str = ""
    # A cluster run (udtbed.emulation.cluster): the servers, and each node's ("link<N>": a delay node's) server.
    cluster: Cluster | None = None
    where: dict[str, str] = field(default_factory=dict)
    ns_server: dict[str, Server] = field(default_factory=dict)  # namespace -> its server (remote ones)
    remote_emulators: dict[int, RemoteProcess] = field(default_factory=dict)
    underlays: list[dict[str, str]] = field(default_factory=list)  # the interfaces each segment used
    underlay_ifaces: list[tuple[Server, str]] = field(default_factory=list)
    macvlans: set[tuple[str, str]] = field(default_factory=set)  # (namespace, interface) on an underlay

    def ns(self, node: str) -> str:
        kind = "h" if node in self.topo.hosts else "s"
        return f"{PREFIX}{self.tag}-{kind}-{node}"

    def router_ns(self, link: Link) -> str:
        return f"{PREFIX}{self.tag}-l{link.index}"

    def address(self, host: str, net: str = "data") -> str:
        return self.topo.address(host, net)

    def server(self, node: str) -> Server | None:
        """The server ``node`` (a host, a switch, or ``link<N>``) is on; None on this machine."""
        if self.cluster is None:
            return None
        return self.cluster.servers[self.where[node]]

    def sh(self, ns: str | None, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``argv`` in the namespace ``ns`` (None: the machine's own), on the server it is on."""
        server = self.ns_server.get(ns) if ns else None
        if server is not None:
            return server.run(*argv, ns=ns, check=check)
        return sh(*argv, check=check, ns=ns)

    def argv(self, ns: str, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` in ``ns``, here or over SSH on its server."""
        server = self.ns_server.get(ns)
        return server.command(argv, ns) if server else ["ip", "netns", "exec", ns, *argv]

    def __enter__(self) -> Network:
        try:
            self.build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _add_node(self, name: str, server: Server | None = None) -> MininetNode:
        """A Mininet node in a new namespace (on ``server``: the cluster edition's ``RemoteNode``),
        named ``name`` at once so that cleanup finds it."""
        if server is None:
            node_cls, _, _ = mininet()
            node = node_cls(name, inNamespace=True)
            self.nodes[name] = node
            sh("ip", "netns", "attach", name, str(node.pid))
        else:
            remote_cls, _ = mininet_cluster()
            node = remote_cls(name, server, inNamespace=True)
            self.nodes[name] = node
            server.run("ip", "netns", "attach", name, str(node.pid))
            self.ns_server[name] = server
        self.namespaces.append(name)
        self.sh(name, "ip", "link", "set", "dev", "lo", "up")
        self.sh(name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        return node

    def _segment(self, x: str, nx: str, ix: str, y: str, ny: str, iy: str) -> None:
        """The interfaces ``ix`` of ``x``'s namespace ``nx`` and ``iy`` of ``y``'s ``ny``, joined:
        a veth pair where both are on one server (Mininet's ``Link``, the cluster edition's
        ``RemoteLink`` there), else a ``passthru`` macvlan on each server's underlay interface
        to the other (udtbed.emulation.cluster), with GRO and LRO off on that interface."""
        sx, sy = self.server(x), self.server(y)
        if sx is None and sy is None:
            _, mn_link, _ = mininet()
            mn_link(self.nodes[nx], self.nodes[ny], intfName1=ix, intfName2=iy)
            return
        assert sx is not None and sy is not None and self.cluster is not None
        if sx.name == sy.name:
            _, remote_link = mininet_cluster()
            remote_link(self.nodes[nx], self.nodes[ny], intfName1=ix, intfName2=iy)
            return
        if self._underlay.get((sx.name, sy.name)):
            phys_x, phys_y = self._underlay[(sx.name, sy.name)].pop(0)
        else:
            phys_y, phys_x = self._underlay[(sy.name, sx.name)].pop(0)
        for server, phys, node, ifn in ((sx, phys_x, nx, ix), (sy, phys_y, ny, iy)):
            q = shlex.quote(phys)
            server.shell(
                f"""set -e
ip link set dev {q} up
{_offloads_script(q)}
ethtool -K {q} lro off >/dev/null 2>&1 || true
ip link add link {q} name {ifn} netns {self.nodes[node].pid} type macvlan mode passthru
ip -n {node} link set dev {ifn} up
"""
            )
            # A macvlan shows its lower device's offloads as on whatever it is told; the lower's
            # decide what the wire carries (the stack segments and checksums for a lower without).
            self.macvlans.add((node, ifn))
            self.underlay_ifaces.append((server, phys))
        self.underlays.append({x: f"{sx.name}:{phys_x}", y: f"{sy.name}:{phys_y}"})

    def _port(self, node: str, link: Link, ns_counter: dict[str, int]) -> tuple[str, str]:
        """(namespace, interface name) of ``node``'s end of ``link``."""
        if node in self.topo.hosts:
            return self.ns(node), link.net
        ns_counter[node] = ns_counter.get(node, 0) + 1
        return self.ns(node), f"p{ns_counter[node]}"

    def build(self) -> None:
        _, _, version = mininet()
        self.built_by = f"mininet {version} (Node, Link)"
        if not LINKEM.exists() and self.backend == "linkem":
            raise RuntimeError(f"{LINKEM} is not built: cd impl && cargo build --release -p link-emulator")
        self.workdir.mkdir(parents=True, exist_ok=True)
        topo = self.topo
        if self.cluster is not None:
            self.where = self.cluster.place(topo)
            self.built_by += (
                f" + its cluster edition (RemoteNode, RemoteLink) on {len(set(self.where.values()))} servers"
            )
            # Each pair of servers' segments: the two ends' interfaces, to be taken in order.
            self._underlay: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for a, ia, b, ib in self.cluster.underlays(topo, self.where):
                self._underlay.setdefault((a, b), []).append((ia, ib))
        for h in topo.hosts:
            self._add_node(self.ns(h), self.server(h))
            # Enough socket memory for a BDP of TCP at 1 Gb/s x 110 ms.
            self.sh(
                self.ns(h),
                "sysctl",
                "-qw",
                "net.ipv4.tcp_rmem=4096 131072 67108864",
                "net.ipv4.tcp_wmem=4096 65536 67108864",
                "net.ipv4.tcp_no_metrics_save=1",
            )
        for s in topo.switches:
            self._add_node(self.ns(s), self.server(s))
            self.sh(
                self.ns(s),
                "ip",
                "link",
                "add",
                "name",
                "br0",
                "type",
                "bridge",
                "forward_delay",
                "0",
                "stp_state",
                "0",
            )
            self.sh(self.ns(s), "ip", "link", "set", "dev", "br0", "up")
        counter: dict[str, int] = {}
        for link in topo.links:
            na, ia = self._port(link.a, link, counter)
            nb, ib = self._port(link.b, link, counter)
            # Mininet creates each veth pair inside the first node's namespace with the peer
            # directly in the second's, and brings both ends up: nothing touches the root namespace.
            if link.emulated:
                r, key = self.router_ns(link), f"link{link.index + 1}"
                self._add_node(r, self.server(key))
                self._segment(key, r, "ra", link.a, na, ia)
                self._segment(key, r, "rb", link.b, nb, ib)
                for ifn in ("ra", "rb"):
                    self._offloads_off(r, ifn)
                    self.built_ifaces.append((r, ifn))
            else:
                self._segment(link.a, na, ia, link.b, nb, ib)
            for node, ns, ifn in ((link.a, na, ia), (link.b, nb, ib)):
                self._offloads_off(ns, ifn)
                self.built_ifaces.append((ns, ifn))
                if node in topo.switches:
                    self.sh(ns, "ip", "link", "set", "dev", ifn, "master", "br0")
                else:
                    self.sh(ns, "ip", "addr", "add", f"{topo.address(node, link.net)}/16", "dev", ifn)
        for host, nic in topo.nics.items():
            if any(host in (link.a, link.b) and link.net == "data" for link in topo.links):
                args = nic_args(nic, self.scale)
                self.sh(self.ns(host), "tc", "qdisc", "add", "dev", "data", "root", *args)
                self.nic_specs[host] = args
        for link in topo.links:
            if link.emulated:
                self._start_link(link)
        self._resolve_arp()

    def _start_link(self, link: Link) -> None:
        r = self.router_ns(link)
        fwd, rev = (scaled_direction(d, self.scale) for d in (link.forward, link.reverse))
        qf = self.topo.queue_limit(link, link.forward, self.scale)
        qr = self.topo.queue_limit(link, link.reverse, self.scale)
        if self.backend == "linkem":
            spec_f, spec_r = linkem_spec(fwd, *qf), linkem_spec(rev, *qr)
            stats = self.workdir / f"linkem-{self.topo.name}-l{link.index}.jsonl"
            log = self.workdir / f"linkem-{self.topo.name}-l{link.index}.log"
            # How the emulator threads are scheduled (docs/testbed/timing.md, "CPU and emulation timing").
            extra = os.environ.get("UDT_LINKEM_ARGS", LINKEM_ARGS).split()
            server = self.ns_server.get(r)
            if server is not None and self.cluster is not None:
                self.remote_emulators[link.index] = self.cluster.spawn(
                    server.name,
                    netns.linkem_argv("ra", "rb", spec_f, spec_r, stats, extra, LINKEM),
                    ns=r,
                    stdout=log,
                    stderr=log,
                    cpus=self.link_cpus.get(link.index),
                )
            else:
                self.emulators[link.index] = netns.start_linkem(
                    r,
                    "ra",
                    "rb",
                    spec_f,
                    spec_r,
                    stats=stats,
                    args=extra,
                    log=log,
                    cpus=self.link_cpus.get(link.index),
                    linkem=LINKEM,
                )
            self.link_t0[link.index] = time.time()
            self.link_specs[link.index] = {
                "ends": [link.a, link.b],
                "net": link.net,
                "built_by": self.built_by,
                "forward": spec_f,
                "reverse": spec_r,
                "stats": str(stats),
                "linkem_args": extra,
            }
        else:
            self.sh(r, "ip", "link", "add", "name", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0")
            for ifn in ("ra", "rb"):
                self.sh(r, "ip", "link", "set", "dev", ifn, "master", "br0")
            self.sh(r, "ip", "link", "set", "dev", "br0", "up")
            cmds: dict[str, list[list[str]]] = {}
            for dev, d, q in (("rb", fwd, qf), ("ra", rev, qr)):
                for args in netem_args(d, *q):
                    self.sh(r, "tc", "qdisc", "add", "dev", dev, *args)
                cmds[dev] = netem_args(d, *q)
            self.link_specs[link.index] = {
                "ends": [link.a, link.b],
                "net": link.net,
                "built_by": self.built_by,
                "forward_tc": cmds["rb"],
                "reverse_tc": cmds["ra"],
                "note": "netem has no loss seed here",
            }
        time.sleep(0.05 if not self.remote_emulators else 0.5)
        for i, p in self.emulators.items():
            netns.check_linkem(p, f"udt-linkem for link {i}", show_log=True)
        for i, rp in self.remote_emulators.items():
            netns.check_linkem(rp, f"udt-linkem for link {i} on server {rp.server.name}", show_log=True)  # type: ignore[arg-type]

    def _resolve_arp(self) -> None:
        """Ping every host pair once so that no experiment's first frames wait for ARP."""
        for net in self.topo.nets:
            hosts = [
                h for h in self.topo.hosts if any(h in (link.a, link.b) and link.net == net for link in self.topo.links)
            ]
            procs = []
            for i, a in enumerate(hosts):
                for b in hosts[i + 1 :]:
                    procs.append(
                        subprocess.Popen(
                            self.argv(
                                self.ns(a),
                                ["ping", "-c", "2", "-i", "0.2", "-W", "2", "-q", self.topo.address(b, net)],
                            ),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
            for p in procs:
                p.wait()

    def link_stats_files(self) -> dict[int, tuple[Path, float]]:
        """Each emulator's ``--stats`` file (one JSON line a second, docs/link-emulation.md) and
        the wall-clock time its ``t_s`` counts from, by link index; none with the netem backend."""
        return {
            i: (Path(spec["stats"]), self.link_t0[i])
            for i, spec in self.link_specs.items()
            if spec.get("stats") and i in self.link_t0
        }

    def link_stats(self) -> dict[int, LinkemStats]:
        """The last stats line of each emulator (linkem backend)."""
        out: dict[int, LinkemStats] = {}
        for i, (path, _) in self.link_stats_files().items():
            if path.is_file():
                lines = path.read_text().splitlines()
                if lines:
                    try:
                        out[i] = json.loads(lines[-1])
                    except json.JSONDecodeError:
                        pass
        return out

    def offloads(self) -> dict[str, dict[str, int]]:
        """The offloads the testbed turns off (:data:`OFFLOADS`) as ``ethtool -k`` reads them on
        every interface it built: per feature, how many interfaces have it off, on, or could not
        be read. Anything but ``off`` everywhere means frames may cross an emulated link as
        super-packets."""
        out: dict[str, dict[str, int]] = {f: {} for f in OFFLOADS}
        have = shutil.which("ethtool") is not None or bool(self.ns_server)
        texts = []
        for ns, ifn in self.built_ifaces:
            if (ns, ifn) not in self.macvlans:
                texts.append(self.sh(ns, "ethtool", "-k", ifn, check=False).stdout if have else "")
        texts += [server.run("ethtool", "-k", phys, check=False).stdout for server, phys in self.underlay_ifaces]
        for text in texts:
            states = dict(re.findall(r"^([a-z0-9-]+): (on|off)", text, re.M))
            for f in OFFLOADS:
                state = states.get(f, "unread")
                out[f][state] = out[f].get(state, 0) + 1
        return out

    def link_counters(self) -> dict[int, dict[str, LinkCounters]]:
        """Each emulated link's counters by direction (``a_to_b``, ``b_to_a``), from udt-linkem's
        last stats line (written once a second) or from the kernel's qdisc statistics (netem: the
        rate stage's drops are the queue's; the root's others, the loss model's)."""
        if self.backend == "linkem":

            def counters(d: LinkemDirectionStats) -> LinkCounters:
                return {
                    "frames_out": d["frames_out"],
                    "dropped_queue": d["dropped_queue"],
                    "dropped_loss": d["dropped_loss"],
                }

            return {
                i: {"a_to_b": counters(s["a_to_b"]), "b_to_a": counters(s["b_to_a"])}
                for i, s in self.link_stats().items()
            }
        out: dict[int, dict[str, LinkCounters]] = {}
        for link in self.topo.links:
            if not link.emulated:
                continue
            out[link.index] = {}
            for d, dev in (("a_to_b", "rb"), ("b_to_a", "ra")):
                qs = json.loads(self.sh(self.router_ns(link), "tc", "-s", "-j", "qdisc", "show", "dev", dev).stdout)
                root = next(q for q in qs if q.get("root"))
                child = [q for q in qs if q.get("parent") == "1:1"]
                queue_drops = sum(q["drops"] for q in child)
                out[link.index][d] = {
                    "frames_out": int(root["packets"]),
                    "dropped_queue": int(queue_drops),
                    "dropped_loss": int(root["drops"]) - int(queue_drops),
                }
        return out

    def close(self) -> None:
        netns.stop_linkem(self.emulators.values(), grace=3.0)
        self.emulators.clear()
        for rp in self.remote_emulators.values():
            rp.signal("TERM")  # a final stats line, as stop_linkem's
        for rp in self.remote_emulators.values():
            rp.stop(timeout=3.0)
        self.remote_emulators.clear()
        for node in self.nodes.values():
            try:
                node.stop()  # HUP to the node's shell's process group, close its pty, reap it
            except ProcessLookupError:
                node.cleanup()
        self.nodes.clear()
        for ns in reversed(self.namespaces):
            if ns not in self.ns_server:
                kill_namespace(ns)
        if self.cluster is not None and self.ns_server:
            self.cluster.sweep(f"{PREFIX}{self.tag}-")  # every server's namespaces of this run
        self.ns_server.clear()
        self.namespaces.clear()

    def _offloads_off(self, ns: str, ifname: str) -> None:
        """:func:`_offloads_off` on the server ``ns`` is on."""
        if ns in self.ns_server:
            self.sh(ns, "sh", "-c", _offloads_script(ifname), check=False)
        else:
            _offloads_off(ns, ifname)


# What _offloads_off turns off, by the names ``ethtool -k`` prints.
OFFLOADS = (
    "tx-checksumming",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "tx-udp-segmentation",
)


def _offloads_script(ifname: str) -> str:
    return (
        f"ethtool -K {ifname} tx off tso off gso off gro off >/dev/null 2>&1; "
        f"ethtool -K {ifname} tx-udp-segmentation off >/dev/null 2>&1; true"
    )


def _offloads_off(ns: str, ifname: str) -> None:
    """Frames, not super-packets, on every interface the topology builds: netem's loss and rate
    and udt-linkem's frame-by-frame forwarding must each see one wire frame. ``gso off`` leaves
    UDP's own segmentation (``tx-udp-segmentation``, what our UDT runtime's GSO sends use) on
    a veth, so it is turned off by name as well (docs/testbed/backends.md, "The netem backend: the traps")."""
    if shutil.which("ethtool"):
        sh("ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off", ns=ns, check=False)
        sh("ethtool", "-K", ifname, "tx-udp-segmentation", "off", ns=ns, check=False)
