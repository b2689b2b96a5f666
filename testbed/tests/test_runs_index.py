"""All runs at a glance (udtbed.results.runs_index): one row per run, and two runs picked side by side
in headless Chromium, as the report is checked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from udtbed.results import runs_index, screenshot
from udtbed.results.results import ExperimentResult, PartResult, StackResult, Verdict

BAND = "mean_mbps(local) >= 0.85 x capacity"


def _run(root: Path, run_id: str, goodputs: list[float]) -> dict[str, Any]:
    d = root / run_id
    d.mkdir()
    reps = [
        {"udt-rs": StackResult("udt-rs", "udt", verdicts=[Verdict("mean_mbps", BAND, "", "", g, 85.0, None, g >= 85)])}
        for g in goodputs
    ]
    part = PartResult("chicago-local", "t", "t.toml", "", {}, [], True, {}, stacks=reps[0], more_repeats=reps[1:])
    exp = ExperimentResult("efficiency", "", "", "", 0.1, 20.0, 8.0, "linkem", parts=[part])
    meta = {"run_id": run_id, "commit": "abc123", "scale": 0.1, "repeat": len(goodputs), "experiments": ["efficiency"]}
    (d / "run.json").write_text(json.dumps(meta | {"results": {"efficiency": "efficiency.json"}}))
    exp.write(d / "efficiency.json")
    return runs_index.summarise(d, meta, [exp])


def test_a_run_s_summary_counts_its_bands_over_the_repeats(tmp_path: Path) -> None:
    s = _run(tmp_path, "20260101-000000", [90.0, 91.0, 92.0])
    assert s["counts"] == {"udt-rs": {"met": 1, "missed": 0, "inconclusive": 0, "deviation": 0}}
    (row,) = s["rows"]
    assert row["n"] == 3 and row["low"] < 91.0 < row["high"] and row["mark"] == "✓"


def test_the_index_lists_every_run_and_names_one_without_a_summary(tmp_path: Path) -> None:
    _run(tmp_path, "20260101-000000", [90.0, 91.0, 92.0])
    (tmp_path / "20260102-000000").mkdir()
    (tmp_path / "20260102-000000" / "run.json").write_text("{}")
    page = runs_index.write_index(tmp_path).read_text()
    assert page.index("20260102-000000") < page.index("20260101-000000"), "newest first"
    assert "no summary: draw its report" in page and "udt-rs 1✓ 0✕ 0~" in page


@pytest.mark.slow
def test_two_runs_picked_open_side_by_side_in_a_browser(tmp_path: Path) -> None:
    try:
        screenshot.find_chromium()
    except screenshot.ScreenshotError as e:
        pytest.skip(str(e))
    _run(tmp_path, "20260101-000000", [90.0, 91.0, 92.0])
    _run(tmp_path, "20260102-000000", [80.0, 81.0, 80.5])
    page = runs_index.write_index(tmp_path)
    dom = screenshot.rendered_dom(page.as_uri() + "#a=20260101-000000&b=20260102-000000")
    assert "20260101-000000 (A) beside 20260102-000000 (B)" in dom, dom[-2000:]
    text = re.sub(r"<[^>]+>", "|", dom)
    assert "-11.5 %" in text and "apart" in text, text[-1500:]
    assert "udtbed compare results/testbed/20260101-000000 results/testbed/20260102-000000" in text
