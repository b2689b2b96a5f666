"""``udtbed preflight`` and ``udtbed lab``: a cluster run's servers checked before anything is
built on them (udtbed.emulation.cluster), and a lab of such servers on this machine to try one
(udtbed.emulation.lab)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..emulation import lab
from ..emulation.cluster import Cluster, ClusterError, preflight
from ..emulation.topology import load
from ..experiments.experiment import EXPERIMENTS_DIR, ExperimentError
from .shared import Command, select_experiments


def cmd_preflight(a: argparse.Namespace) -> int:
    """The checks a cluster run makes before it builds anything, on their own."""
    try:
        exps = select_experiments(Path(a.experiments_dir), a.experiments)
    except ExperimentError as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    try:
        with Cluster.session(a.servers) as cluster:
            segments: list[tuple[str, str, str, str]] = []
            for p in (p for e in exps for p in e.parts):
                topo = load(p.topology)
                segments += [s for s in cluster.underlays(topo, cluster.place(topo)) if s not in segments]
            preflight(cluster, Path(a.results), segments, log=print)
    except ClusterError as e:
        print(f"udtbed: preflight: {e}", file=sys.stderr)
        return 1
    print("preflight: every server is ready")
    return 0


def cmd_lab(a: argparse.Namespace) -> int:
    """``udtbed lab up|down DIR``: the servers of :mod:`udtbed.emulation.lab` on this machine."""
    try:
        if a.action == "up":
            names = tuple(n.strip() for n in a.names.split(",") if n.strip())
            path = lab.Lab(Path(a.dir).resolve(), names, a.mtu).up()
            print(f"lab: {len(names)} servers up; servers file {path}; stop them with `udtbed lab down {a.dir}`")
        else:
            lab.Lab.load(Path(a.dir).resolve()).down()
            print("lab: down")
    except lab.LabError as e:
        print(f"udtbed lab: {e}", file=sys.stderr)
        return 1
    return 0


def preflight_arguments(pf: argparse.ArgumentParser) -> None:
    pf.add_argument("--servers", required=True, help="the servers file (docs/cluster.md)")
    pf.add_argument("--experiments", default="default", help="whose placements' underlays to probe (default: default)")
    pf.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))
    pf.add_argument("--results", default="results/testbed", help="the run directory's parent, shared with the servers")


def lab_arguments(lb: argparse.ArgumentParser) -> None:
    lb.add_argument("action", choices=["up", "down"])
    lb.add_argument("dir", help="where its keys, configs, logs and servers.toml go")
    lb.add_argument("--names", default=",".join(lab.DEFAULT_NAMES), help="the servers' names (default %(default)s)")
    lb.add_argument("--mtu", type=int, default=1500, help="the underlay links' MTU (default 1500)")


PREFLIGHT = Command(
    "preflight",
    "check the servers of a cluster run (SSH, root, tools, binaries, MTU, clocks)",
    preflight_arguments,
    cmd_preflight,
)
LAB = Command(
    "lab", "servers on this machine: sshd in namespaces, joined by veth 'cables' (root)", lab_arguments, cmd_lab
)
