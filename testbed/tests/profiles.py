"""Shared runner for the quick profiles: one part of an experiment file, scale 0.1, fixed seeds
(in the topology files), the profile's duration, no InfluxDB; judged by the part's bands."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from udtbed.experiments.bands import against_reference
from udtbed.experiments.experiment import Experiment, Part, load_all
from udtbed.experiments.run import Run
from udtbed.experiments.runner import CalibrationError, run_experiment
from udtbed.experiments.stacks import all_stacks
from udtbed.results.influx import InfluxWriter
from udtbed.results.results import StackResult, Verdict
from udtharness.stacks import reference_stacks

SCALE = 0.1

# The reference stack's last result on each (experiment, part) profiled in this session: the
# other stacks' reference-relative bands are judged against it (it runs first, profile_cases).
REFERENCE_RESULTS: dict[tuple[str, str], StackResult] = {}


def profiled_stacks() -> list[str]:
    """Stacks to profile: PROFILE_STACKS, else every available one of udt-rs / libudt / sabul / frtp;
    the reference stacks first, so that the others can be judged beside them."""
    want = os.environ.get("PROFILE_STACKS", "udt-rs,libudt,sabul,frtp").split(",")
    stacks = all_stacks()
    refs = set(reference_stacks().values())
    return sorted((s for s in want if s in stacks and stacks[s].available()[0]), key=lambda s: s not in refs)


def udt_stacks() -> list[str]:
    """The profiled stacks that speak UDT."""
    stacks = all_stacks()
    return [s for s in profiled_stacks() if stacks[s].protocol == "udt"]


def profile_cases() -> list[tuple[str, str, str]]:
    """(experiment, part, stack) for every part with a ``profile`` table and every profiled
    stack it runs as the stack under test and some band of it judges (the UDT stacks on the
    SC'04 parts, SABUL on its paper's), from the experiment files."""
    out = []
    stacks = all_stacks()
    for exp in load_all().values():
        for part in exp.parts:
            if part.profile is None:
                continue
            judged = {b.protocol for b in part.bands}
            for stack in profiled_stacks():
                protocol = stacks[stack].protocol
                if not part.runs(protocol) or protocol not in judged:
                    continue
                if part.profile.stacks is None or stack in part.profile.stacks:
                    out.append((exp.name, part.label, stack))
    return out


def _one_epoch_window(v: Verdict) -> bool:
    """Whether ``v`` judges a mean over the last seconds of a quick run (``..., after N s)``): at
    the quick profiles' 20-25 s one loss epoch more or less in those seconds decides the band
    (docs/results/2026-11-28-window-stall.md: udt-rs's first epoch on Amsterdam came anywhere
    from 14 to 23 s), so a miss there runs once more, and fails when the second run misses too."""
    return v.metric == "mean_mbps" and ", after " in v.band


def run_profile(
    tmp_path: Path, exp: Experiment, part: Part, stack: str, influx: InfluxWriter | None = None
) -> StackResult:
    """One part at its profile's duration, judged by the part's bands (udtbed.experiments.bands).

    A part whose emulation timing was flagged (hostwatch: bunched releases, a UDT sender pacing
    faster than the bottleneck) measured the machine as well as the stack (docs/testbed/timing.md,
    "CPU and emulation timing"). The bands are lower bounds, and those distortions push a UDT
    sender into loss, below them: a flagged part that meets the bands passes, its flags
    printed. A flagged part that misses them runs once more, since the miss may be the
    machine's. A miss without a flag fails at once, unless every band it missed is a mean over
    a quick run's last seconds, which one loss epoch decides: then it runs once more and fails
    when the second run misses too. A second miss is *inconclusive* (the test
    skips, saying why) where the machine itself flagged it (hostwatch.machine_flags: frames
    released late, the hypervisor's steal, another busy process): that run measured the
    machine, not the stack, and so is a second attempt whose paths no longer calibrate after the
    machine flagged the first. A second miss with only a sender's pacing flagged fails: that may
    be the stack's own doing.

    A stack beside the reference stack of its protocol is also judged by the part's
    reference-relative bands (``of = "reference"``, at their profile bounds) against the
    reference's result from earlier in this session (:data:`REFERENCE_RESULTS`; none: not
    judged). Such a miss compares two runs, each with its own loss epochs, so it runs once more
    too."""
    assert part.profile is not None, f"{exp.name}/{part.label} has no profile table"
    one = replace(exp, parts=(part,))
    key = (exp.name, part.label)
    reference = reference_stacks().get(all_stacks()[stack].protocol)
    missed: list[str] = []
    flagged: list[str] = []  # what the machine's timing flagged on the attempt before
    for attempt in (1, 2):
        run = Run(
            tmp_path / f"try{attempt}",
            SCALE,
            part.profile.duration,
            "linkem",
            influx or InfluxWriter(None),
            f"test-{os.getpid()}",
        )
        try:
            p = run_experiment(run, one, [all_stacks()[stack]]).parts[0]
        except CalibrationError as e:
            # The emulator's paths no longer calibrate on the second try of a part whose first
            # the machine had flagged: the machine again, before the stack ran at all.
            if attempt == 2 and flagged:
                pytest.skip(
                    f"inconclusive: {exp.name}/{part.label} on {stack} missed its bands with the machine's timing "
                    f"off ({'; '.join(flagged)}), and its paths then failed to calibrate ({e}): that "
                    'measured the machine, not the stack; rerun on a quieter machine (docs/testbed/timing.md, "CPU and '
                    'emulation timing")\n' + "\n".join(missed)
                )
            raise
        assert p.calibration_ok, p.calibration
        r = p.stacks[stack]
        flagged = list(r.machine_flags)
        for f in r.flows:  # into the test's captured output, for the bands' "measured" notes
            print(f"     {f.name}: time to 90 % {f.time_to_90pct_s} s, mean {f.mean_mbps:.1f} Mb/s")
        if stack == reference:
            REFERENCE_RESULTS[key] = r
        elif reference is not None and key in REFERENCE_RESULTS:
            beside = {reference: REFERENCE_RESULTS[key], stack: r}
            against_reference(beside, reference, part, SCALE, run.warmup, run.duration, profile=True)
            for v in r.verdicts:
                if v.relative:
                    print(f"     {v.line()}")
        missing = [v for v in r.verdicts if not v.ok]
        timing = r.timing_flags
        if not missing:
            if timing:
                print(f"     attempt {attempt}: met the bands with emulation timing off ({'; '.join(timing)})")
            return r
        why = "\n".join(v.line() + f"\n       paper: {v.paper}" for v in missing)
        if all(v.relative or _one_epoch_window(v) for v in missing) and attempt == 1:
            missed.append(
                f"attempt 1: {why} (beside the reference's run, or a window one loss epoch decides: once more)"
            )
            print(f"     {missed[-1]}")
            continue
        if not timing:
            before = "".join(f"{m}\n" for m in missed)
            raise AssertionError(f"{exp.name}/{part.label} on {stack} missed its bands:\n{before}{why}\n{r.flows}")
        missed.append(f"attempt {attempt}: {why} -- with emulation timing off: {'; '.join(timing)}")
        print(f"     {missed[-1]}")
    machine = r.machine_flags
    if machine:
        pytest.skip(
            f"inconclusive: {exp.name}/{part.label} on {stack} missed its bands in both attempts, the last with "
            f"the machine's timing off ({'; '.join(machine)}): that measured the machine, not the stack; "
            'rerun on a quieter machine (docs/testbed/timing.md, "CPU and emulation timing")\n' + "\n".join(missed)
        )
    raise AssertionError(
        "missed the bands in both attempts (beside the reference's run, or with a UDT sender pacing faster "
        "than the bottleneck, the machine's timing not flagged):\n" + "\n".join(missed)
    )
