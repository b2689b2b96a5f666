"""What the subcommands share: the table's entry (:class:`Command`), the experiments and parts a
command line names, the run's scale, the sweep of gone runs, the signals that end a run as Ctrl-C
does, and the checkout's commit."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

from .. import REPO
from ..emulation import runtime
from ..emulation.calibrate import calibrate
from ..emulation.network import Network
from ..emulation.topology import load
from ..experiments.experiment import TOPOLOGIES_DIR, Experiment, ExperimentError, load_all
from ..experiments.runner import CalibrationError

AUTO_SCALES = [1.0, 0.5, 0.2, 0.1, 0.05]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and one-line help (``udtbed --help``), what adds its options to
    its parser, and what runs it (the parsed command line in, the exit status out)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]


def interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """A signal handler that ends the command as Ctrl-C would (SIGTERM, SIGHUP): its cleanup runs."""
    raise KeyboardInterrupt(f"signal {signum}")


def checkout_commit() -> str:
    """The checkout's commit (``-dirty`` with changes to the code a run uses); where there is no
    git or no repository (a copied working tree on a borrowed host), ``UDTBED_COMMIT``, which the
    full-scale bundle records where it was built, else ``unknown``."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return os.environ.get("UDTBED_COMMIT", "unknown")
    p = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "testbed", "topologies", "impl"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return p.stdout.strip() + ("-dirty" if dirty else "")


def stale_cleanup(log: Callable[[str], None] = print) -> None:
    """Remove containers and namespaces left by runs whose process is gone (udtb-<pid>-...)."""
    boxes, namespaces = runtime.cleanup_run(live=False)
    for name in boxes + namespaces:
        log(f"removed stale {'container' if name in boxes else 'namespace'} {name}")


def choose_scale(
    requested: str,
    backend: str,
    log: Callable[[str], None],
    too_big: Callable[[float], list[str]] = lambda s: [],
) -> tuple[float, str]:
    """A fixed SCALE, or the largest of AUTO_SCALES whose parts fit the run's cores (``too_big``:
    the parts that do not, udtbed.emulation.cores) and whose calibration on chicago-amsterdam passes."""
    if requested != "auto":
        return float(requested), "requested"
    topo = load(TOPOLOGIES_DIR / "chicago-amsterdam.toml")
    rejected: list[str] = []
    for s in AUTO_SCALES:
        if short := too_big(s):
            rejected.append(
                f"scale {s}: {short[0]}" + (f" (and {len(short) - 1} more parts)" if len(short) > 1 else "")
            )
            continue
        log(f"scale auto: calibrating chicago-amsterdam at scale {s}")
        with Network(topo, scale=s, backend=backend, workdir=Path("/tmp") / f"udtb-autoscale-{os.getpid()}") as net:
            c = calibrate(net, [("chicago", "amsterdam")], log=log)[0]
        if c.ok:
            why = f"largest scale whose calibration passed ({c.line()})"
            if rejected:
                why += "; rejected: " + "; ".join(rejected)
            return s, why
        rejected.append(f"scale {s}: {c.line()}")
    raise CalibrationError("no scale calibrates: " + "; ".join(rejected))


def select_experiments(directory: Path, wanted: str) -> list[Experiment]:
    """The experiments named in ``wanted`` (comma-separated; '' = the default set, 'all')."""
    known = load_all(directory)
    if wanted in ("", "default"):
        return [e for e in known.values() if e.default]
    if wanted == "all":
        return list(known.values())
    out = []
    for n in (x.strip() for x in wanted.split(",") if x.strip()):
        if n not in known:
            raise ExperimentError(f"unknown experiment {n!r} (have {', '.join(known)} in {directory})")
        out.append(known[n])
    return out


def select_parts(exps: list[Experiment], wanted: str | None) -> list[Experiment]:
    """``exps`` with only the parts whose labels ``wanted`` names (comma-separated; None: all);
    an experiment left with none is dropped. A label that no experiment has is an error."""
    if not wanted:
        return exps
    labels = {x.strip() for x in wanted.split(",") if x.strip()}
    have = {p.label for e in exps for p in e.parts}
    if unknown := sorted(labels - have):
        raise ExperimentError(
            f"unknown part {', '.join(map(repr, unknown))} (the experiments chosen have {', '.join(sorted(have))})"
        )
    picked = [dataclasses.replace(e, parts=tuple(p for p in e.parts if p.label in labels)) for e in exps]
    return [e for e in picked if e.parts]
