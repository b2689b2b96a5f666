"""Cores: the *seats* of a part that each want a core of their own, the CPUs a run may use, and
which process gets which.

A seat is a busy thread at a node of the topology: a direction of an emulated link (a forwarding
thread of ``udt-linkem``), a flow's sender or receiver, a short-TCP part's driver or sink, or the
runner itself (:class:`Seat`; which seats a part has is the experiments' business,
:mod:`udtbed.experiments.seats`). The plan is checked at scale :data:`CHECKED_FROM` and above: a
part that needs more cores than the run has is refused before any namespace is built (``--cores
flag`` runs it anyway, flagged in its result). Below it the busy threads sleep most of the time
(at scale 0.1 the emulator used ~40 % of a core and a UDT sender ~25 %,
docs/testbed/scale-and-calibration.md "Cores at full scale"), and 2 shared cores were measured to
emulate faithfully, so the plan is shown but not enforced. With pinning on (``--pin``; by default
from :data:`CHECKED_FROM`), each seat's process is given its own CPUs (``sched_setaffinity``
before it execs, or ``docker --cpuset-cpus``) in the plan's order, and the runner takes what is
left.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CHECKED_FROM = 0.5  # the smallest scale at which the plan is enforced and pinning is on by default

SeatKey = tuple[
    str, ...
]  # ("link", "0") | ("flow", name, "sender"|"receiver") | ("short", "driver"|"sink") | ("runner",)


class CoresError(RuntimeError):
    """A part needs more cores than the run has, or a CPU set names CPUs it cannot use."""


@dataclass(frozen=True)
class Seat:
    key: SeatKey
    what: str
    cores: int = 1
    # The topology node its process runs on: a host, or ``link<N>`` for the N-th link's delay node
    # (a cluster run places each on a server); None: the runner's, on the head.
    node: str | None = None


@dataclass(frozen=True)
class CorePlan:
    """The seats of one part, in the order they are given CPUs."""

    part: str
    seats: tuple[Seat, ...]

    @property
    def need(self) -> int:
        return sum(s.cores for s in self.seats)

    def summary(self) -> str:
        """'udt-linkem 1, 1 flow x (sender, receiver) 2, runner 1'-like breakdown."""
        links = sum(s.cores for s in self.seats if s.key[0] == "link")
        ends = [s for s in self.seats if s.key[0] == "flow"]
        short = sum(s.cores for s in self.seats if s.key[0] == "short")
        out = []
        if links:
            out.append(f"udt-linkem {links}")
        if ends:
            n = len({s.key[1] for s in ends})
            out.append(f"{n} flow{'s' if n > 1 else ''} × (sender, receiver) {len(ends)}")
        if short:
            out.append(f"short TCP {short}")
        out.append("runner 1")
        return ", ".join(out)


def parse_cpus(text: str) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8] (the cpuset list format of taskset -c and docker --cpuset-cpus)."""
    out: set[int] = set()
    for item in (x.strip() for x in text.split(",")):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(hi) < int(lo)):
            raise CoresError(f"CPU set {text!r}: {item!r} is not a CPU number or a range a-b (like 0-3,8)")
        out.update(range(int(lo), int(hi if sep else lo) + 1))
    return sorted(out)


def cpu_list(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def run_cpus(cpuset: str | None) -> list[int]:
    """The CPUs a run may use: ``cpuset`` if given (each must be one this process may run on),
    else every CPU this process may run on (its affinity, which honours a cgroup's cpuset)."""
    allowed = sorted(os.sched_getaffinity(0))
    if not cpuset:
        return allowed
    cpus = parse_cpus(cpuset)
    if bad := [c for c in cpus if c not in allowed]:
        raise CoresError(
            f"CPU set {cpuset!r} names CPU {cpu_list(bad)}, which this process may not use "
            f"(it may use {cpu_list(allowed)}); choose CPUSET from those"
        )
    return cpus


@dataclass
class Pins:
    """Each seat's CPUs (:func:`assign`); ``rest`` is the runner's, shared by every process that
    has no seat of its own."""

    seats: dict[SeatKey, frozenset[int]] = field(default_factory=dict)
    rest: frozenset[int] = frozenset()
    what: dict[SeatKey, str] = field(default_factory=dict)

    def of(self, *key: str) -> frozenset[int] | None:
        return self.seats.get(tuple(key))

    def links(self) -> dict[int, frozenset[int]]:
        """Each emulated link's CPUs, by link index (udtbed.emulation.network.Network.link_cpus)."""
        return {int(k[1]): c for k, c in self.seats.items() if k[0] == "link"}

    def as_json(self) -> dict[str, str]:
        return {self.what[k]: cpu_list(c) for k, c in self.seats.items()} | {"runner": cpu_list(self.rest)}


def assign(p: CorePlan, cpus: Sequence[int]) -> Pins:
    """Hand out ``cpus`` to ``p``'s seats in order, each its own; the runner gets the rest."""
    if p.need > len(cpus):
        raise CoresError(f"{p.part} needs {p.need} cores ({p.summary()}); the run has {len(cpus)}")
    pins = Pins()
    i = 0
    for s in p.seats:
        if s.key == ("runner",):
            continue
        pins.seats[s.key] = frozenset(cpus[i : i + s.cores])
        pins.what[s.key] = s.what
        i += s.cores
    pins.rest = frozenset(cpus[i:])
    return pins


@dataclass
class CoreCheck:
    """The run's verdict on one part: what it needs, what the run has, and whether it is pinned."""

    plan: CorePlan
    have: int
    scale: float
    checked: bool  # the scale is one at which the plan is enforced (or pinning was asked for)
    pins: Pins | None = None

    @property
    def ok(self) -> bool:
        return not self.checked or self.plan.need <= self.have

    def shortfall(self) -> str:
        return f"needs {self.plan.need} cores at scale {self.scale:g} ({self.plan.summary()}); the run has {self.have}"

    def as_json(self) -> dict[str, object]:
        return {
            "need": self.plan.need,
            "have": self.have,
            "checked": self.checked,
            "ok": self.ok,
            "seats": self.plan.summary(),
            "pinned": self.pins.as_json() if self.pins else None,
        }


def check(p: CorePlan, cpus: Sequence[int], scale: float, pin: str) -> CoreCheck:
    """``pin``: 'auto' (pin from :data:`CHECKED_FROM`, where the plan fits), 'on' (pin; the plan
    must fit at any scale) or 'off'."""
    if pin not in ("auto", "on", "off"):
        raise CoresError(f"pin {pin!r}: want auto, on or off")
    c = CoreCheck(p, len(cpus), scale, checked=scale >= CHECKED_FROM or pin == "on")
    if c.checked and c.ok and pin != "off":
        c.pins = assign(p, cpus)
    return c


def run_line(checked: dict[str, CoreCheck], cpus: Sequence[int]) -> str:
    """The run's one line on cores (``checked``: :func:`checks`): the largest part's need, the
    CPUs, and whether it is checked and pinned."""
    have = f"the run has {len(cpus)} (CPUs {cpu_list(cpus)})"
    if not checked:
        return f"cores: {have}"
    name, big = max(checked.items(), key=lambda kv: kv[1].plan.need)
    if not big.checked:
        how = f"not checked below scale {CHECKED_FROM:g}"
    elif big.pins:
        how = "pinned, a CPU per seat"
    else:
        how = "not pinned (PIN=off)" if big.ok else "too few: flagged (CORES=flag)"
    return f"cores: the largest part needs {big.plan.need} ({name}); {have}; {how}"
