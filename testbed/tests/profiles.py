"""Shared runner for the quick profiles: one part, scale 0.1, fixed seeds (in the topology
files), short duration, no InfluxDB."""

from __future__ import annotations

import os
from pathlib import Path

from udtbed.experiments import Experiment, Flow, Part, Run, run_experiment
from udtbed.influx import InfluxWriter
from udtbed.stacks import all_stacks

SCALE = 0.1


def udt_stacks() -> list[str]:
    """UDT stacks to profile: PROFILE_STACKS, else every available one of udt / libudt."""
    want = os.environ.get("PROFILE_STACKS", "udt,libudt").split(",")
    stacks = all_stacks()
    return [s for s in want if s in stacks and stacks[s].available()[0]]


def run_profile(tmp_path: Path, topology: str, flows: list[tuple[str, str]], stack: str, duration: float,
                influx: InfluxWriter | None = None, exp_name: str = "profile") -> dict:
    run = Run(tmp_path, SCALE, duration, "linkem", influx or InfluxWriter(None), f"test-{os.getpid()}")
    part = Part(topology, topology, [Flow(f"{s}-{d}", s, d) for s, d in flows])
    res = run_experiment(run, Experiment(exp_name, topology, "", [part]), [all_stacks()[stack]])
    p = res["parts"][0]
    assert p["calibration_ok"], p["calibration"]
    return p["stacks"][stack]
