"""A run's plan: everything ``udtbed run`` will do, decided and checked before anything is built.

The command line (``udtbed.commands.run``) turns its options into one :class:`RunPlan`; every
refusal (an unknown stack, a bad servers file, a part too big for the run's cores, a missing
image) happens while it is made. ``--dry-run`` prints it (:meth:`RunPlan.describe`); otherwise the
run is carried out from the plan alone, never from the command line again.

A run on this machine and a run across a cluster's servers are the same plan with a different
:class:`Placement`: this machine's CPUs, or the servers each topology's nodes go to
(``udtbed.emulation.cluster``), with the underlays that join them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..emulation import cores
from ..emulation.cluster import Cluster
from ..emulation.runtime import StacksImage
from .experiment import Experiment, Part
from .run import Repeats
from .runner import Step, part_runs, plan
from .stacks import BulkStack


@dataclass(frozen=True)
class Placement:
    """Where a run's processes go. On this machine (``cluster`` None): the run's CPUs, and
    whether each busy process gets its own (``pin``). Across a cluster: per topology, each node
    (hosts, switches, ``link<N>`` delay nodes) -> its server, and the underlays the placement
    uses (server, interface, server, interface); each server's CPUs are read at its preflight."""

    cpus: tuple[int, ...]
    cpuset: str | None = None
    pin: str = "auto"
    cluster: Cluster | None = None
    nodes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    underlays: tuple[tuple[str, str, str, str], ...] = ()

    def describe(self) -> list[str]:
        """The placement's lines in the plan."""
        if self.cluster is None:
            return [f"placement: this machine, CPUs {cores.cpu_list(list(self.cpus))}, pin {self.pin}"]
        out = [
            f"placement: {len(self.cluster.servers)} servers ({self.cluster.path}): {', '.join(self.cluster.servers)}"
        ]
        for topo, nodes in self.nodes.items():
            by_server: dict[str, list[str]] = {}
            for node, server in nodes.items():
                by_server.setdefault(server, []).append(node)
            out.append(f"  {topo}: " + "; ".join(f"{s}: {', '.join(n)}" for s, n in by_server.items()))
        for a, ia, b, ib in self.underlays:
            out.append(f"  underlay {a} {ia} <-> {b} {ib}")
        return out


@dataclass(frozen=True)
class Sinks:
    """Where a run's results go: the results directory (a run directory in it per run), the
    series' InfluxDB (``local``: an influxd under the results directory; ``none``; or a URL),
    the simulated figures after the experiments (``full``, ``quick`` or ``none``, from
    ``scenarios_dir``), and the HTML report (``auto``, ``on`` or ``none``)."""

    results: Path
    influx: str = "local"
    simulate: str = "full"
    scenarios_dir: Path | None = None
    report: str = "auto"

    def describe(self) -> list[str]:
        return [
            f"results: {self.results}/<run id>; influx: {self.influx}; report: {self.report}; "
            f"simulated figures: {self.simulate}"
        ]


@dataclass(frozen=True)
class RunPlan:
    """One run, checked: the experiments (only the parts asked for), the stacks that are
    available, the repeats, the time per run, the emulation (backend, scale: None for ``auto``,
    decided by calibrating), the host runtime (``netns`` or ``docker`` with its image), the
    calibration and cores policies, the placement and the sinks."""

    experiments: tuple[Experiment, ...]
    stacks: tuple[BulkStack, ...]
    repeats: Repeats
    duration: float
    backend: str
    backend_reason: str
    scale: float | None
    placement: Placement
    sinks: Sinks
    runtime: str = "netns"
    image: StacksImage | None = None
    calibration: str = "refuse"
    rtt_tol_ms: float = 1.0
    rate_tol: float = 0.02
    cores: str = "refuse"
    udt_buffers: str = "path"

    @property
    def parts(self) -> list[tuple[Experiment, Part]]:
        """The parts that run: those that at least one of the stacks runs."""
        return [(e, p) for e in self.experiments for p in e.parts if part_runs(p, list(self.stacks))]

    def steps(self) -> list[Step]:
        """The run's steps in order (udtbed.experiments.runner.plan): what the progress counts."""
        return plan(list(self.experiments), list(self.stacks), self.duration, self.repeats)

    def describe(self) -> list[str]:
        """The plan as ``--dry-run`` prints it: per part its runs and how many times each, then
        the emulation, the runtime, the placement and the sinks."""
        steps = self.steps()
        out = [f"repeats: {self.repeats.describe()}"]
        parts: dict[tuple[str, str], dict[str, int]] = {}
        for x in steps:
            runs = parts.setdefault((x.experiment, x.part), {})
            if x.lineup is not None:
                runs[x.lineup] = runs.get(x.lineup, 0) + 1
        for (exp, part), runs in parts.items():
            each = ", ".join(f"{name} x{n}" for name, n in runs.items())
            out.append(f"  {exp} / {part}: build, calibrate; {each}")
        seconds = sum(x.seconds for x in steps)
        out.append(
            f"plan: {len(parts)} parts, {len(steps)} steps, {seconds / 60:.1f} min planned "
            "(the progress's estimate; the simulated figures come after)"
        )
        scale = "auto (the largest that fits and calibrates)" if self.scale is None else f"{self.scale:g}"
        out.append(
            f"emulation: backend {self.backend} ({self.backend_reason}); scale {scale}; "
            f"{self.duration:g} s per run; calibration {self.calibration} "
            f"(RTT within {self.rtt_tol_ms:g} ms, rate within {self.rate_tol * 100:g} %); cores {self.cores}; "
            f"UDT buffers {self.udt_buffers}"
        )
        out.append(
            f"host runtime: {self.runtime}"
            + (f", image {self.image.name} ({self.image.id})" if self.image is not None else "")
        )
        return out + self.placement.describe() + self.sinks.describe()
