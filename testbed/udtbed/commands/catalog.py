"""``udtbed check`` and ``udtbed list``: the files a run is made of, validated (topologies and
experiments, ``file:line`` errors), and the experiments and stacks a run can take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..emulation.topology import TopologyError, load
from ..experiments.experiment import EXPERIMENTS_DIR, ExperimentError, load_all
from ..experiments.experiment import load as load_experiment
from ..experiments.stacks import all_stacks
from .shared import Command


def cmd_check(a: argparse.Namespace) -> int:
    """Topology files and experiment files (told apart by an experiment's [[part]] tables)."""
    bad = 0
    for f in map(Path, a.files):
        try:
            if f.is_file() and "[[part]]" in f.read_text():
                e = load_experiment(f)
                bands = sum(len(p.bands) for p in e.parts)
                profiles = sum(1 for p in e.parts if p.profile)
                print(f"{f}: ok (experiment, {len(e.parts)} parts, {bands} bands, {profiles} quick profiles)")
            else:
                t = load(f)
                what = f"{len(t.hosts)} hosts, {len(t.switches)} switches, {len(t.links)} links"
                print(f"{f}: ok ({what}, nets {', '.join(t.nets)})")
        except (TopologyError, ExperimentError) as e:
            print(e, file=sys.stderr)
            bad += 1
    return 1 if bad else 0


def cmd_list(a: argparse.Namespace) -> int:
    """The experiments (those of the default run starred) and every stack, available or not."""
    try:
        exps = load_all(Path(a.experiments_dir))
    except ExperimentError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    print(f"experiments ({a.experiments_dir}; * = in the default run):")
    for e in exps.values():
        parts = ", ".join(p.label for p in e.parts)
        print(f"  {'*' if e.default else ' '} {e.name:14s} {e.figure}: {e.title} [{parts}]")
    print("stacks (stacks/*/meta.toml):")
    for name, s in all_stacks().items():
        ok, why = s.available()
        print(f"    {name:14s} {s.protocol}: {'available' if ok else 'NOT AVAILABLE'} ({why})")
    return 0


def check_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("files", nargs="+")


def list_arguments(ls: argparse.ArgumentParser) -> None:
    ls.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))


CHECK = Command("check", "validate topology and experiment files", check_arguments, cmd_check)
LIST = Command("list", "the experiments and the stacks", list_arguments, cmd_list)
