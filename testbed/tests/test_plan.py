"""A run's plan (udtbed.experiments.runner.plan, udtbed.experiments.plan.RunPlan, ``udtbed run
--dry-run``): which parts run, which stacks run each, and how many times (``--repeat N
--repeat-only WHAT``), with which emulation, runtime, placement and sinks, before anything is
built. Issue 40: the default ``make testbed`` repeats the runs that a band against libudt
compares and runs every other once. Issue 43: a cluster run is the same plan with the servers as
its placement. No network, no processes but the CLI's dry run."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from udtbed import REPO
from udtbed.commands.shared import select_experiments
from udtbed.experiments.experiment import EXPERIMENTS_DIR
from udtbed.experiments.run import Repeats
from udtbed.experiments.runner import Step, plan
from udtbed.experiments.stacks import BulkStack, all_stacks

DEFAULT_STACKS = ("udt-rs", "libudt", "sabul", "frtp", "tcp-cubic", "tcp-bbr", "tcp-reno")
# The parts with a band relative to libudt (of = "reference"): every Fig. 11 path and three-site.
AGAINST_411 = {
    ("efficiency", "chicago-local"),
    ("efficiency", "chicago-ottawa"),
    ("efficiency", "chicago-amsterdam"),
    ("fairness", "three-site"),
}


def _stacks() -> list[BulkStack]:
    registry = all_stacks()
    return [registry[s] for s in DEFAULT_STACKS]


def _default_plan(repeats: Repeats) -> list[Step]:
    return plan(select_experiments(EXPERIMENTS_DIR, "default"), _stacks(), 20.0, repeats)


def _times(steps: list[Step]) -> dict[tuple[str, str], dict[str, int]]:
    """Per part, how many times each stack runs it."""
    out: dict[tuple[str, str], Counter[str]] = {}
    for s in steps:
        runs = out.setdefault((s.experiment, s.part), Counter())
        if s.lineup is not None:
            runs[s.lineup] += 1
    return {k: dict(v) for k, v in out.items()}


def test_repeat_only_reference_repeats_the_runs_a_band_against_libudt_compares_and_the_rest_once() -> None:
    times = _times(_default_plan(Repeats(3, frozenset({"reference"}))))
    assert AGAINST_411 <= set(times)
    for part, runs in times.items():
        want = 3 if part in AGAINST_411 else 1
        assert runs.get("udt-rs", want) == want and runs.get("libudt", want) == want, (part, runs)
        others = {s: n for s, n in runs.items() if s not in ("udt-rs", "libudt")}
        assert set(others.values()) <= {1}, f"{part}: TCP and SABUL run once: {others}"
    assert times[("efficiency", "chicago-amsterdam")] == {
        "udt-rs": 3,
        "libudt": 3,
        "tcp-cubic": 1,
        "tcp-bbr": 1,
        "tcp-reno": 1,
    }
    assert times[("join", "streaming-join")]["udt-rs"] == 1, "no band there compares udt-rs with libudt"


def test_repeats_interleave_the_repeated_stacks_after_every_stack_s_first_run() -> None:
    steps = [s for s in _default_plan(Repeats(3, frozenset({"reference"}))) if s.part == "chicago-local"]
    order = [(s.lineup, s.repeat) for s in steps]
    assert order == [
        (None, 0),  # the build and calibration, once
        ("udt-rs", 0),
        ("libudt", 0),
        ("tcp-cubic", 0),
        ("tcp-bbr", 0),
        ("tcp-reno", 0),
        ("udt-rs", 1),
        ("libudt", 1),
        ("udt-rs", 2),
        ("libudt", 2),
    ]
    assert steps[1].seconds == 22.0 and steps[-1].seconds == pytest.approx(22.25), "20 s + overhead, + jitter"


def test_repeat_only_by_name_repeats_those_stacks_wherever_they_run_and_no_list_repeats_every_run() -> None:
    times = _times(_default_plan(Repeats(3, frozenset({"udt-rs", "libudt"}))))
    assert times[("join", "streaming-join")] == {"udt-rs": 3, "libudt": 3, "tcp-cubic": 1, "tcp-bbr": 1, "tcp-reno": 1}
    assert times[("sabul-local", "4-tcp")] == {"tcp-cubic": 1} and times[("sabul-local", "2-sabul-2-tcp")] == {
        "sabul": 1
    }
    every = _times(_default_plan(Repeats(2)))
    assert all(set(runs.values()) == {2} for runs in every.values()), every
    once = _default_plan(Repeats(1))
    assert len(once) == 42 and set(_times(once)[("fairness", "three-site")].values()) == {1}  # 9 parts, 33 runs


def test_repeat_only_refuses_a_name_that_is_neither_a_stack_nor_reference() -> None:
    with pytest.raises(ValueError, match="unknown 'udt'"):
        Repeats.parse(3, "udt,libudt", all_stacks())
    assert Repeats.parse(3, " reference , tcp-cubic", all_stacks()).only == {"reference", "tcp-cubic"}
    with pytest.raises(ValueError, match="at least 1"):
        Repeats(0)


def test_the_default_make_testbed_repeats_the_rows_against_libudt_three_times() -> None:
    made = subprocess.run(["make", "-n", "-C", str(REPO), "testbed"], capture_output=True, text=True, check=True)
    assert "--repeat '3' --repeat-only 'reference'" in made.stdout, made.stdout
    asked = subprocess.run(
        ["make", "-n", "-C", str(REPO), "testbed", "REPEAT=5"], capture_output=True, text=True, check=True
    )
    assert "--repeat '5'" in asked.stdout and "--repeat-only" not in asked.stdout, "REPEAT=N: every run N times"


def test_the_dry_run_prints_each_part_s_runs_and_their_repeats_and_builds_nothing() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "udtbed", "run", "--dry-run", "--repeat", "3", "--repeat-only", "reference"],
        capture_output=True,
        text=True,
        cwd=REPO / "testbed",
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "efficiency / chicago-local: build, calibrate; udt-rs x3, libudt x3, tcp-cubic x1" in p.stdout, p.stdout
    assert "join / streaming-join: build, calibrate; udt-rs x1, libudt x1" in p.stdout
    m = re.search(r"plan: 9 parts, (\d+) steps", p.stdout)
    assert m and int(m.group(1)) == 42 + 4 * 2 * 2, p.stdout  # 4 parts, 2 stacks, 2 more runs each


def dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "udtbed", "run", "--dry-run", *args],
        capture_output=True,
        text=True,
        cwd=REPO / "testbed",
        timeout=120,
    )


def test_the_dry_run_prints_the_emulation_runtime_placement_and_sinks_it_would_use(tmp_path: Path) -> None:
    p = dry_run("--experiments", "efficiency", "--backend", "linkem", "--influx", "none", "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "emulation: backend linkem (" in p.stdout and "scale 0.1; 20 s per run" in p.stdout, p.stdout
    assert "host runtime: netns" in p.stdout
    assert re.search(r"placement: this machine, CPUs \S+, pin auto", p.stdout), p.stdout
    assert f"results: {tmp_path}/<run id>; influx: none" in p.stdout
    assert not list(tmp_path.iterdir()), "a dry run makes no run directory"


THREE_SERVERS = """
[servers.sender]
ssh = "root@192.0.2.1"
underlay = { delay = "eth1" }
[servers.delay]
ssh = "root@192.0.2.2"
underlay = { sender = "eth1", receiver = "eth2" }
[servers.receiver]
ssh = "root@192.0.2.3"
underlay = { delay = "eth1" }
"""


def test_a_cluster_run_is_the_same_plan_placed_on_the_servers_and_the_dry_run_contacts_none(tmp_path: Path) -> None:
    # 192.0.2.0/24 is TEST-NET-1: nothing answers there, so a dry run that tried SSH would hang or fail.
    servers = tmp_path / "servers.toml"
    servers.write_text(THREE_SERVERS)
    p = dry_run("--experiments", "efficiency", "--servers", str(servers), "--results", str(tmp_path / "results"))
    assert p.returncode == 0, p.stderr
    assert "efficiency / chicago-amsterdam: build, calibrate; udt-rs x1, libudt x1" in p.stdout, p.stdout
    assert "emulation: backend linkem (a cluster run" in p.stdout
    assert f"placement: 3 servers ({servers}): sender, delay, receiver" in p.stdout
    assert "  chicago-amsterdam: sender: chicago; delay: link1; receiver: amsterdam" in p.stdout, p.stdout
    assert "  underlay sender eth1 <-> delay eth1" in p.stdout
    assert "  underlay delay eth2 <-> receiver eth1" in p.stdout
    assert not (tmp_path / "results").exists()


def test_a_placement_the_servers_cannot_join_is_refused_by_the_dry_run_before_anything(tmp_path: Path) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(THREE_SERVERS.replace('underlay = { sender = "eth1", receiver = "eth2" }', ""))
    p = dry_run("--experiments", "efficiency", "--servers", str(servers))
    assert p.returncode == 2, p.stdout
    assert "refused before anything was built" in p.stderr and "underlay" in p.stderr, p.stderr
