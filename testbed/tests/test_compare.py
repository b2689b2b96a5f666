"""Two runs side by side (udtbed compare): a shift beyond the scatter is flagged on its row and
no other, noise is not, and a side with one repeat is shown but not tested."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from udtbed.results import compare
from udtbed.results.results import ExperimentResult, PartResult, StackResult, Verdict

GOODPUT = "mean_mbps(local) >= 0.85 x capacity"
TIME = "time_to_90pct_s(local) <= 15"


def _verdict(band: str, value: float | None, low: float | None = None, high: float | None = None) -> Verdict:
    return Verdict(metric=band.split("(")[0], band=band, paper="", why="", value=value, low=low, high=high, ok=True)


def _run(
    tmp_path: Path, name: str, goodputs: Sequence[float], times: Sequence[float | None], stack: str = "udt-rs"
) -> Path:
    """A run directory whose one part ran len(goodputs) repeats of ``stack``."""
    reps = [
        {stack: StackResult(stack, "udt", verdicts=[_verdict(GOODPUT, g, low=85.0), _verdict(TIME, t, high=15.0)])}
        for g, t in zip(goodputs, times, strict=True)
    ]
    part = PartResult("chicago-local", "t", "t.toml", "", {}, [], True, {}, stacks=reps[0], more_repeats=reps[1:])
    exp = ExperimentResult("efficiency", "", "", "", 0.1, 20.0, 8.0, "linkem", parts=[part])
    d = tmp_path / name
    d.mkdir()
    exp.write(d / "efficiency.json")
    (d / "run.json").write_text(json.dumps({"run_id": name, "results": {"efficiency": "efficiency.json"}}))
    return d


def _noise(mean: float, sd: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_the_same_build_twice_flags_no_row(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", _noise(92, 1.5, 5, 1), _noise(7, 0.8, 5, 2))
    b = _run(tmp_path, "b", _noise(92, 1.5, 5, 3), _noise(7, 0.8, 5, 4))
    rows = compare.compare(a, b)
    assert [r.outcome for r in rows] == ["same", "same"], compare.table(rows)


def test_a_slower_build_is_flagged_on_the_row_that_moved_and_no_other(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", _noise(92, 1.5, 5, 1), _noise(7, 0.8, 5, 2))
    b = _run(tmp_path, "b", _noise(80, 1.5, 5, 3), _noise(7, 0.8, 5, 4))
    by_band = {r.band: r for r in compare.compare(a, b)}
    goodput = by_band[GOODPUT]
    assert goodput.outcome == "regressed" and goodput.change is not None and goodput.change < -0.1
    assert goodput.p_holm is not None and goodput.p_holm < 0.05
    assert by_band[TIME].outcome == "same"


def test_a_longer_time_is_worse_and_a_shorter_one_better(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [92, 92.5, 91.5], [7.0, 7.2, 6.8])
    slower = _run(tmp_path, "b", [92, 92.5, 91.5], [10.0, 10.2, 9.8])
    faster = _run(tmp_path, "c", [92, 92.5, 91.5], [4.0, 4.2, 3.8])
    assert {r.band: r.outcome for r in compare.compare(a, slower)}[TIME] == "regressed"
    assert {r.band: r.outcome for r in compare.compare(a, faster)}[TIME] == "improved"


def test_holm_adjusts_the_smallest_p_by_the_number_of_rows() -> None:
    assert compare.holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert compare.holm([]) == []


def test_one_repeat_is_shown_not_tested_and_two_stacks_of_one_run_compare(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [92.0], [7.0])
    rows = compare.compare(a, a)
    assert {r.outcome for r in rows} == {"not tested"} and rows[0].p is None
    both = _run(tmp_path, "both", [90, 91, 89], [7, 7, 7])
    # libudt beside udt-rs in the same run: add it to every repeat.
    exp = ExperimentResult.read(both / "efficiency.json")
    for rep, g in zip(exp.parts[0].repeats(), (70, 71, 69), strict=True):
        rep["libudt"] = StackResult(
            "libudt", "udt", verdicts=[_verdict(GOODPUT, g, low=85.0), _verdict(TIME, 7, high=15.0)]
        )
    exp.write(both / "efficiency.json")
    rows = compare.compare(both, None, ("libudt", "udt-rs"))
    assert {r.band: r.outcome for r in rows} == {GOODPUT: "improved", TIME: "same"}


def test_the_command_exits_1_on_a_regression_and_writes_the_page(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", _noise(92, 1.5, 5, 1), _noise(7, 0.8, 5, 2))
    b = _run(tmp_path, "b", _noise(80, 1.5, 5, 3), _noise(7, 0.8, 5, 4))
    p = subprocess.run([sys.executable, "-m", "udtbed", "compare", str(a), str(b)], capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 regressed" in p.stdout and "regressed" in (b / "compare-a.html").read_text()
    p = subprocess.run([sys.executable, "-m", "udtbed", "compare", str(a)], capture_output=True, text=True)
    assert p.returncode == 2 and "--stacks" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "udtbed", "compare", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "not a run directory" in p.stderr, p.stderr


def test_a_figure_the_base_measured_and_the_head_never_did_is_a_regression(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [92, 92.5, 91.5], [7.0, 7.2, 6.8])
    b = _run(tmp_path, "b", [92, 92.5, 91.5], [None, None, None])
    by_band = {r.band: r for r in compare.compare(a, b)}
    assert by_band[TIME].outcome == "regressed" and by_band[TIME].p is None
    assert {r.band: r.outcome for r in compare.compare(b, a)}[TIME] == "improved"
