"""``udtbed cleanup``: the udtb-* namespaces (and their processes) and containers of runs that are
gone removed, here and on a cluster's servers; those of a run still alive only when asked."""

from __future__ import annotations

import argparse
import sys

from udtharness import netns

from ..emulation import network, runtime
from ..emulation.cluster import Cluster, ClusterError
from .shared import Command


def cmd_cleanup(a: argparse.Namespace) -> int:
    if not a.prefix.startswith(network.PREFIX):
        print(f"udtbed cleanup: --prefix must start with {network.PREFIX}", file=sys.stderr)
        return 2
    if a.servers and (rc := _cleanup_servers(a)) != 0:
        return rc
    boxes, gone = runtime.cleanup_run(a.prefix, live=a.all or a.prefix != network.PREFIX)
    if boxes:
        print(f"removed {len(boxes)} container(s): {', '.join(boxes)}")
    print(f"removed {len(gone)} namespace(s){': ' + ', '.join(gone) if gone else ''}")
    kept = netns.list_namespaces(a.prefix) + runtime.list_containers(a.prefix)
    if kept:
        print(
            f"kept {len(kept)} namespace(s) and container(s) of runs still alive ({', '.join(kept)}): "
            "stop those runs, or pass --all (make testbed-cleanup ALL=1)"
        )
    return 0


def _cleanup_servers(a: argparse.Namespace) -> int:
    """``udtbed cleanup --servers FILE``: the same sweep on each server, over SSH."""
    every = a.all or a.prefix != network.PREFIX
    try:
        with Cluster.session(a.servers) as cluster:
            swept = cluster.sweep(a.prefix if every else network.PREFIX, only_gone=not every)
    except ClusterError as e:
        print(f"udtbed cleanup: {e}", file=sys.stderr)
        return 1
    for name, there in swept.items():
        print(f"server {name}: removed {len(there)} namespace(s){': ' + ', '.join(there) if there else ''}")
    return 0


def add_arguments(x: argparse.ArgumentParser) -> None:
    x.add_argument(
        "--prefix",
        default=network.PREFIX,
        help=f"only namespaces starting with this, e.g. {network.PREFIX}PID- for one run, "
        f"removed even while that run is alive (must start with {network.PREFIX})",
    )
    x.add_argument("--all", action="store_true", help="also remove the namespaces and containers of runs still alive")
    x.add_argument("--servers", help="a servers file: clean up on each of its servers too, over SSH")


CLEANUP = Command(
    "cleanup",
    "remove the udtb-* namespaces (and their processes) and containers of runs that are gone",
    add_arguments,
    cmd_cleanup,
)
