"""``udtbed cores``: the cores each part needs at a scale (udtbed.emulation.cores), and whether
this machine, or each server of a cluster, has them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..emulation import cores
from ..emulation.cluster import Cluster, ClusterError, core_check, server_cpus
from ..emulation.topology import load
from ..experiments import seats
from ..experiments.experiment import EXPERIMENTS_DIR, Experiment, ExperimentError
from .shared import Command, select_experiments


def cmd_cores(a: argparse.Namespace) -> int:
    """Each part's seats (udtbed.emulation.cores) at ``--scale``, and whether the run's CPUs hold them."""
    try:
        exps = select_experiments(Path(a.experiments_dir), a.experiments)
        cpus = cores.run_cpus(a.cpuset)
    except (ExperimentError, cores.CoresError) as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    checked = a.scale >= cores.CHECKED_FROM
    print(
        f"cores at scale {a.scale:g} ({a.backend}); this run would have {len(cpus)} (CPUs {cores.cpu_list(cpus)}); "
        + (
            "checked: a part that does not fit is refused"
            if checked
            else f"not checked below {cores.CHECKED_FROM:g}: a part's seats share the CPUs"
        )
    )
    if a.servers:
        return _cores_on_servers(a, exps, cpus)
    parts = seats.checks([(e, p) for e in exps for p in e.parts], a.backend, cpus, a.scale, "off")
    for name, c in parts.items():
        fits = "fits" if c.plan.need <= c.have else ("TOO FEW" if checked else "shared")
        print(f"  {name:44s} {c.plan.need:3d}  {fits:8s}  {c.plan.summary()}")
    worst = max((c.plan.need for c in parts.values()), default=0)
    print(f"the largest part needs {worst} cores")
    return 1 if checked and worst > len(cpus) else 0


def _cores_on_servers(a: argparse.Namespace, exps: list[Experiment], head: list[int]) -> int:
    """``udtbed cores --servers FILE``: each part's seats on the servers its placement puts them
    on, against each server's CPUs (asked over SSH); exit 1 where a part does not fit."""
    try:
        with Cluster.session(a.servers) as cluster:
            cpus = {name: server_cpus(s) for name, s in cluster.servers.items()}
    except ClusterError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    print("servers: " + ", ".join(f"{n} {len(c)} CPUs" for n, c in cpus.items()))
    short = False
    for e in exps:
        for p in e.parts:
            topo = load(p.topology)
            c = core_check(seats.plan(p, topo, a.backend), cluster.place(topo), cpus, head, a.scale, "off")
            fits = "fits" if c.ok else ("TOO FEW" if c.checked else "shared")
            short |= c.checked and not c.ok
            line = ", ".join(f"{s} {n}/{c.have_by_server[s]}" for s, n in c.need_by_server.items())
            print(f"  {e.name + ' / ' + p.label:44s} {fits:8s}  {line}")
    return 1 if short else 0


def add_arguments(co: argparse.ArgumentParser) -> None:
    co.add_argument("--experiments", default="all", help="comma-separated names, 'default' or 'all' (default)")
    co.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))
    co.add_argument("--scale", type=float, default=1.0)
    co.add_argument("--cpuset", help="the CPUs a run would use (default: all this process may)")
    co.add_argument("--backend", default="linkem", choices=["linkem", "netem"])
    co.add_argument("--servers", help="a servers file: each part's seats on its servers' CPUs (asked over SSH)")


CORES = Command(
    "cores", "the cores each part needs at a scale, and whether this machine has them", add_arguments, cmd_cores
)
