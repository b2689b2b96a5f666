"""Topology files: hosts, switches and links with per-direction emulation, as TOML.

A topology is data (``topologies/*.toml``); :mod:`udtbed.emulation.network` builds it. Every error names
the file, the line and what is wrong — syntax errors from ``tomllib`` carry their position, and
for semantic errors :class:`_Locator` finds the line of the offending key.

Format (see docs/testbed/topologies.md for the full reference)::

    name = "chicago-amsterdam"
    paper = "SC'04 Fig. 11: StarLight–SARA, 1 Gb/s, 110 ms RTT"
    [hosts]
    chicago = {}                      # or { nic = { rate = "1gbit", queue = "1000p" } }
    amsterdam = {}
    [[link]]
    ends = ["chicago", "amsterdam"]   # forward = ends[0] -> ends[1]
    delay = "55ms"                    # one-way, each direction
    rate = "1gbit"
    queue = "bdp"                     # "1000p", "64kb", "bdp", "max(bdp,100p)"
    [link.reverse]                    # per-direction overrides: [link.forward] / [link.reverse]
    loss = "ge:0.0005,0.2,1"
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypedDict

FRAME_BYTES = 1514  # full-size Ethernet frame as tc and udt-linkem count it
ACK_PERIOD_S = 0.01  # UDT's SYN: a full ACK at most every 10 ms (UDT4.md §9.2)
DIRECTION_KEYS = {"delay", "rate", "queue", "loss", "seed", "bdp_rtt"}
LINK_KEYS = DIRECTION_KEYS | {"ends", "net", "forward", "reverse", "server"}
TOP_KEYS = {"name", "paper", "description", "hosts", "switches", "link"}
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# What each direction key's value looks like, for the error on a value of the wrong type.
_EXAMPLES = {"delay": "55ms", "rate": "1gbit", "queue": "1000p", "loss": "0.001", "bdp_rtt": "110ms"}


class TopologyError(ValueError):
    """A topology file is wrong; the message is ``file:line: what is wrong``."""


# --- value parsing (same syntax as udt-linkem's link spec) ---------------------------------

_DELAY_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_RATE_UNITS = {"bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6, "gbit": 1e9, "gbps": 1e9}


def parse_delay(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|ms|us|ns)\s*", text)
    if not m:
        raise ValueError(f"delay {text!r}: want a number with a unit s/ms/us/ns, e.g. '55ms'")
    return float(m.group(1)) * _DELAY_UNITS[m.group(2)]


def parse_rate(text: str) -> float | None:
    if text.strip() == "unlimited":
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]+)\s*", text.lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise ValueError(
            f"rate {text!r}: want bits/s with a unit (bit, kbit, mbit, gbit), e.g. '622mbit', or 'unlimited'"
        )
    v = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if v <= 0:
        raise ValueError(f"rate {text!r} must be positive")
    return v


def parse_loss(text: str) -> str:
    t = text.strip()
    if t == "none":
        return t
    m = re.fullmatch(r"(random:)?([0-9]*\.?[0-9]+)(%?)", t)
    if m:
        p = float(m.group(2)) / (100 if m.group(3) else 1)
        if not 0 <= p <= 1:
            raise ValueError(f"loss {text!r}: probability must be within [0, 1]")
        return t
    m = re.fullmatch(r"ge:([^,]+),([^,]+),([^,]+)(,[^,]+)?", t)
    if m:
        try:
            vals = [float(g.strip(",")) for g in m.groups() if g]
        except ValueError:
            raise ValueError(f"loss {text!r}: ge:p,r,h[,k] takes numbers") from None
        if all(0 <= v <= 1 for v in vals):
            return t
        raise ValueError(f"loss {text!r}: ge:p,r,h[,k] probabilities must be within [0, 1]")
    raise ValueError(f"loss {text!r}: want 'none', 'P', 'P%', 'random:P' or 'ge:p,r,h[,k]'")


@dataclass(frozen=True)
class Queue:
    """DropTail limit: a fixed count of packets or bytes, or derived from the BDP."""

    packets: int | None = None
    bytes: int | None = None
    bdp: bool = False
    min_packets: int = 0

    @staticmethod
    def parse(text: str) -> Queue:
        t = text.replace(" ", "").lower()
        m = re.fullmatch(r"max\((bdp),(\d+)p\)|max\((\d+)p,(bdp)\)", t)
        if m:
            return Queue(bdp=True, min_packets=int(m.group(2) or m.group(3)))
        if t == "bdp":
            return Queue(bdp=True)
        m = re.fullmatch(r"(\d+)(p|b|kb|mb)", t)
        if m:
            n = int(m.group(1))
            if n <= 0:
                raise ValueError(f"queue {text!r} must be positive")
            if m.group(2) == "p":
                return Queue(packets=n)
            return Queue(bytes=n * {"b": 1, "kb": 1024, "mb": 1024 * 1024}[m.group(2)])
        raise ValueError(f"queue {text!r}: want '1000p', '64kb', '2mb', 'bdp' or 'max(bdp,100p)'")

    def packets_for(self, rate_bps: float | None, rtt_s: float, scale: float) -> int | None:
        """Limit in packets at the scaled rate (None = bytes limit, see :meth:`bytes_for`).

        Fixed limits scale with the rate so that the queueing delay stays what it was at
        scale 1; never below 10 packets."""
        if self.bdp:
            if rate_bps is None:
                raise ValueError("queue 'bdp' needs a rate")
            bdp = math.ceil(rate_bps * scale * rtt_s / 8 / FRAME_BYTES)
            return max(bdp, self.min_packets, 10)
        if self.packets is not None:
            return max(10, round(self.packets * scale))
        return None

    def bytes_for(self, scale: float) -> int | None:
        if self.bytes is None:
            return None
        return max(10 * FRAME_BYTES, round(self.bytes * scale))


@dataclass(frozen=True)
class HostNic:
    """A host's own interface as a bottleneck (``nic`` in ``[hosts]``): its data interface sends
    at ``rate_bps`` from a transmit queue of ``queue``. Unlike a router's queue it holds every
    socket's packets against that socket's send buffer, so a full buffer blocks the sender
    (UDP included) instead of its packets being dropped; the queue drops only what the buffers
    together overfill it with."""

    rate_bps: float
    queue: Queue = Queue(packets=1000)

    def limit_bytes(self, scale: float) -> int:
        """The queue's limit in bytes at ``scale`` (a packet limit counts full frames)."""
        pkts = self.queue.packets_for(self.rate_bps, 0.0, scale)
        return pkts * FRAME_BYTES if pkts is not None else self.queue.bytes_for(scale) or 10 * FRAME_BYTES


@dataclass(frozen=True)
class Direction:
    """One direction of a link: what a frame meets from one end to the other."""

    delay_s: float = 0.0
    rate_bps: float | None = None
    queue: Queue = Queue(packets=1000)
    loss: str = "none"
    seed: int = 1
    bdp_rtt_s: float | None = None  # RTT that 'bdp' queues use (default: this link's round trip)

    @property
    def shaped(self) -> bool:
        return self.delay_s > 0 or self.rate_bps is not None or self.loss != "none"


@dataclass(frozen=True)
class Link:
    index: int
    a: str
    b: str
    net: str
    forward: Direction  # a -> b
    reverse: Direction  # b -> a
    line: int

    @property
    def emulated(self) -> bool:
        return self.forward.shaped or self.reverse.shaped

    def direction(self, frm: str) -> Direction:
        return self.forward if frm == self.a else self.reverse

    def other(self, end: str) -> str:
        return self.b if end == self.a else self.a


@dataclass(frozen=True)
class Hop:
    link: Link
    frm: str
    to: str

    @property
    def dir(self) -> Direction:
        return self.link.direction(self.frm)

    @property
    def back(self) -> Direction:
        return self.link.direction(self.to)


@dataclass
class Topology:
    name: str
    path: Path
    hosts: list[str]
    switches: dict[str, str]  # switch -> its net
    links: list[Link]
    paper: str = ""
    description: str = ""
    nets: list[str] = field(default_factory=list)
    nics: dict[str, HostNic] = field(default_factory=dict)  # host -> its NIC, where it is a bottleneck
    servers: dict[str, str] = field(default_factory=dict)  # node -> server in a cluster run (udtbed.emulation.cluster)

    def address(self, host: str, net: str = "data") -> str:
        """IPv4 address of ``host`` on ``net`` (10.<100+net>.<i/200>.<i%200+1>/16)."""
        if net not in self.nets:
            raise KeyError(f"{self.name}: no net {net!r} (nets: {', '.join(self.nets)})")
        if not any(host in (link.a, link.b) and link.net == net for link in self.links):
            raise KeyError(f"{self.name}: host {host!r} has no interface on net {net!r}")
        i = self.hosts.index(host)
        return f"10.{100 + self.nets.index(net)}.{i // 200}.{i % 200 + 1}"

    def route(self, src: str, dst: str, net: str = "data") -> list[Hop]:
        """The hops from host ``src`` to host ``dst`` on ``net`` (hosts do not forward)."""
        prev: dict[str, Hop | None] = {src: None}
        todo = deque([src])
        while todo:
            node = todo.popleft()
            if node == dst:
                break
            if node != src and node not in self.switches:
                continue
            for link in self.links:
                if link.net == net and node in (link.a, link.b):
                    nxt = link.other(node)
                    if nxt not in prev:
                        prev[nxt] = Hop(link, node, nxt)
                        todo.append(nxt)
        if dst not in prev:
            raise KeyError(f"{self.name}: no path from {src} to {dst} on net {net!r}")
        hops: list[Hop] = []
        node = dst
        while (hop := prev[node]) is not None:
            hops.append(hop)
            node = hop.frm
        return hops[::-1]

    def expected_rtt_s(self, src: str, dst: str, net: str = "data") -> float:
        return sum(h.dir.delay_s + h.back.delay_s for h in self.route(src, dst, net))

    def bottleneck_bps(self, src: str, dst: str, net: str = "data", scale: float = 1.0) -> float | None:
        rates = [h.dir.rate_bps for h in self.route(src, dst, net) if h.dir.rate_bps]
        if net == "data" and src in self.nics:
            rates.append(self.nics[src].rate_bps)
        return min(rates) * scale if rates else None

    def window_packets(self, src: str, dst: str, scale: float, payload: int) -> int | None:
        """Packets of ``payload`` bytes in flight that keep the path from ``src`` to ``dst``
        busy at ``scale`` with every rated hop's queue full: the bottleneck's rate over the RTT plus
        two ACK periods (UDT acknowledges every 10 ms, UDT4.md §9.2), plus the queues' packets.
        None when no link on the path has a rate."""
        rate = self.bottleneck_bps(src, dst, net="data", scale=scale)
        if rate is None:
            return None
        rtt = self.expected_rtt_s(src, dst) + 2 * ACK_PERIOD_S
        queued = 0
        for h in (h for h in self.route(src, dst) if h.dir.rate_bps):  # queues build where a rate is
            pkts, nbytes = self.queue_limit(h.link, h.dir, scale)
            queued += pkts if pkts is not None else math.ceil((nbytes or 0) / FRAME_BYTES)
        return math.ceil(rate * rtt / 8 / payload) + queued

    def timing_hops(self, src: str, dst: str, net: str = "data") -> list[Hop]:
        """The hops whose release timing the receiver sees: from the bottleneck (the first hop
        of the lowest rate) to ``dst``; every hop when no link on the path has a rate. A hop
        before the bottleneck may release frames late and bunched, but the bottleneck spaces
        them again by at least their serialization time: the receiver never sees them arrive
        faster than the bottleneck, which is the distortion hostwatch flags."""
        hops = self.route(src, dst, net)
        rates = [h.dir.rate_bps for h in hops if h.dir.rate_bps]
        if not rates:
            return hops
        first = next(i for i, h in enumerate(hops) if h.dir.rate_bps == min(rates))
        return hops[first:]

    def queue_limit(self, link: Link, d: Direction, scale: float) -> tuple[int | None, int | None]:
        """(packets, bytes) DropTail limit of direction ``d`` of ``link`` at ``scale``."""
        rtt = d.bdp_rtt_s if d.bdp_rtt_s is not None else link.forward.delay_s + link.reverse.delay_s
        return d.queue.packets_for(d.rate_bps, rtt, scale), d.queue.bytes_for(scale)


# --- loading -------------------------------------------------------------------------------

# One step of a key path in the file: a table or key name, or the index of a [[link]].
KeyPart = str | int | None


class _Fail(Protocol):
    """Makes the :class:`TopologyError` for ``msg`` at the line of the key path ``key``."""

    def __call__(self, msg: str, *key: KeyPart) -> TopologyError: ...


class _DirectionFields(TypedDict, total=False):
    """The :class:`Direction` fields a [[link]] table sets (the others keep their defaults)."""

    delay_s: float
    rate_bps: float | None
    queue: Queue
    loss: str
    seed: int
    bdp_rtt_s: float | None


class _Locator:
    """Finds the line of a key path in TOML source (best effort; falls back to the table)."""

    def __init__(self, text: str):
        self.lines = text.splitlines()

    def _headers(self) -> list[tuple[int, str, bool]]:
        out = []
        for i, raw in enumerate(self.lines, 1):
            s = raw.split("#", 1)[0].strip()
            m = re.fullmatch(r"\[\[\s*([^\]]+?)\s*\]\]", s) or re.fullmatch(r"\[\s*([^\]]+?)\s*\]", s)
            if m:
                out.append((i, m.group(1).replace(" ", ""), s.startswith("[[")))
        return out

    def line(self, *path: KeyPart) -> int:
        headers = self._headers()
        start, end, table = 1, len(self.lines) + 1, ""
        keys = list(path)
        if keys and isinstance(keys[0], str) and len(keys) > 1 and isinstance(keys[1], int):
            # array of tables: the n-th [[name]] header
            name, n = keys[0], keys[1]
            arr = [h for h in headers if h[1] == name and h[2]]
            if n < len(arr):
                start = arr[n][0]
                later = [h[0] for h in headers if h[0] > start and not h[1].startswith(name + ".")]
                end = later[0] if later else len(self.lines) + 1
                table = name
                keys = keys[2:]
                if keys and keys[0] in ("forward", "reverse"):
                    sub = [h[0] for h in headers if start < h[0] < end and h[1] == f"{name}.{keys[0]}"]
                    if sub:
                        start = sub[0]
                        nxt = [h[0] for h in headers if h[0] > start]
                        end = min([end] + nxt)
                        keys = keys[1:]
        elif keys and isinstance(keys[0], str):
            hdr = [h[0] for h in headers if h[1] == keys[0]]
            if hdr and len(keys) > 1:
                start = hdr[0]
                nxt = [h[0] for h in headers if h[0] > start]
                end = nxt[0] if nxt else len(self.lines) + 1
                table = keys[0]
                keys = keys[1:]
            elif not hdr:
                end = headers[0][0] if headers else end
        if keys:
            key = str(keys[0])
            pat = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=")
            for i in range(start, min(end, len(self.lines) + 1)):
                if pat.match(self.lines[i - 1]):
                    return i
            if not table:  # dotted key at top level, e.g. hosts.chicago = {}
                for i, raw in enumerate(self.lines, 1):
                    if re.match(rf"^\s*[\w.]*\b{re.escape(key)}\s*=", raw):
                        return i
        return start


def read_toml(path: Path, error: type[ValueError] = TopologyError) -> tuple[dict[str, Any], _Locator]:
    """A data file's tables and a locator of its keys' lines; ``error`` naming ``file:line``
    when it cannot be read or is not TOML (topology and experiment files alike)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"{m.group(1)}:{m.group(2)}" if m else "?"
        raise error(f"{path}:{where}: TOML syntax error: {msg.split(' (at')[0]}") from None
    return data, _Locator(text)


def load(path: str | Path) -> Topology:
    """Parse and validate a topology file; raises :class:`TopologyError` naming file:line."""
    path = Path(path)
    data, loc = read_toml(path)

    def fail(msg: str, *key: KeyPart) -> TopologyError:
        return TopologyError(f"{path}:{loc.line(*key)}: {msg}")

    for k in data:
        if k not in TOP_KEYS:
            raise fail(f"unknown key {k!r} (known: {', '.join(sorted(TOP_KEYS))})", k)
    name = data.get("name", path.stem)
    if not isinstance(name, str):
        raise fail("'name' must be a string", "name")

    def names(table: str) -> list[str]:
        t = data.get(table, {})
        if not isinstance(t, dict):
            raise fail(
                f"[{table}] must be a table of names, e.g. '{table[:-1] if table == 'hosts' else 'sw'} = {{}}'", table
            )
        for n, v in t.items():
            if not NAME_RE.match(n):
                raise fail(
                    f"{table[:-1] if table == 'hosts' else 'switch'} name {n!r}: use 1-12 "
                    "lowercase letters/digits, starting with a letter",
                    table,
                    n,
                )
            allowed = {"nic", "server"} if table == "hosts" else {"server"}
            if isinstance(v, dict) and set(v) <= allowed:
                if "nic" in v:
                    nics[n] = host_nic(n, v["nic"])
                if "server" in v:
                    if not isinstance(v["server"], str):
                        raise fail(f'{n!r}: server = "NAME", a server of the servers file', table, n)
                    servers[n] = v["server"]
            else:
                known = (
                    '\'nic = { rate = "1gbit", queue = "1000p" }\', \'server = "NAME"\' or nothing'
                    if table == "hosts"
                    else "'server = \"NAME\"' or nothing"
                )
                raise fail(f"{n!r}: takes {known}; write '{n} = {{}}' for none", table, n)
        return list(t)

    def host_nic(n: str, raw: object) -> HostNic:
        if not (isinstance(raw, dict) and "rate" in raw and set(raw) <= {"rate", "queue"}):
            raise fail(
                f'{n!r}: nic = {{ rate = "1gbit", queue = "1000p" }} (queue optional, default 1000p)', "hosts", n
            )
        try:
            if not all(isinstance(x, str) for x in raw.values()):
                raise ValueError('rate and queue are strings, e.g. rate = "1gbit"')
            rate = parse_rate(raw["rate"])
            if rate is None:
                raise ValueError("a NIC's rate cannot be 'unlimited'")
            queue = Queue.parse(raw.get("queue", "1000p"))
            if queue.bdp:
                raise ValueError("a NIC's queue is a transmit queue: packets or bytes, not 'bdp'")
        except ValueError as e:
            raise fail(f"{n!r}: nic: {e}", "hosts", n) from None
        return HostNic(rate, queue)

    nics: dict[str, HostNic] = {}
    servers: dict[str, str] = {}  # node (link<N>: a link's delay node) -> its server, in a cluster run

    hosts = names("hosts")
    switches = names("switches")
    if not hosts:
        raise TopologyError(f"{path}:1: no [hosts]; a topology needs at least two hosts")
    dup = set(hosts) & set(switches)
    if dup:
        raise fail(f"{sorted(dup)[0]!r} is both a host and a switch", "switches", sorted(dup)[0])

    raw_links = data.get("link", [])
    if not isinstance(raw_links, list):
        raise fail("links are an array of tables: write [[link]]", "link")
    links: list[Link] = []
    nets: list[str] = []
    switch_net: dict[str, str] = {}
    host_nets: dict[tuple[str, str], int] = {}

    def direction(base: dict[str, Any], over: dict[str, Any], i: int, sub: str | None) -> Direction:
        merged = {**{k: v for k, v in base.items() if k in DIRECTION_KEYS}, **over}
        kw: _DirectionFields = {}
        for k, v in merged.items():
            key: tuple[KeyPart, ...] = ("link", i, sub, k) if sub and k in over else ("link", i, k)
            if k not in DIRECTION_KEYS:
                raise fail(f"unknown key {k!r} in [link.{sub}] (known: {', '.join(sorted(DIRECTION_KEYS))})", *key)
            try:
                if k == "seed":
                    if not isinstance(v, int) or v < 0:
                        raise ValueError(f"seed {v!r} must be a non-negative integer")
                    kw["seed"] = v
                    continue
                if not isinstance(v, str):
                    raise ValueError(f'{k} must be a string, e.g. {k} = "{_EXAMPLES[k]}"')
                if k == "delay":
                    kw["delay_s"] = parse_delay(v)
                elif k == "rate":
                    kw["rate_bps"] = parse_rate(v)
                elif k == "queue":
                    kw["queue"] = Queue.parse(v)
                elif k == "loss":
                    kw["loss"] = parse_loss(v)
                elif k == "bdp_rtt":
                    kw["bdp_rtt_s"] = parse_delay(v)
            except ValueError as e:
                raise fail(str(e), *key) from None
        d = Direction(**kw)
        if d.queue.bdp and d.rate_bps is None:
            raise fail("queue 'bdp' needs a rate in the same direction", *(("link", i, "queue")))
        return d

    for i, raw in enumerate(raw_links):
        for k in raw:
            if k not in LINK_KEYS:
                raise fail(f"unknown key {k!r} in [[link]] (known: {', '.join(sorted(LINK_KEYS))})", "link", i, k)
        ends = raw.get("ends")
        if not (isinstance(ends, list) and len(ends) == 2 and all(isinstance(end, str) for end in ends)):
            raise fail('[[link]] needs ends = ["a", "b"]', "link", i, "ends" if "ends" in raw else None)
        a, b = ends
        for end in ends:
            if end not in hosts and end not in switches:
                raise fail(
                    f"link end {end!r} is neither a host nor a switch (hosts: {', '.join(hosts)}"
                    f"{'; switches: ' + ', '.join(switches) if switches else ''})",
                    "link",
                    i,
                    "ends",
                )
        if a == b:
            raise fail(f"link from {a!r} to itself", "link", i, "ends")
        net = raw.get("net", "data")
        if not (isinstance(net, str) and NAME_RE.match(net)):
            raise fail(
                f"net {net!r}: use 1-12 lowercase letters/digits (it names the hosts' interface)", "link", i, "net"
            )
        if net not in nets:
            nets.append(net)
        for end in ends:
            if end in switches:
                if switch_net.setdefault(end, net) != net:
                    raise fail(
                        f"switch {end!r} is on net {switch_net[end]!r} and {net!r}; a switch serves one net",
                        "link",
                        i,
                        "net",
                    )
            else:
                if (end, net) in host_nets:
                    raise fail(
                        f"host {end!r} already has a link on net {net!r} (line {host_nets[(end, net)]}); "
                        "join several links with a switch",
                        "link",
                        i,
                        "ends",
                    )
                host_nets[(end, net)] = loc.line("link", i, "ends")
        for sub in ("forward", "reverse"):
            if sub in raw and not isinstance(raw[sub], dict):
                raise fail(f"{sub} must be a table: [link.{sub}]", "link", i, sub)
        if "server" in raw:
            if not isinstance(raw["server"], str):
                raise fail('server = "NAME": the server of the link\'s delay node', "link", i, "server")
            servers[f"link{i + 1}"] = raw["server"]
        fwd = direction(raw, raw.get("forward", {}), i, "forward")
        rev = direction(raw, raw.get("reverse", {}), i, "reverse")
        links.append(Link(i, a, b, net, fwd, rev, loc.line("link", i, "ends")))
    for h in hosts:
        if not any(h in (link.a, link.b) for link in links):
            raise fail(f"host {h!r} has no link", "hosts", h)
    topo = Topology(
        name=name,
        path=path,
        hosts=hosts,
        switches=switch_net | {s: "data" for s in switches if s not in switch_net},
        links=links,
        paper=str(data.get("paper", "")),
        description=str(data.get("description", "")),
        nets=nets,
        nics=nics,
        servers=servers,
    )
    _check_tree(topo, fail)
    return topo


def _check_tree(topo: Topology, fail: _Fail) -> None:
    """Switches bridge at L2 without STP, so each net must be loop-free."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for link in topo.links:
        ra, rb = find(f"{link.net}/{link.a}"), find(f"{link.net}/{link.b}")
        if ra == rb:
            raise fail(
                f"link {link.a}–{link.b} closes a loop on net {link.net!r}; bridges run no STP",
                "link",
                link.index,
                "ends",
            )
        parent[ra] = rb


def scaled_direction(d: Direction, scale: float) -> Direction:
    return replace(d, rate_bps=None if d.rate_bps is None else d.rate_bps * scale)
