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
    """One part; run a second time if the first was flagged for emulation timing (hostwatch):
    such a result measures the machine's load, not the stack (docs/testbed.md, "CPU and
    emulation timing"). Twice flagged fails, saying so."""
    part = Part(topology, topology, [Flow(f"{s}-{d}", s, d) for s, d in flows])
    for attempt in (1, 2):
        run = Run(tmp_path / f"try{attempt}", SCALE, duration, "linkem", influx or InfluxWriter(None), f"test-{os.getpid()}")
        res = run_experiment(run, Experiment(exp_name, topology, "", [part]), [all_stacks()[stack]])
        p = res["parts"][0]
        assert p["calibration_ok"], p["calibration"]
        r = p["stacks"][stack]
        timing = (r.get("host") or {}).get("flags") or []
        if not timing:
            break
        print(f"     attempt {attempt}: emulation timing off ({'; '.join(timing)})")
    assert not timing, f"emulation timing off in both attempts (machine too loaded?): {timing}"
    for f in r["flows"]:  # into the test's captured output, for the bands' "measured" notes
        print(f"     {f['name']}: time to 90 % {f.get('time_to_90pct_s')} s, mean {f['mean_mbps']:.1f} Mb/s")
    return r
