"""``udtbed compare-backends``: netem beside udt-linkem on each Fig. 11 path class, as a table
(udtbed.emulation.backend_compare)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

from .shared import Command, interrupt


def cmd_compare_backends(a: argparse.Namespace) -> int:
    """Each Fig. 11 path class under each backend this kernel has: RTT, rate, queue, a UDT flow."""
    from ..emulation import backend_compare

    signal.signal(signal.SIGTERM, interrupt)
    backends = a.backends.split(",") if a.backends else backend_compare.available_backends()
    work = Path("/tmp") / f"udtb-cmp-{os.getpid()}"
    print(f"backends: {', '.join(backends)}; scale {a.scale:g}; UDT for {a.seconds:g} s per path")
    try:
        rows = backend_compare.compare(backends, a.scale, a.seconds, work)
    except KeyboardInterrupt:
        print("\nudtbed compare-backends: interrupted (every topology was closed)", file=sys.stderr)
        return 130
    except RuntimeError as err:
        print(f"udtbed compare-backends: {err}", file=sys.stderr)
        return 1
    table = backend_compare.markdown(rows)
    print(table)
    if a.out:
        Path(a.out).write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1) + "\n")
    return 0


def add_arguments(cb: argparse.ArgumentParser) -> None:
    cb.add_argument("--scale", type=float, default=0.02)
    cb.add_argument("--seconds", type=float, default=20.0, help="the UDT flow on each path (default 20)")
    cb.add_argument("--backends", help="comma-separated (default: netem where the kernel has it, and linkem)")
    cb.add_argument("--out", help="write the rows as JSON here")


COMPARE_BACKENDS = Command(
    "compare-backends", "netem beside udt-linkem on each Fig. 11 path class (root)", add_arguments, cmd_compare_backends
)
