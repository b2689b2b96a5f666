"""`udtbed run` end to end, as `make testbed` calls it: results JSON, run.json and an HTML
report that answers "did it reproduce?" first, for a bulk experiment (join), for the
friendliness experiment (its own table), and for an experiment added by a data file alone."""

import html
import json
import re
import subprocess
import sys

import pytest
from conftest import udtbed_run_argv
from udtbed.results import ExperimentResult

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


def udtbed_run(tmp_path, *args):
    argv = udtbed_run_argv(tmp_path / "results", "--calibration", "flag", *args)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "report: " in p.stdout, p.stdout
    run_dir = tmp_path / "results" / "latest"
    return p, run_dir, json.loads((run_dir / "run.json").read_text())


def page_text(run_dir):
    return html.unescape(re.sub(r"<[^>]+>", "|", (run_dir / "report.html").read_text()))


def test_run_writes_results_and_a_report_with_the_papers_figures(tmp_path):
    _, run_dir, meta = udtbed_run(
        tmp_path, "--experiments", "join,friendliness", "--stacks", "tcp-cubic", "--duration", "3"
    )
    assert meta["status"] == "ok" and meta["backend"] in ("linkem", "netem") and meta["scale"] == 0.1, meta
    assert set(meta["results"]) == {"join", "friendliness"}, meta

    join = ExperimentResult.read(run_dir / meta["results"]["join"])
    part = join.parts[0]
    assert part.calibration and all(c["rtt_ms"] for c in part.calibration), part.calibration
    res = part.stacks["tcp-cubic"]
    assert [f.name for f in res.flows] == ["a-c", "b-c"] and sum(f.bytes for f in res.flows) > 0, res.flows
    assert res.protocol == "tcp" and res.verdicts == []  # UDT's bands do not judge TCP

    fr = ExperimentResult.read(run_dir / meta["results"]["friendliness"])
    points = fr.parts[0].stacks["tcp-cubic"].points
    assert [pt.bulk_flows for pt in points] == [0, 1, 5, 10], points
    assert points[0].short_aggregate_mbps > 0, points

    text = page_text(run_dir)
    page = (run_dir / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 2, "one plot per part"
    assert page.index("Did it reproduce?") < page.index("<h2>Streaming join"), "the summary comes first"
    # The paper's join figure x scale beside ours, and the friendliness table's paper row.
    assert "UDT 700 × 0.1 = 70.0" in text and "|70.0|" in text, "paper UDT join 700 Mb/s x 0.1"
    assert "69 (1.00)" in text and "48 (0.70)" in text
    assert f"{points[0].short_aggregate_mbps:.1f} (1.00)" in text
    # Calibration rows are in the report, marked.
    assert "a→c" in text and ("|ok|" in text or "|OFF|" in text)


NEW_EXPERIMENT = """
name = "newcomer"
title = "A newcomer's experiment: one TCP flow across the local path"
figure = "none (a data-only test)"
[[part]]
label = "lan"
topology = "chicago-local"
flows = [{ name = "only", src = "chicago", dst = "local" }]
paper = { tcp = { only = 900 } }
[[part.band]]
protocol = "tcp"
metric = "mean_mbps"
flow = "only"
min = 0.5
of = "capacity"
paper = "half the link at least"
why = "kernel TCP fills an idle 100 Mb/s LAN"
[[part.band]]
protocol = "tcp"
metric = "jain_index"
min = 0.99
paper = "no second flow: nothing to measure"
why = "one flow has no Jain's index, so this band reads 'not measured'"
"""


def test_an_experiment_added_by_a_data_file_alone_runs_to_a_result_and_a_report_row(tmp_path):
    exps = tmp_path / "experiments"
    exps.mkdir()
    (exps / "newcomer.toml").write_text(NEW_EXPERIMENT)
    listed = subprocess.run(
        [sys.executable, "-m", "udtbed", "list", "--experiments-dir", str(exps)], capture_output=True, text=True
    )
    assert listed.returncode == 0 and "newcomer" in listed.stdout, listed.stdout + listed.stderr
    p, run_dir, meta = udtbed_run(
        tmp_path,
        "--experiments-dir",
        str(exps),
        "--experiments",
        "newcomer",
        "--stacks",
        "tcp-cubic",
        "--duration",
        "4",
    )
    res = ExperimentResult.read(run_dir / meta["results"]["newcomer"])
    stack = res.parts[0].stacks["tcp-cubic"]
    assert stack.flows[0].mean_mbps > 0, stack.flows
    assert [v.ok for v in stack.verdicts] == [True, None], stack.verdicts
    assert "✓ mean_mbps(only) >= 0.5 x capacity" in p.stdout, p.stdout  # the verdict is logged as it comes
    text = page_text(run_dir)
    cells = re.sub(r"\|+", "|", text)  # one | between cells
    assert "|mean_mbps(only) >= 0.5 x capacity|half the link at least|≥ 50|" in cells, cells[:3000]
    assert "|bands met|1 / 2|" in cells, cells[:3000]
    assert "TCP 900 × 0.1 = 90.0" in text
