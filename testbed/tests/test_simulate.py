"""The simulated figures (experiments/sim, docs/simulator.md): scenario files, the quick versions
pinned as snapshots, and the claims their quick versions can show.

A change to the protocol code that moves a simulated figure shows as a snapshot diff. When the
change is meant, rewrite the snapshots with ``UPDATE_SNAPSHOTS=1 make test-simulate`` and
commit them with it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from udtbed.simulation import sim

SNAPSHOTS = Path(__file__).parent / "snapshots" / "sim"
SCENARIOS = sim.load_all()

needs_simulator = pytest.mark.skipif(not sim.SIMULATOR.exists(), reason=f"{sim.SIMULATOR} not built (make build)")


def test_every_scenario_file_loads_and_names_a_paper_figure() -> None:
    assert {"sc04-fig2", "sc04-fig3", "sc04-fig4", "sc04-fig5", "sc04-fig6", "sc04-fig7"} <= set(SCENARIOS)
    assert {"sabul-fig1", "sabul-fig2"} <= set(SCENARIOS)
    for sc in SCENARIOS.values():
        # A sensitivity sweep over what the paper left open marks the paper's figure instead.
        assert sc.figure and sc.claim and (sc.checks or sc.paper), sc.name


def test_queue_sizes_follow_the_captions() -> None:
    # 100 Mb/s × 1 ms is 8.3 packets of 1500 bytes; × 100 ms, 833.3.
    assert sim.queue_packets("max(10, bdp)", 100, 1) == 10
    assert sim.queue_packets("max(10, bdp)", 100, 100) == 834
    assert sim.queue_packets("max(bdp, 100)", 100, 1) == 100
    assert sim.queue_packets("bdp", 1000, 100) == 8334
    assert sim.queue_packets(64, 1000, 100) == 64
    with pytest.raises(ValueError, match="number of packets, bdp"):
        sim.queue_packets("2*bdp", 100, 1)


def test_a_sweep_sets_each_flows_rtt_unless_the_flow_fixes_it() -> None:
    points = sim.expand(SCENARIOS["sc04-fig6"])
    by = {(p.series, p.x): p.specs[0] for p in points}
    spec = by[("UDT (4.11)", 100.0)]
    assert [f["rtt_ms"] for f in spec["flows"]] == [1, 100.0]
    assert spec["bottleneck"]["queue_pkts"] == 8334


def test_a_queue_sweep_sizes_the_queue_in_bdps_of_the_longest_rtt() -> None:
    by = {(p.series, p.x): p.specs[0] for p in sim.expand(SCENARIOS["sc04-fig6-queue"])}
    # 1 Gb/s x 1000 ms (flow 2, the longest) is 83 333.3 packets; 0.012 of it is 1000.
    assert by[("UDT (4.11)", 0.012)]["bottleneck"]["queue_pkts"] == 1000
    assert by[("UDT (4.11)", 1.0)]["bottleneck"]["queue_pkts"] == 83334
    assert [f["rtt_ms"] for f in by[("UDT (4.11)", 1.0)]["flows"]] == [1, 1000]


def _swept(values: dict[str, list[float]], mark: sim.PaperMark) -> tuple[sim.Scenario, list[sim.Point]]:
    sc = dataclasses.replace(SCENARIOS["sc04-fig11-ottawa-queue"], paper=mark)
    xs = [0.25, 0.5, 1.0, 2.0]
    points = [
        sim.Point(label, x, [], values={mark.key: v})
        for label, vs in values.items()
        for x, v in zip(xs, vs, strict=True)
    ]
    return sc, points


def test_the_paper_mark_says_between_which_points_of_a_sweep_its_figure_falls() -> None:
    mark = sim.PaperMark("ottawa_mbps", "Fig. 11: 580 Mb/s", value=580)
    sc, points = _swept({"UDT (4.11)": [472, 530, 590, 600], "UDT (paper)": [400, 450, 500, 548]}, mark)
    where = sim.paper_position(sc, points)
    assert "between queue_bdp = 0.5 (530) and 1 (590)" in where["UDT (4.11)"]
    assert "above the whole sweep (its highest: 548 at queue_bdp = 2)" in where["UDT (paper)"]
    sc, points = _swept({"UDT (4.11)": [600, 610, 620, 630], "UDT (paper)": [1, 2, 3, 4]}, mark)
    assert "below the whole sweep (its lowest: 600 at queue_bdp = 0.25)" in sim.paper_position(sc, points)["UDT (4.11)"]


def test_the_paper_mark_of_a_band_says_where_in_the_sweep_it_is_met() -> None:
    mark = sim.PaperMark("rtt_ratio", "within 10 %", min=0.9, max=1.1)
    sc, points = _swept({"UDT (4.11)": [0.15, 0.5, 0.95, 1.05], "UDT (paper)": [0.1, 0.2, 0.3, None]}, mark)  # type: ignore[list-item]
    where = sim.paper_position(sc, points)
    assert "[0.9, 1.1]: met at queue_bdp = 1, 2" in where["UDT (4.11)"]
    assert "met nowhere in the sweep" in where["UDT (paper)"] and "2:" not in where["UDT (paper)"]


def test_a_second_warm_up_gives_the_metric_once_more_under_its_own_key() -> None:
    sc = dataclasses.replace(SCENARIOS["sc04-fig4"], also_warmup_s=0.0)
    times = [float(t) for t in range(1, 21)]
    # Two flows that swing in their first 10 s and run evenly after.
    flows = [
        {
            "start_s": 0.0,
            "rtt_ms": 1,
            "times_s": times,
            "throughput_mbps": [90.0 if t % 2 else 10.0 for t in range(1, 11)] + [50.0] * 10,
        }
        for _ in range(2)
    ]
    result = {"flows": flows, "spec": {"bottleneck": {"rate_mbps": 100}}, "bottleneck": {"utilisation": 1.0}}
    v = sim.reduce(sc, sim.Point("UDT (4.11)", 1.0, [], results=[result], warmup_s=10.0))
    assert v["stability"] == 0.0
    assert v["stability_warmup_0s"] is not None and v["stability_warmup_0s"] > 0.3


def test_a_friendliness_point_runs_an_all_tcp_twin() -> None:
    p = sim.expand(SCENARIOS["sc04-fig5"], quick=True)[0]
    mixed, alone = p.specs
    assert [f["protocol"] for f in mixed["flows"]] == ["udt", "tcp"]
    assert [f["protocol"] for f in alone["flows"]] == ["tcp", "tcp"]
    assert sum(f["count"] for f in alone["flows"]) == 15
    assert "cc" not in alone["flows"][0]


BAD = {
    "unknown key": ("colour = 'red'\n", "colour: unknown key"),
    "bad metric": ("", "metric: 'fastness' is not one of"),
    "no series": ("", "series: needs at least one"),
    "check on an unknown series": ("", "check[0]: needs a claim and a series among"),
    "bad queue": ("", "queue"),
    "paper mark without a value": ("paper = { key = 'jain', label = 'L' }\n", "paper: give either a value or a band"),
    "second warm-up beyond the run": ("also_warmup_s = 500\n", "also_warmup_s: must be a number of seconds"),
    "a SABUL model that does not exist": ("", "series[0].flows[0].cc: 'udt411' is not a sabul model: use 'ns2-2004'"),
}


def _scenario_text(case: str) -> str:
    metric = "fastness" if case == "bad metric" else "jain"
    flow = (
        "{ protocol = 'sabul', cc = 'udt411' }"
        if case == "a SABUL model that does not exist"
        else "{ protocol = 'udt', count = 2 }"
    )
    series = "" if case == "no series" else f"[[series]]\nlabel = 'a'\nflows = [{flow}]\n"
    check = "[[check]]\nclaim = 'c'\nseries = 'b'\nmin = 1\n" if case == "check on an unknown series" else ""
    queue = "'3*bdp'" if case == "bad queue" else "'bdp'"
    extra = BAD[case][0]
    return (
        f"name = 'bad'\nfigure = 'F'\ntitle = 'T'\nsetup = 'S'\nclaim = 'C'\nmetric = '{metric}'\n{extra}"
        f"x = 'rtt_ms'\nvalues = [1]\nbottleneck = {{ rate_mbps = 10, queue = {queue} }}\n"
        + ("series = []\n" if case == "no series" else "")
        + series
        + check
    )


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_scenario_file_says_which_key_is_wrong(tmp_path: Path, case: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_scenario_text(case))
    if case == "bad queue":
        sc = sim.load(path)
        with pytest.raises(ValueError, match=re.escape(BAD[case][1])):
            sim.expand(sc)
        return
    with pytest.raises(sim.ScenarioError, match=re.escape(BAD[case][1])) as e:
        sim.load(path)
    assert str(path) in str(e.value)


@needs_simulator
def test_the_simulator_refuses_a_bad_spec_with_what_is_wrong() -> None:
    spec = {"seed": 1, "duration_s": 5, "bottleneck": {"rate_mbps": 10, "queue_pkts": 0}, "flows": []}
    p = subprocess.run([str(sim.SIMULATOR), "-"], input=json.dumps(spec), capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "queue_pkts must be at least 1" in p.stderr
    p = subprocess.run([str(sim.SIMULATOR), "-"], input="{}", capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "not a run spec" in p.stderr and "missing field" in p.stderr


@needs_simulator
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_quick_version_matches_its_snapshot_and_shows_its_claims(name: str, tmp_path: Path) -> None:
    sc = SCENARIOS[name]
    points, checks = sim.simulate(sc, quick=True, jobs=2)
    text = sim.snapshot(sc, points, checks)
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}: write it with UPDATE_SNAPSHOTS=1 make test-simulate"
    assert text == path.read_text(), (
        f"{name}'s simulated figure moved: if the protocol change means it, rewrite the snapshot "
        f"(UPDATE_SNAPSHOTS=1 make test-simulate) and commit it"
    )
    failed = [f"{c.check.claim}: {c.detail}" for c in checks if c.ok is not True and not c.check.informational]
    assert not failed, failed
    out = sim.write(sc, points, checks, tmp_path, quick=True)
    written = json.loads(out.read_text())
    assert len(written["points"]) == len(points) and len(written["checks"]) == len(checks)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_a_seed_after_the_first_moves_the_loss_streams_and_the_flows_starts() -> None:
    sc = SCENARIOS["sc04-fig12"]
    assert sim.reseeded(sc, 0) is sc
    second = sim.reseeded(sc, 1)
    assert second.seed == sc.seed + 1
    starts = [
        (f.get("start_s", 0.0), g["start_s"])
        for s, t in zip(sc.series, second.series, strict=True)
        for f, g in zip(s.flows, t.flows, strict=True)
    ]
    assert starts and all(0 < b - a <= sim.START_JITTER_S for a, b in starts), starts
    assert sim.reseeded(sc, 1) == second, "the jitter is drawn from the seed: the same every time"


def test_an_informational_claim_is_shown_with_its_outcome_but_not_counted() -> None:
    sc = SCENARIOS["sabul-fig1"]
    shown = next(c for c in sc.checks if c.informational)
    counted = dataclasses.replace(shown, informational=False)
    sc = dataclasses.replace(sc, checks=(shown, counted))
    x = shown.at[0] if shown.at else 1.0
    point = sim.Point(shown.series, x, [], values={shown.key: (shown.min or 0.0) - 0.01})
    info, judged = sim.judge(sc, [point], quick=False)
    assert (info.ok, info.judgement) == (None, "informational") and info.detail.startswith("outside the bound")
    assert (judged.ok, judged.judgement) == (False, "fails")
    assert "check informational (outside the bound: " in sim.snapshot(sc, [point], [info])


def test_a_claim_holds_over_seeds_only_when_every_seed_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = SCENARIOS["sc04-fig7"]
    check = sc.checks[0]
    outcomes = {sc.seed: True, sc.seed + 1: False, sc.seed + 2: True}

    def fake(
        s: sim.Scenario, quick: bool = False, jobs: int | None = None, simulator: Path = sim.SIMULATOR
    ) -> tuple[list[sim.Point], list[sim.CheckResult]]:
        ok = outcomes[s.seed]
        return [], [sim.CheckResult(check, ok, "ok" if ok else "x=1: 0.5 < 0.9")]

    monkeypatch.setattr(sim, "simulate", fake)
    _, (c,) = sim.simulate_seeds(sc, 3)
    assert (c.ok, c.judgement, c.seeds) == (None, "inconclusive", (True, False, True))
    assert c.detail == "holds in 2 of 3 seeds; first failure: x=1: 0.5 < 0.9"
    outcomes[sc.seed + 1] = True
    _, (c,) = sim.simulate_seeds(sc, 3)
    assert (c.ok, c.judgement) == (True, "holds")
    outcomes.update(dict.fromkeys(outcomes, False))
    _, (c,) = sim.simulate_seeds(sc, 3)
    assert (c.ok, c.judgement) == (False, "fails")


@needs_simulator
def test_seeds_run_and_are_written_with_each_claims_outcome(tmp_path: Path) -> None:
    sc = SCENARIOS["sc04-fig7"]
    by_seed, checks = sim.simulate_seeds(sc, 2, quick=True, jobs=2)
    assert len(by_seed) == 2 and [p.specs[0]["seed"] for p in (by_seed[0][0], by_seed[1][0])] == [sc.seed, sc.seed + 1]
    written = json.loads(sim.write(sc, by_seed[0], checks, tmp_path, True, by_seed[1:]).read_text())
    assert written["seeds"] == [sc.seed, sc.seed + 1] and len(written["more_seeds"]) == 1
    assert all(len(c["seeds"]) == 2 and c["judgement"] in ("holds", "fails", "inconclusive") for c in written["checks"])
