"""Shared runner for the quick profiles: one part, scale 0.1, fixed seeds (in the topology
files), short duration, no InfluxDB."""

from __future__ import annotations

import os
from collections.abc import Callable
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


def run_profile(
    tmp_path: Path,
    topology: str,
    flows: list[tuple[str, str]],
    stack: str,
    duration: float,
    bands: Callable[[dict], None],
    influx: InfluxWriter | None = None,
    exp_name: str = "profile",
) -> dict:
    """One part, judged by ``bands`` (asserts on the stack's result).

    A part whose emulation timing was flagged (hostwatch: bunched releases, a UDT sender pacing
    faster than the bottleneck) measured the machine as well as the stack (docs/testbed.md,
    "CPU and emulation timing"). The bands are lower bounds, and those distortions push a UDT
    sender into loss, below them: a flagged part that meets the bands passes, its flags
    printed. A flagged part that misses them runs once more, since the miss may be the
    machine's. A miss without a flag fails at once; two flagged misses fail, saying so."""
    part = Part(topology, topology, [Flow(f"{s}-{d}", s, d) for s, d in flows])
    missed: list[str] = []
    for attempt in (1, 2):
        run = Run(
            tmp_path / f"try{attempt}", SCALE, duration, "linkem", influx or InfluxWriter(None), f"test-{os.getpid()}"
        )
        res = run_experiment(run, Experiment(exp_name, topology, "", [part]), [all_stacks()[stack]])
        p = res["parts"][0]
        assert p["calibration_ok"], p["calibration"]
        r = p["stacks"][stack]
        for f in r["flows"]:  # into the test's captured output, for the bands' "measured" notes
            print(f"     {f['name']}: time to 90 % {f.get('time_to_90pct_s')} s, mean {f['mean_mbps']:.1f} Mb/s")
        timing = (r.get("host") or {}).get("flags") or []
        try:
            bands(r)
        except AssertionError as e:
            if not timing:
                raise
            missed.append(
                f"attempt {attempt}: {str(e).splitlines()[0][:300]} -- with emulation timing off: {'; '.join(timing)}"
            )
            print(f"     {missed[-1]}")
            continue
        if timing:
            print(f"     attempt {attempt}: met the bands with emulation timing off ({'; '.join(timing)})")
        return r
    raise AssertionError(
        "missed the bands in both attempts, each with emulation timing off (machine too loaded?):\n" + "\n".join(missed)
    )
