"""``udtbed calibrate``: one topology built, one path's RTT and bottleneck rate measured against
the file's (udtbed.emulation.calibrate); exit 1 where the path is off, 130 on Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from ..emulation.calibrate import calibrate
from ..emulation.network import Network, choose_backend
from ..emulation.topology import load
from .shared import Command, interrupt


def cmd_calibrate(a: argparse.Namespace) -> int:
    try:
        return _calibrate(a)
    except KeyboardInterrupt:
        return 130


def _calibrate(a: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, interrupt)
    topo = load(a.topology)
    backend, why = choose_backend(a.backend)
    print(f"backend: {backend} ({why})")
    with Network(topo, scale=a.scale, backend=backend, workdir=Path("/tmp") / f"udtb-cal-{os.getpid()}") as net:
        cals = calibrate(net, [(a.src, a.dst)])
    return 0 if all(c.ok for c in cals) else 1


def add_arguments(k: argparse.ArgumentParser) -> None:
    k.add_argument("topology")
    k.add_argument("src")
    k.add_argument("dst")
    k.add_argument("--scale", type=float, default=0.1)
    k.add_argument("--backend", default="auto", choices=["auto", "linkem", "netem"])


CALIBRATE = Command("calibrate", "build a topology and calibrate one path", add_arguments, cmd_calibrate)
