"""``udtbed simulate`` and ``udtbed ns2-check``: the papers' NS-2 figures in the deterministic
simulator, each claim judged, and the simulator's TCP checked against NS-2's own on the same
dumbbells (udtbed.simulation; docs/simulator.md). ``udtbed run`` ends with both."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import REPO
from ..simulation import sim
from .shared import Command

# The NS-2 check's quick points beside the simulated figures: seeds per point (the full check,
# 36 dumbbells x 10 seeds per profile, is `make ns2-check`).
NS2_QUICK_SEEDS = 3


def run_simulations(
    names: list[str],
    scenarios: dict[str, sim.Scenario],
    outdir: Path,
    quick: bool,
    jobs: int | None,
    seeds: int = 1,
) -> int:
    """Runs the named scenarios into ``outdir`` (each under ``seeds`` seeds) and prints each
    claim's verdict; returns the number of claims not reproduced. Raises what ``sim.simulate``
    raises (a missing simulator)."""
    not_reproduced = 0
    for n in names:
        sc = scenarios[n]
        t0 = time.monotonic()
        by_seed, checks = sim.simulate_seeds(sc, seeds, quick=quick, jobs=jobs)
        points = by_seed[0]
        out = sim.write(sc, points, checks, outdir, quick, by_seed[1:])
        every = [p for pts in by_seed for p in pts]
        runs = sum(len(p.results) for p in every)
        # A count-bound run (short_flows.until_done) may end before its duration: its last sample.
        sim_s = sum((r["bottleneck"]["times_s"] or [r["spec"]["duration_s"]])[-1] for p in every for r in p.results)
        of = f", {seeds} seeds" if seeds > 1 else ""
        print(f"{n} ({sc.figure}): {runs} runs{of}, {sim_s:.0f} s simulated in {time.monotonic() - t0:.1f} s -> {out}")
        for c in checks:
            mark = {"holds": "reproduced", "fails": "NOT reproduced"}.get(c.judgement, c.judgement)
            print(f"  {mark}: {c.check.claim} [{c.detail}]")
            not_reproduced += c.ok is False
        for label, where in sim.paper_position(sc, points).items():
            print(f"  where the paper falls, {label}: {where}")
    return not_reproduced


def quick_ns2_checks(outdir: Path) -> None:
    """The NS-2 check's quick points for every TCP profile into ``outdir/ns2-check[-profile]``, so
    that the report shows the simulator's TCP against NS-2's beside the figures it is used in.
    Without NS-2's ``ns`` it says so and skips; a disagreement is printed, not an error."""
    from ..simulation import ns2check

    if ns2check.ns_binary() is None:
        print("ns2-check: skipped, NS-2's `ns` is not installed (`make setup` installs it)")
        return
    for profile in ns2check.PROFILES:
        results = ns2check.compare(ns2check.scenarios(quick=True), NS2_QUICK_SEEDS, profile=profile)
        name = "ns2-check" if profile == ns2check.DEFAULT_PROFILE else f"ns2-check-{profile}"
        command = f"python -m udtbed ns2-check --quick --seeds {NS2_QUICK_SEEDS} --profile {profile}"
        ns2check.write(results, outdir / name, NS2_QUICK_SEEDS, command)
        verdicts = ", ".join(f"{c.scenario.name} {c.verdict.value}" for c in results)
        print(f"ns2-check, quick points, TCP profile {profile}: {verdicts} -> {outdir / name}")


def cmd_simulate(a: argparse.Namespace) -> int:
    """Every scenario of experiments/sim (or --only those), each a JSON, a plot and its claims."""
    try:
        scenarios = sim.load_all(Path(a.scenarios_dir))
    except sim.ScenarioError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    names = list(scenarios) if not a.only else a.only.split(",")
    unknown = [n for n in names if n not in scenarios]
    if unknown:
        have = ", ".join(scenarios)
        print(f"udtbed: no scenario {', '.join(unknown)} in {a.scenarios_dir} (have {have})", file=sys.stderr)
        return 2
    try:
        if a.seeds < 1:
            print(f"udtbed: --seeds must be 1 or more, not {a.seeds}", file=sys.stderr)
            return 2
        missed = run_simulations(names, scenarios, Path(a.results), a.quick, a.jobs, a.seeds)
        if not a.only:
            quick_ns2_checks(Path(a.results))
    except (FileNotFoundError, RuntimeError) as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nudtbed: interrupted (the simulations are processes of this one: nothing is left)", file=sys.stderr)
        return 130
    print(f"{missed} claim(s) not reproduced" if missed else "every judged claim reproduced")
    return 0


def cmd_ns2_check(a: argparse.Namespace) -> int:
    """Our simulator's TCP against NS-2's on the same dumbbells (docs/simulator.md, "Checked against
    NS-2"): a table, JSON and Markdown into --out; exit 1 when a scenario disagrees, 2 without ns."""
    from ..simulation import ns2check

    if ns2check.ns_binary() is None:
        print("udtbed: NS-2's `ns` is not installed: `make setup` installs it (Debian package ns2)", file=sys.stderr)
        return 2
    if a.seeds < 1:
        print(f"udtbed: --seeds must be 1 or more, not {a.seeds}", file=sys.stderr)
        return 2
    checks = ns2check.scenarios(a.quick)
    if a.only:
        names = a.only.split(",")
        checks = [c for c in checks if c.name in names]
        if not checks:
            have = ", ".join(c.name for c in ns2check.scenarios(a.quick))
            print(f"udtbed: no scenario {a.only} (have {have})", file=sys.stderr)
            return 2
    profile = a.profile
    command = (
        "python -m udtbed ns2-check"
        + (" --quick" if a.quick else "")
        + f" --seeds {a.seeds}"
        + (f" --profile {profile}" if profile != ns2check.DEFAULT_PROFILE else "")
    )
    print(f"==> ns2-check: {len(checks)} scenario(s) x {a.seeds} seed(s), ours and NS-2, profile {profile}", flush=True)
    try:
        results = ns2check.compare(
            checks, a.seeds, a.jobs, progress=lambda line: print("  " + line, flush=True), profile=profile
        )
    except (FileNotFoundError, RuntimeError) as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 1
    print(ns2check.table(results))
    default_out = "ns2-check" if profile == ns2check.DEFAULT_PROFILE else f"ns2-check-{profile}"
    out = Path(a.out) if a.out else REPO / "results/sim" / default_out
    ns2check.write(results, out, a.seeds, command)
    bad = [c.scenario.name for c in results if c.verdict is ns2check.Verdict.DISAGREE]
    unsure = [c.scenario.name for c in results if c.verdict is ns2check.Verdict.INCONCLUSIVE]
    print(f"wrote {out / 'ns2-check.json'} and {out / 'ns2-check.md'}")
    if unsure:
        print(f"inconclusive (beyond the tolerance, within the seeds' scatter; more --seeds): {', '.join(unsure)}")
    if bad:
        print(f"disagree with NS-2 beyond {ns2check.GOODPUT_TOLERANCE:.0%}: {', '.join(bad)}")
        return 1
    print(f"every scenario within {ns2check.GOODPUT_TOLERANCE:.0%} of NS-2 or the seeds' scatter")
    return 0


def simulate_arguments(sm: argparse.ArgumentParser) -> None:
    sm.add_argument("--only", help="comma-separated scenario names (default: all)")
    sm.add_argument("--quick", action="store_true", help="the short versions make test pins")
    sm.add_argument("--jobs", type=int, help="simulations at once (default: the CPU count)")
    sm.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run each figure under this many seeds (loss streams, flows' start times); a claim holds "
        "when it holds in every seed, fails when in none, else is inconclusive (default 1)",
    )
    sm.add_argument("--results", default=str(REPO / "results/sim"))
    sm.add_argument("--scenarios-dir", default=str(sim.SCENARIOS_DIR))


def ns2_check_arguments(nc: argparse.ArgumentParser) -> None:
    nc.add_argument("--quick", action="store_true", help="three 20 s points (seconds in all) instead of the 36")
    nc.add_argument("--seeds", type=int, default=10, help="seeds per scenario (default 10)")
    nc.add_argument("--only", help="comma-separated scenario names (default: all)")
    nc.add_argument("--jobs", type=int, help="runs at once (default: the CPU count + 4 threads)")
    nc.add_argument(
        "--profile",
        choices=sim.TCP_PROFILES,
        default="default",
        help="the model's TCP profile, NS-2's agents set to match (ns2-2.26: the papers' NS-2 defaults)",
    )
    nc.add_argument("--out", help="default results/sim/ns2-check (ns2-check-<profile> for another profile)")


SIMULATE = Command(
    "simulate", "the papers' NS-2 figures in the simulator (experiments/sim/*.toml)", simulate_arguments, cmd_simulate
)
NS2_CHECK = Command(
    "ns2-check",
    "our simulator's TCP against NS-2's on the same dumbbells (needs ns)",
    ns2_check_arguments,
    cmd_ns2_check,
)
