"""`udtbed run` end to end, as `make testbed` calls it: results JSON, run.json and an HTML
report with the papers' figures beside the measured ones, for a bulk experiment (join) and for
the friendliness experiment (its own table)."""

import html
import json
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


def test_run_writes_results_and_a_report_with_the_papers_figures(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "udtbed",
            "run",
            "--experiments",
            "join,friendliness",
            "--stacks",
            "tcp-cubic",
            "--duration",
            "3",
            "--influx",
            "none",
            "--calibration",
            "flag",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "report: " in p.stdout, p.stdout
    run_dir = tmp_path / "latest"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "ok" and meta["backend"] in ("linkem", "netem") and meta["scale"] == 0.1, meta
    assert set(meta["results"]) == {"join", "friendliness"}, meta

    join = json.loads((run_dir / meta["results"]["join"]).read_text())
    part = join["parts"][0]
    assert part["calibration"] and all(c["rtt_ms"] for c in part["calibration"]), part["calibration"]
    flows = part["stacks"]["tcp-cubic"]["flows"]
    assert [f["name"] for f in flows] == ["a-c", "b-c"] and sum(f["bytes"] for f in flows) > 0, flows

    fr = json.loads((run_dir / meta["results"]["friendliness"]).read_text())
    points = fr["parts"][0]["stacks"]["tcp-cubic"]["points"]
    assert [pt["bulk_flows"] for pt in points] == [0, 1, 5, 10], points
    assert points[0]["short_aggregate_mbps"] > 0, points

    text = html.unescape(re.sub(r"<[^>]+>", "|", (run_dir / "report.html").read_text()))
    page = (run_dir / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 2, "one plot per part"
    # The paper's join figure x scale beside ours, and the friendliness table's paper row.
    assert "|70.0|" in text, "paper UDT join 700 Mb/s x 0.1"
    assert "69 (1.00)" in text and "48 (0.70)" in text
    assert f"{points[0]['short_aggregate_mbps']:.1f} (1.00)" in text
    # Calibration rows are in the report, marked.
    assert "a→c" in text and ("|ok|" in text or "|OFF|" in text)
