"""``udtbed report``: a run directory's HTML report (re)drawn from its results; the same drawing
ends ``udtbed run``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from .shared import Command


def draw_report(outdir: Path, how: str) -> int:
    """Draws ``outdir``'s report (``how="auto"``: where matplotlib is importable; a host
    without it, the full-scale bundle's, says how to draw it elsewhere from the results)."""
    if how == "none":
        return 0
    if importlib.util.find_spec("matplotlib") is None:
        if how == "auto":
            print(
                f"\nreport: not drawn here (no matplotlib); draw it from the results: python -m udtbed report {outdir}"
            )
            return 0
        print("udtbed: the report needs matplotlib: run `make setup` (it installs .venv)", file=sys.stderr)
        return 2
    from ..results.report import write_report

    print(f"\nreport: {write_report(outdir)}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    """(Re)draws the report of a run directory from its results (run.json, <experiment>.json)."""
    outdir = Path(a.run_dir).resolve()  # `latest` names the run it points to, as the run itself did
    if not (outdir / "run.json").is_file():
        print(
            f"udtbed: {outdir} is not a run directory (no run.json): name one under results/testbed/", file=sys.stderr
        )
        return 2
    return draw_report(outdir, "on")


def add_arguments(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("run_dir", help="a run directory (results/testbed/<run>)")


REPORT = Command("report", "(re)draw a run directory's HTML report from its results", add_arguments, cmd_report)
