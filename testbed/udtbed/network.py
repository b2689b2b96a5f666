"""Builds a :class:`~udtbed.topology.Topology` with Mininet, under names that survive a crash.

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

from .topology import FRAME_BYTES, Direction, HostNic, Link, Topology, scaled_direction

PREFIX = "udtb-"
REPO = Path(__file__).resolve().parents[2]
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

    The child (docs/testbed.md, "The netem backend: the traps"): where the queue is counted in
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
    link_cpus: dict[int, frozenset[int]] = field(default_factory=dict)  # link -> its emulator's CPUs (udtbed.cores)
    built_by: str = ""

    def ns(self, node: str) -> str:
        kind = "h" if node in self.topo.hosts else "s"
        return f"{PREFIX}{self.tag}-{kind}-{node}"

    def router_ns(self, link: Link) -> str:
        return f"{PREFIX}{self.tag}-l{link.index}"

    def address(self, host: str, net: str = "data") -> str:
        return self.topo.address(host, net)

    def __enter__(self) -> Network:
        try:
            self.build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _add_node(self, name: str) -> MininetNode:
        """A Mininet node in a new namespace, named ``name`` at once so that cleanup finds it."""
        node_cls, _, _ = mininet()
        node = node_cls(name, inNamespace=True)
        self.nodes[name] = node
        sh("ip", "netns", "attach", name, str(node.pid))
        self.namespaces.append(name)
        sh("ip", "link", "set", "dev", "lo", "up", ns=name)
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", ns=name)
        return node

    def _port(self, node: str, link: Link, ns_counter: dict[str, int]) -> tuple[str, str]:
        """(namespace, interface name) of ``node``'s end of ``link``."""
        if node in self.topo.hosts:
            return self.ns(node), link.net
        ns_counter[node] = ns_counter.get(node, 0) + 1
        return self.ns(node), f"p{ns_counter[node]}"

    def build(self) -> None:
        _, mn_link, version = mininet()
        self.built_by = f"mininet {version} (Node, Link)"
        if not LINKEM.exists() and self.backend == "linkem":
            raise RuntimeError(f"{LINKEM} is not built: cd impl && cargo build --release -p link-emulator")
        self.workdir.mkdir(parents=True, exist_ok=True)
        topo = self.topo
        for h in topo.hosts:
            self._add_node(self.ns(h))
            # Enough socket memory for a BDP of TCP at 1 Gb/s x 110 ms.
            sh(
                "sysctl",
                "-qw",
                "net.ipv4.tcp_rmem=4096 131072 67108864",
                "net.ipv4.tcp_wmem=4096 65536 67108864",
                "net.ipv4.tcp_no_metrics_save=1",
                ns=self.ns(h),
            )
        for s in topo.switches:
            self._add_node(self.ns(s))
            sh(
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
                ns=self.ns(s),
            )
            sh("ip", "link", "set", "dev", "br0", "up", ns=self.ns(s))
        counter: dict[str, int] = {}
        for link in topo.links:
            na, ia = self._port(link.a, link, counter)
            nb, ib = self._port(link.b, link, counter)
            # Mininet creates each veth pair inside the first node's namespace with the peer
            # directly in the second's, and brings both ends up: nothing touches the root namespace.
            if link.emulated:
                r = self.router_ns(link)
                router = self._add_node(r)
                mn_link(router, self.nodes[na], intfName1="ra", intfName2=ia)
                mn_link(router, self.nodes[nb], intfName1="rb", intfName2=ib)
                for ifn in ("ra", "rb"):
                    _offloads_off(r, ifn)
                    self.built_ifaces.append((r, ifn))
            else:
                mn_link(self.nodes[na], self.nodes[nb], intfName1=ia, intfName2=ib)
            for node, ns, ifn in ((link.a, na, ia), (link.b, nb, ib)):
                _offloads_off(ns, ifn)
                self.built_ifaces.append((ns, ifn))
                if node in topo.switches:
                    sh("ip", "link", "set", "dev", ifn, "master", "br0", ns=ns)
                else:
                    sh("ip", "addr", "add", f"{topo.address(node, link.net)}/16", "dev", ifn, ns=ns)
        for host, nic in topo.nics.items():
            if any(host in (link.a, link.b) and link.net == "data" for link in topo.links):
                args = nic_args(nic, self.scale)
                sh("tc", "qdisc", "add", "dev", "data", "root", *args, ns=self.ns(host))
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
            # How the emulator threads are scheduled (docs/testbed.md, "CPU and emulation timing").
            extra = os.environ.get("UDT_LINKEM_ARGS", LINKEM_ARGS).split()
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
            sh("ip", "link", "add", "name", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0", ns=r)
            for ifn in ("ra", "rb"):
                sh("ip", "link", "set", "dev", ifn, "master", "br0", ns=r)
            sh("ip", "link", "set", "dev", "br0", "up", ns=r)
            cmds: dict[str, list[list[str]]] = {}
            for dev, d, q in (("rb", fwd, qf), ("ra", rev, qr)):
                for args in netem_args(d, *q):
                    sh("tc", "qdisc", "add", "dev", dev, *args, ns=r)
                cmds[dev] = netem_args(d, *q)
            self.link_specs[link.index] = {
                "ends": [link.a, link.b],
                "net": link.net,
                "built_by": self.built_by,
                "forward_tc": cmds["rb"],
                "reverse_tc": cmds["ra"],
                "note": "netem has no loss seed here",
            }
        time.sleep(0.05)
        for i, p in self.emulators.items():
            netns.check_linkem(p, f"udt-linkem for link {i}", show_log=True)

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
                            [
                                "ip",
                                "netns",
                                "exec",
                                self.ns(a),
                                "ping",
                                "-c",
                                "2",
                                "-i",
                                "0.2",
                                "-W",
                                "2",
                                "-q",
                                self.topo.address(b, net),
                            ],
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
        have = shutil.which("ethtool") is not None
        for ns, ifn in self.built_ifaces:
            text = sh("ethtool", "-k", ifn, ns=ns, check=False).stdout if have else ""
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
                qs = json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", dev, ns=self.router_ns(link)).stdout)
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
        for node in self.nodes.values():
            try:
                node.stop()  # HUP to the node's shell's process group, close its pty, reap it
            except ProcessLookupError:
                node.cleanup()
        self.nodes.clear()
        for ns in reversed(self.namespaces):
            kill_namespace(ns)
        self.namespaces.clear()


# What _offloads_off turns off, by the names ``ethtool -k`` prints.
OFFLOADS = (
    "tx-checksumming",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "tx-udp-segmentation",
)


def _offloads_off(ns: str, ifname: str) -> None:
    """Frames, not super-packets, on every interface the topology builds: netem's loss and rate
    and udt-linkem's frame-by-frame forwarding must each see one wire frame. ``gso off`` leaves
    UDP's own segmentation (``tx-udp-segmentation``, what our UDT runtime's GSO sends use) on
    a veth, so it is turned off by name as well (docs/testbed.md, "The netem backend: the traps")."""
    if shutil.which("ethtool"):
        sh("ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off", ns=ns, check=False)
        sh("ethtool", "-K", ifname, "tx-udp-segmentation", "off", ns=ns, check=False)
