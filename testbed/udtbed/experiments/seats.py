"""Seats: how many cores a part needs at full scale.

At the papers' rates every busy thread of a part wants a core of its own. ``udt-linkem`` releases
a 1 Gb/s direction's frames 12 µs apart by spinning on the next one's due time; a UDT sender
paces its packets by the same kind of wait (UDT4.md §7); a receiver preempted between two
packets stamps them together, and its arrival speed and packet pairs (§10.1-10.2) then describe
a faster link than the path's. So the runner counts one core for each of these *seats*:

- each direction of an emulated link that carries some flow's data (a forwarding thread of
  ``udt-linkem``; directions that carry only ACKs share the runner's cores),
- each flow's sender and each flow's receiver (one process each, whatever the stack),
- a short-TCP part's driver and its sink,
- the runner itself, with the calibration probes and the host watch.

Each seat names the node it runs on, so that the machinery that checks and pins the plan
(:mod:`udtbed.emulation.cores`, and on a cluster :func:`udtbed.emulation.cluster.core_check`)
needs no experiment to read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..emulation.cores import CoreCheck, CorePlan, Seat, check
from ..emulation.topology import Topology
from ..emulation.topology import load as load_topology
from .experiment import Experiment, Part


def plan(part: Part, topo: Topology, backend: str = "linkem") -> CorePlan:
    """The seats ``part`` needs on ``topo``: see the module's docstring. ``backend`` netem has no
    emulator process (the kernel forwards), so its links need no seat."""
    if part.short_tcp:
        spec = part.short_tcp
        ends = [(f"bulk{j}", spec.src, spec.dst) for j in range(max(spec.bulk_flows, default=0))]
        paths = [(spec.src, spec.dst)] + [(s, d) for _, s, d in ends]
    else:
        ends = [(f.name, f.src, f.dst) for f in part.flows]
        paths = [(s, d) for _, s, d in ends]
    busy: dict[int, set[str]] = {}  # link index -> the ends whose outgoing direction carries data
    if backend == "linkem":
        for src, dst in paths:
            for hop in topo.route(src, dst):
                if hop.link.emulated:
                    busy.setdefault(hop.link.index, set()).add(hop.frm)
    seats = [
        Seat(
            ("link", str(i)),
            f"udt-linkem link {i} ({', '.join(f'{e}->' for e in sorted(frm))})",
            len(frm),
            node=f"link{i + 1}",
        )
        for i, frm in sorted(busy.items())
    ]
    for name, src, dst in ends:
        seats += [Seat(("flow", name, "sender"), f"{name} sender on {src}", node=src)]
        seats += [Seat(("flow", name, "receiver"), f"{name} receiver on {dst}", node=dst)]
    if part.short_tcp:
        seats += [
            Seat(("short", "driver"), "short TCP flows", node=part.short_tcp.src),
            Seat(("short", "sink"), "short TCP sink", node=part.short_tcp.dst),
        ]
    seats.append(Seat(("runner",), "runner, probes, host watch, ACK-only directions"))
    return CorePlan(part.label, tuple(seats))


def checks(
    parts: Iterable[tuple[Experiment, Part]], backend: str, cpus: Sequence[int], scale: float, pin: str
) -> dict[str, CoreCheck]:
    """Every part's :func:`udtbed.emulation.cores.check` at ``scale``, by 'experiment / part'."""
    return {
        f"{e.name} / {p.label}": check(plan(p, load_topology(p.topology), backend), cpus, scale, pin) for e, p in parts
    }


def shortfalls(
    parts: Iterable[tuple[Experiment, Part]], backend: str, cpus: Sequence[int], scale: float, pin: str
) -> dict[str, CoreCheck]:
    """The parts that do not fit the run's CPUs at ``scale``: the run checks them all before it
    builds anything."""
    return {name: c for name, c in checks(parts, backend, cpus, scale, pin).items() if not c.ok}
