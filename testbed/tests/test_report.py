"""`udtbed run` end to end, as `make testbed` calls it: results JSON, run.json and an HTML
report that answers "did it reproduce?" first, for a bulk experiment (join), for the
friendliness experiment (its own table), and for an experiment added by a data file alone.
Then the report's simulated figures (udtbed.simulation.sim's JSON and PNG in <run dir>/sim), without a run."""

import base64
import dataclasses
import html
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np  # a dependency of matplotlib
import pytest
from conftest import part_of_repeats, udtbed_run_argv
from udtbed.emulation import capture
from udtbed.emulation.hostwatch import HostReport, SenderPacing
from udtbed.results import report, screenshot
from udtbed.results.report import parts, plots, render
from udtbed.results.results import (
    ExperimentResult,
    FlowResult,
    PartResult,
    Reading,
    ShortTcpPoint,
    StackResult,
    SweepPoint,
    Verdict,
)
from udtbed.simulation import sim


def udtbed_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, dict[str, Any]]:
    argv = udtbed_run_argv(tmp_path / "results", "--calibration", "flag", *args)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "report: " in p.stdout, p.stdout
    run_dir = tmp_path / "results" / "latest"
    return p, run_dir, json.loads((run_dir / "run.json").read_text())


def page_text(run_dir: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "|", (run_dir / "report.html").read_text()))


@pytest.mark.needs_root
@pytest.mark.slow
def test_run_writes_results_and_a_report_with_the_papers_figures(tmp_path: Path) -> None:
    # One small simulated figure rides along, as make testbed runs them all after the experiments.
    scenarios = tmp_path / "sim"
    scenarios.mkdir()
    shutil.copy(sim.SCENARIOS_DIR / "sc04-fig7.toml", scenarios)
    _, run_dir, meta = udtbed_run(
        tmp_path,
        "--experiments",
        "join,friendliness",
        "--stacks",
        "tcp-cubic",
        "--duration",
        "3",
        "--simulate",
        "quick",
        "--scenarios-dir",
        str(scenarios),
    )
    assert meta["status"] == "ok" and meta["backend"] in ("linkem", "netem") and meta["scale"] == 0.1, meta
    assert set(meta["results"]) == {"join", "friendliness"}, meta

    join = ExperimentResult.read(run_dir / meta["results"]["join"])
    part = join.parts[0]
    assert part.calibration and all(c["rtt_ms"] for c in part.calibration), part.calibration
    res = part.stacks["tcp-cubic"]
    assert [f.name for f in res.flows] == ["a-c", "b-c"] and sum(f.bytes for f in res.flows) > 0, res.flows
    assert res.protocol == "tcp" and res.verdicts == []  # UDT's bands do not judge TCP
    # The part's core plan: recorded, not enforced nor pinned at scale 0.1 (udtbed.emulation.cores).
    assert part.cores is not None and (part.cores["need"], part.cores["checked"], part.cores["pinned"]) == (
        8,
        False,
        None,
    )

    fr = ExperimentResult.read(run_dir / meta["results"]["friendliness"])
    points = fr.parts[0].stacks["tcp-cubic"].points
    assert [pt.bulk_flows for pt in points] == [0, 1, 5, 10], points
    assert fr.parts[0].stacks["tcp-cubic"].short_tcp_cc == "reno", "Fig. 13's short flows run the 2004 TCP"
    assert points[0].short_aggregate_mbps > 0, points

    text = page_text(run_dir)
    page = (run_dir / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 2, "one plot per part"
    assert page.index("Did it reproduce?") < page.index("<h2>Streaming join"), "the summary comes first"
    # The paper's join figure x scale beside ours, and the friendliness table's paper row.
    assert "UDT 700 × 0.1 = 70.0" in text and "|70.0|" in text, "paper UDT join 700 Mb/s x 0.1"
    assert "69 (1.00)" in text and "48 (0.70)" in text
    assert f"{points[0].short_aggregate_mbps:.1f} (1.00)" in text
    assert "at a time, TCP reno)" in text
    # Calibration rows are in the report, marked.
    assert "a→c" in text and ("|ok|" in text or "|OFF|" in text)
    assert "cores: 8 needed (udt-linkem 3, 2 flows × (sender, receiver) 4, runner 1), the run had" in text
    # What the host was (udtbed.emulation.hostinfo) and that every interface built had its offloads off.
    host = meta["host"]
    assert host["kernel"].startswith("Linux ") and host["sysctls"]["net.core.rmem_max"].isdigit(), host
    assert host["tools"]["iperf3"].startswith("iperf 3"), host["tools"]
    assert join.run["host"] == host, "each experiment's result carries the host"
    assert part.offloads and all(c == {"off": c.get("off", 0)} for c in part.offloads.values()), part.offloads
    assert "generic-receive-offload, tx-udp-segmentation off on all" in text
    assert f"The host: {host['cpu_model']}" in text
    # The simulated figure: its JSON and plot in the run's sim/, its section in the report.
    assert (run_dir / "sim" / "sc04-fig7.json").exists() and (run_dir / "sim" / "sc04-fig7.png").exists()
    assert meta["sim_claims_not_reproduced"] == 0, "the quick version judges no claim of Fig. 7"
    assert "Simulated figures" in text and "SC'04 Fig. 7" in text
    # Beside them, the NS-2 check's quick points for each TCP profile (where NS-2 is installed).
    if shutil.which("ns"):
        assert "The simulator's TCP against NS-2 (ns2-check)" in text, text
        assert "The simulator's TCP against NS-2 (ns2-check-ns2-2.26)" in text, text
    else:
        assert not (run_dir / "sim" / "ns2-check").exists()

    # `udtbed report` draws the same page again from the results alone (a run on a host
    # without matplotlib, the full-scale bundle's, is drawn so).
    (run_dir / "report.html").unlink()
    p = subprocess.run([sys.executable, "-m", "udtbed", "report", str(run_dir)], capture_output=True, text=True)
    assert p.returncode == 0 and "report: " in p.stdout, p.stdout + p.stderr
    assert page_text(run_dir) == text


def test_the_report_command_wants_a_run_directory(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "udtbed", "report", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "is not a run directory (no run.json)" in p.stderr, p.stderr


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


@pytest.mark.needs_root
@pytest.mark.slow
def test_an_experiment_added_by_a_data_file_alone_runs_to_a_result_and_a_report_row(tmp_path: Path) -> None:
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


# --- the simulated figures ----------------------------------------------------------------------

META = {"run_id": "sim-test"}


def write_simulated(sim_dir: Path) -> tuple[Path, Path]:
    """One scenario's JSON and PNG as udtbed.simulation.sim writes them, from made-up values (no simulator):
    one claim held, one missed, one not judged (no value at its x)."""
    sc = sim.Scenario(
        name="fig-x",
        path=sim_dir / "fig-x.toml",
        figure="Fig. X",
        title="Fairness <of> two",
        setup="two flows on a 100 Mb/s link",
        claim="UDT is fair & fairer than TCP",
        metric="jain",
        x="rtt_ms",
        values=(1.0, 100.0),
        duration_s=10.0,
        seed=7,
        sample_s=1.0,
        warmup_s=0.0,
        bottleneck={"rate_mbps": 100},
        series=(sim.Series("UDT", ()), sim.Series("TCP", ())),
        checks=(
            sim.Check("UDT is fair", "UDT", "jain", min=0.9),
            sim.Check("UDT is fairer than TCP", "UDT", "jain", above="TCP"),
            sim.Check("fair at 1 s RTT too", "UDT", "jain", at=(1000.0,), min=0.9),
        ),
        quick_values=(1.0,),
        quick_duration_s=1.0,
        quick_warmup_s=0.0,
        note="The RTTs are assumed.",
    )
    jain = {("UDT", 1.0): 0.99, ("UDT", 100.0): 0.95, ("TCP", 1.0): 0.9, ("TCP", 100.0): 0.97}
    points = [
        sim.Point(series, x, [], [{"wall_s": 0.5, "speed": 20.0}], {"aggregate_mbps": 90.0, "jain": j})
        for (series, x), j in jain.items()
    ]
    checks = sim.judge(sc, points, quick=False)
    assert [c.ok for c in checks] == [True, False, None], checks
    sim.write(sc, points, checks, sim_dir, quick=False)
    return sim_dir / "fig-x.json", sim_dir / "fig-x.png"


def cells(page: str) -> str:
    return re.sub(r"\|+", "|", html.unescape(re.sub(r"<[^>]+>", "|", page)))


def test_the_report_shows_the_simulated_figures_with_their_claims_and_plots(tmp_path: Path) -> None:
    _, png = write_simulated(tmp_path / "sim")
    page = report.render(META, [], tmp_path / "sim")
    text = cells(page)
    assert "Simulated figures (NS-2 scenarios, |make simulate|)" in text, text
    assert "Fig. X: Fairness &lt;of&gt; two" in page, "escaped"
    assert "|Fig. X: Fairness <of> two|" in text and "UDT is fair & fairer than TCP" in text
    assert "two flows on a 100 Mb/s link" in text and "The RTTs are assumed." in text
    # Every claim with its mark and the values it was judged on.
    assert "|UDT is fair|UDT|jain|✓|1: 0.99, 100: 0.95|" in text, text
    assert "|UDT is fairer than TCP|UDT|jain|✕|x=100: 0.95 not above TCP's 0.97|" in text, text
    assert "|fair at 1 s RTT too|UDT|jain|–|" in text, text
    # The summary: the figure and its claims reproduced, before the section, linking to it.
    assert "|Fig. X|Fairness <of> two|1 / 2 (1 not judged)|" in text, text
    assert page.index("1 / 2 (1 not judged)") < page.index("<h2 id='sim'>")
    assert "href='#sim--fig-x'" in page and "id='sim--fig-x'" in page
    # The metric per series and x, with the wall time, and the plot inline.
    assert "|series|rtt_ms|jain|wall s|UDT|1|0.99|0.5|UDT|100|0.95|0.5|TCP|1|0.9|0.5|" in text, text
    assert f"data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}" in page


def test_the_report_says_where_in_a_sweep_the_papers_figure_falls(tmp_path: Path) -> None:
    json_path, _ = write_simulated(tmp_path / "sim")
    d = json.loads(json_path.read_text())
    d["paper"] = {"key": "jain", "label": "the paper: 0.96", "value": 0.96, "min": None, "max": None}
    d["paper"]["where"] = {"UDT": "the paper: 0.96 lies between rtt_ms = 1 (0.99) and 100 (0.95) [1: 0.99, 100: 0.95]"}
    json_path.write_text(json.dumps(d))
    text = cells(report.render(META, [], tmp_path / "sim"))
    assert "Where the paper's figure falls in the sweep| (jain; the setup leaves this parameter open):" in text, text
    assert "|UDT: the paper: 0.96 lies between rtt_ms = 1 (0.99) and 100 (0.95) [1: 0.99, 100: 0.95]|" in text, text


def _ns2_check(name: str, ratio: float, verdict: str) -> dict[str, object]:
    side = {"per_flow_mean_mbps": 47.5, "per_flow_sd_mbps": 0.4, "drops": 120.0}
    return {
        "scenario": {"name": name},
        "ratio": ratio,
        "stderr_ratio": 0.004,
        "verdict": verdict,
        "ours": {**side, "per_flow_mean_mbps": 47.5 * ratio},
        "ns2": side,
    }


def test_the_report_shows_the_simulators_tcp_against_ns2_beside_the_figures(tmp_path: Path) -> None:
    write_simulated(tmp_path / "sim")
    check = tmp_path / "sim" / "ns2-check-ns2-2.26"
    check.mkdir()
    doc = {
        "command": "python -m udtbed ns2-check --quick --seeds 3 --profile ns2-2.26",
        "seeds": 3,
        "tolerance": 0.05,
        "scenarios": [_ns2_check("2f-10ms-100M-q10", 1.004, "agree"), _ns2_check("1f-1ms-1G-q83", 1.08, "disagree")],
    }
    (check / "ns2-check.json").write_text(json.dumps(doc))
    (tmp_path / "sim" / "ns2-check").mkdir()
    (tmp_path / "sim" / "ns2-check" / "ns2-check.json").write_text('{"scenarios": [')
    page = report.render(META, [], tmp_path / "sim")
    text = cells(page)
    assert "The simulator's TCP against NS-2 (ns2-check-ns2-2.26)" in text, text
    assert "1 agree, 1 disagree." in text, text
    assert "|2f-10ms-100M-q10|47.69 ± 0.40|47.50 ± 0.40|1.004 ± 0.004|120 / 120|✓|" in text, text
    assert "|1f-1ms-1G-q83|51.30 ± 0.40|47.50 ± 0.40|1.080 ± 0.004|120 / 120|✕|" in text, text
    assert "ns2-check.json left out: not an NS-2 check" in text, "an unreadable one is a note"
    assert page.index("Fig. X: Fairness") < page.index("The simulator's TCP against NS-2")


def test_a_simulated_result_that_cannot_be_read_is_a_note_and_the_rest_is_shown(tmp_path: Path) -> None:
    sim_dir = tmp_path / "sim"
    _, png = write_simulated(sim_dir)
    (sim_dir / "broken.json").write_text('{"figure": "Fig. 9", ')
    (sim_dir / "shapeless.json").write_text(json.dumps({"figure": "Fig. 8", "points": 3}))
    (sim_dir / "list.json").write_text("[1, 2]")
    page = report.render(META, [], sim_dir)
    text = cells(page)
    for name in ("broken.json", "shapeless.json", "list.json"):
        assert f"{name} left out: not a simulated result" in text, text
        assert f"|{name}|unreadable: left out|" in text, text
    assert "'title' missing or not a str" in text, text
    assert "|UDT is fair|UDT|jain|✓|" in text and base64.b64encode(png.read_bytes()).decode() in page
    # A scenario without its plot: a note in the plot's place.
    png.unlink()
    assert "no plot (fig-x.png missing)" in cells(report.render(META, [], sim_dir))


def test_no_simulated_results_no_section(tmp_path: Path) -> None:
    assert "Simulated figures" not in report.render(META, [])
    (tmp_path / "run.json").write_text(json.dumps(META))
    assert "Simulated figures" not in report.write_report(tmp_path).read_text(), "no <run dir>/sim"
    write_simulated(tmp_path / "sim")
    page = report.write_report(tmp_path).read_text()
    assert "Simulated figures (NS-2 scenarios" in page and "|UDT is fair|UDT|jain|✓|" in cells(page)


@pytest.mark.needs_root
@pytest.mark.slow
def test_repeats_interleave_the_stacks_and_the_report_judges_bands_on_their_intervals(tmp_path: Path) -> None:
    p, run_dir, meta = udtbed_run(
        tmp_path,
        "--experiments",
        "efficiency",
        "--parts",
        "chicago-local",
        "--stacks",
        "udt-rs,libudt",
        "--duration",
        "3",
        "--repeat",
        "2",
    )
    assert meta["repeat"] == 2 and "repeats after the first start their flows" in meta["seed"], meta
    # A B A B: each repeat runs every stack before the next repeat starts.
    order = re.findall(r"-- (udt-rs|libudt) \(repeat (\d) of 2\)", p.stdout)
    assert order == [("udt-rs", "1"), ("libudt", "1"), ("udt-rs", "2"), ("libudt", "2")], p.stdout
    part = ExperimentResult.read(run_dir / meta["results"]["efficiency"]).parts[0]
    (second,) = part.more_repeats
    assert [r.repeat for r in part.stacks.values()] == [0, 0] and [r.repeat for r in second.values()] == [1, 1]
    assert all(r.start_jitter_s == 0 for r in part.stacks.values())
    assert all(0 < r.start_jitter_s <= 0.5 for r in second.values()), "repeats after the first start late"
    # Each repeat's raw files apart.
    raw = run_dir / "raw" / "efficiency" / "chicago-local"
    assert (raw / "udt-rs-bulk-local.stats").exists() and (raw / "repeat-2" / "udt-rs-bulk-local.stats").exists()
    text = page_text(run_dir)
    # "each" when every band had both repeats; "up to" when a 3-s run reached 90 % of the link
    # in one repeat only, so that band stood on one run (CI saw both).
    assert re.search(r"Bands judged over (up to )?2 repeats", text), text[:2000]
    assert re.search(r"udt-rs\|: \d+ met, \d+ missed, \d+ inconclusive", text), text[:2000]
    assert "n = 2" in text
    # Read at a glance: with seven stacks the summary still fits a 1280-px window.
    try:
        screenshot.find_chromium()
    except screenshot.ScreenshotError as e:
        pytest.skip(str(e))
    results = [ExperimentResult.read(run_dir / f) for f in meta["results"].values()]
    for rep in (r for e in results for p in e.parts for r in p.repeats()):
        for name in ("tcp-cubic", "tcp-reno", "tcp-bbr", "udt-rs@read", "sabul"):
            rep[name] = dataclasses.replace(rep["udt-rs"], stack=name)
    wide = tmp_path / "wide.html"
    wide.write_text(render(meta, results) + "<script>document.title = document.documentElement.scrollWidth</script>")
    width = re.search(r"<title>(\d+)</title>", screenshot.rendered_dom(wide.as_uri(), width=1280))
    assert width and int(width.group(1)) <= 1280, width


@pytest.mark.needs_root
def test_a_stack_left_out_of_the_repeats_runs_once_and_its_cells_say_no_interval(tmp_path: Path) -> None:
    p, run_dir, meta = udtbed_run(
        tmp_path,
        "--experiments",
        "efficiency",
        "--parts",
        "chicago-local",
        "--stacks",
        "udt-rs,libudt",
        "--duration",
        "3",
        "--repeat",
        "2",
        "--repeat-only",
        "udt-rs",
    )
    assert meta["repeat_only"] == ["udt-rs"], meta
    order = re.findall(r"-- (udt-rs|libudt)( \(repeat (\d) of 2\))?:", p.stdout)
    assert [(s, k) for s, _, k in order] == [("udt-rs", "1"), ("libudt", ""), ("udt-rs", "2")], p.stdout
    part = ExperimentResult.read(run_dir / meta["results"]["efficiency"]).parts[0]
    (second,) = part.more_repeats
    assert list(part.stacks) == ["udt-rs", "libudt"] and list(second) == ["udt-rs"]
    text = page_text(run_dir)
    assert "over up to 2 repeats where the run repeated a stack (udt-rs;" in text, text[:3000]
    assert "one run: no interval" in text, "libudt's cells, judged on one run"


def _bulk_part(goodputs: list[float], exact: Sequence[bool] = (True, True, True)) -> PartResult:
    """A one-flow part of udt-rs run once per entry of ``goodputs`` (its steady Mb/s)."""
    from udtbed.results.results import FlowResult

    def rep(k: int, mbps: float, ok: bool) -> dict[str, StackResult]:
        flow = FlowResult(
            name="f",
            src="a",
            dst="b",
            start_s=0.0,
            series_1s=[(float(t), mbps + t) for t in range(1, 6)],
            series_raw=[],
            mean_mbps=mbps,
            bytes=1,
            exact=ok,
            pkts_sent=1000,
            retrans=10,
            time_to_90pct_s=None if k == 1 else 2.0 + k,
        )
        return {"udt-rs": StackResult(stack="udt-rs", protocol="udt", flows=[flow], repeat=k, start_jitter_s=0.1 * k)}

    runs = [rep(k, m, ok) for k, (m, ok) in enumerate(zip(goodputs, exact, strict=True))]
    return part_of_repeats(runs)


def test_a_part_run_several_times_shows_each_figure_with_its_interval_and_the_seeds() -> None:
    part = _bulk_part([90.0, 94.0, 92.0], exact=(True, False, True))
    page = html.unescape(re.sub(r"<[^>]+>", "|", parts._part_bulk(part, 1.0) + parts._flow_details(part)))
    half = 4.303 * 2 / 3**0.5
    assert f"92.0 |[{92 - half:.1f}, {92 + half:.1f}]" in page, page
    assert "time to 90 % of the bottleneck (paper: 7.5 s): udt-rs/f 3.0 |[" in page, page
    assert "(not reached in 1 of 3)" in page, "the repeat that never reached 90 % is counted, not dropped"
    assert "|NO in 1 of 3|" in page, "one corrupted repeat makes the flow not exact"
    note = parts._repeats_note(part)
    assert "3 repeats" in note and "1: udt-rs +0 s; 2: udt-rs +0.1 s; 3: udt-rs +0.2 s" in note, note
    assert parts._repeats_note(_bulk_part([90.0], exact=(True,))) == "", "one run: nothing to say"


def test_a_plot_over_repeats_draws_the_mean_with_its_95_percent_band() -> None:
    import matplotlib.pyplot as plt
    from udtbed.results import repeats

    part = _bulk_part([90.0, 94.0, 92.0])
    fig, ax = plt.subplots()
    plots.series(ax, repeats.runs(part, "udt-rs"), "f", "udt-rs")
    (line,) = ax.get_lines()
    # Matplotlib types the data as any array-like and the label as any object: read them as they are.
    ydata, label = np.asarray(line.get_ydata()), str(line.get_label())
    assert list(ydata) == [93.0, 94.0, 95.0, 96.0, 97.0] and "mean of 3, 95 % band" in label
    (band,) = ax.collections
    ys = np.asarray(band.get_paths()[0].vertices)[:, 1]
    half = 4.303 * 2 / 3**0.5
    assert min(ys) == pytest.approx(93.0 - half, rel=1e-3) and max(ys) == pytest.approx(97.0 + half, rel=1e-3)
    plt.close(fig)
    # One run: its own line and no band.
    fig, ax = plt.subplots()
    plots.series(ax, repeats.runs(_bulk_part([90.0], exact=(True,)), "udt-rs"), "f", "udt-rs")
    assert len(ax.get_lines()) == 1 and not ax.collections
    plt.close(fig)


def test_a_sweep_and_the_short_flows_over_repeats_show_intervals_in_their_tables() -> None:
    from udtbed.results.results import ShortTcpPoint, SweepPoint

    part = _bulk_part([90.0, 94.0, 92.0])
    for k, rep in enumerate(part.repeats()):
        res = rep["udt-rs"]
        res.sweep = [
            SweepPoint(value=v, flows=[dataclasses.replace(res.flows[0], mean_mbps=v / 10 + k)]) for v in (100.0, 200.0)
        ]
    part.sweep = {"option": "rate", "paper": []}
    page = html.unescape(re.sub(r"<[^>]+>", "|", parts._part_sweep(part, 1.0)))
    assert "|200||200||21.0 |[18.5, 23.5]|" in page, page

    for k, rep in enumerate(part.repeats()):
        rep["udt-rs"].sweep = []
        rep["udt-rs"].points = [
            ShortTcpPoint(
                bulk_flows=n, short_aggregate_mbps=y + k, short_flows=10, bulk_mean_mbps=[], bulk_series_1s={}
            )
            for n, y in ((0, 60.0), (1, 30.0))
        ]
    page = html.unescape(re.sub(r"<[^>]+>", "|", parts._part_short_tcp(part)))
    assert "|31.0 |[28.5, 33.5]| (0.51 |[0.49, 0.53]|)|" in page, page


# --- a run of every part kind: the report's sections and the summary's keys, pinned -----------------


def _flow(name: str, mbps: float, **more: Any) -> FlowResult:
    series = [(float(t), mbps + t % 3 - 1) for t in range(1, 9)]
    return FlowResult(name, "a", "c", 0.0, series, [], mbps, int(mbps * 1e6), **more)


def _verdict(band: str, value: float | None, low: float, ref: float | None = None) -> Verdict:
    """A band judged on one run; ``ref``: the reference stack's (libudt's) value beside it."""
    ok = None if value is None else value >= low
    reading: Reading | None = None if ok is None else "PASS" if ok else "FAIL"
    why = f"why {band} is where it is"
    ref_stack = "" if ref is None else "libudt"
    return Verdict("mean_mbps", band, "the paper's figure", why, value, low, None, ok, "", reading, ref_stack, ref)


def _host_report(flagged: bool = False) -> HostReport:
    """A host watch's report with a sender's pacing; ``flagged``: a busy process beside the run."""
    pacing: SenderPacing = {
        "min_period_us": 120.0,
        "bottleneck_packet_us": 120.0,
        "times_bottleneck": 1.0,
        "capacity_times_bottleneck": 1.12,
        "capacity_median_pps": 8600,
    }
    return {
        "seconds": 8.0,
        "cores": 4,
        "machine_busy_pct": 40.0,
        "outside_cpu_pct": 1.0,
        "loadavg_1m": [0.5, 1.0],
        "cpu_by_process": {},
        "processes": [],
        "emulators": {},
        "sender_pacing": {"a-c": pacing},
        "flags": ["1 process(es) outside this run took more than 25 % of a core: indexer"] if flagged else [],
        "outside_processes": [{"pid": 4242, "comm": "indexer", "cpu_pct": 60.0}] if flagged else [],
    }


def _calibration(src: str, rtt: float, rate: float, ok: bool) -> dict[str, Any]:
    return {
        "src": src,
        "dst": "c",
        "expected_rtt_ms": 110.0,
        "rtt_ms": rtt,
        "expected_rate_mbps": 100.0,
        "rate_mbps": rate,
        "ok": ok,
    }


def _part(label: str, paper: dict[str, dict[str, float]], **more: Any) -> PartResult:
    return PartResult(label, "t", "t.toml", f"{label}'s path", {}, [], True, paper, **more)


def _efficiency() -> ExperimentResult:
    """One flow over three repeats: a band both stacks meet, one udt-rs alone misses, one both miss."""
    bands = {"mean_mbps(local) >= 0.80 x capacity": 80.0, "mean_mbps(local) >= 0.88 x capacity": 88.0}
    bands["mean_mbps(local) >= 0.95 x capacity"] = 95.0
    reps = []
    for k in range(3):
        ours, ref = 86.0 + k / 2, 90.0 + k / 2
        reps.append(
            {
                stack: StackResult(
                    stack,
                    "udt",
                    flows=[_flow("local", v, time_to_90pct_s=3.0 + k, capacity_mbps=100.0)],
                    metrics={"aggregate_mbps": v},
                    verdicts=[_verdict(b, v, low, ref if stack == "udt-rs" else None) for b, low in bands.items()],
                    repeat=k,
                    start_jitter_s=0.1 * k,
                )
                for stack, v in (("udt-rs", ours), ("libudt", ref))
            }
        )
    part = _part(
        "chicago-local",
        {"udt": {"local": 940.0}, "tcp": {"local": 500.0}},
        stacks=reps[0],
        more_repeats=reps[1:],
        cores={"need": 8, "seats": "udt-linkem 3, 2 ends 4, runner 1", "have": 16, "pinned": {"sender": 2}},
        offloads={"generic-receive-offload": {"off": 6}},
    )
    part.calibration = [_calibration("a", 110.4, 97.2, True)]
    exp = ExperimentResult("efficiency", "Efficiency", "SC'04 Fig. 11", "One flow.", 0.1, 8.0, 2.0, "linkem")
    exp.parts.append(part)
    return exp


def _join() -> ExperimentResult:
    """Three flows run once, one of a TCP stack beside the stack under test; libudt's run flagged,
    calibration off, too few cores, an offload left on, a capture with the data's spacing."""
    gaps = capture.ipt_stats([k * 0.0002 + (k % 7) * 1e-6 for k in range(8000)])
    ifaces = {
        "a/data": {"udp_data": 800, "udp_other": 12, "tcp": 0},
        "a/ctl": {"udp_data": 0, "udp_other": 0, "tcp": 40},
    }
    cap = {"interfaces": ifaces, "separated": True, "udp_on_control": 0, "tcp_on_data": 0, "ipt": {"a-c": gaps}}
    stacks = {}
    for stack, d in (("udt-rs", 0.0), ("libudt", 1.5)):
        flows = [
            _flow("a-c", 31.0 + d, pkts_sent=10000, retrans=20, rate_mbps=40.0, exact=True, cpu_send_pct=20.0),
            _flow("b-c", 29.0 - d, pkts_sent=10000, retrans=10, exact=d == 0, rcvbuf_drops=3, cpu_recv_pct=15.0),
            _flow("tcp", 9.0, stack="tcp-cubic", protocol="tcp"),
        ]
        stacks[stack] = StackResult(
            stack,
            "udt",
            flows=flows,
            metrics={"aggregate_mbps": 69.0, "jain_index": 0.99, "stability_index": 0.05, "join_mbps": 58.0 + d},
            host=_host_report(flagged=d > 0),
            verdicts=[_verdict("join_mbps >= 0.8 x paper", 58.0 + d, 56.0), _verdict("jain_index >= 0.99", None, 0.99)],
            capture=cap if d == 0 else None,
        )
    part = _part(
        "join-3",
        {"udt": {"a-c": 300.0, "b-c": 300.0, "join": 700.0}, "tcp": {"tcp": 100.0}},
        stacks=stacks,
        cores={"need": 12, "seats": "flows 8, runner 1", "have": 4, "pinned": None, "ok": False},
        offloads={"generic-receive-offload": {"off": 4, "on": 2}},
    )
    part.calibration = [_calibration("a", 110.4, 97.2, True), _calibration("b", 131.0, 61.0, False)]
    part.calibration_ok = False
    exp = ExperimentResult("join", "Streaming join", "SC'04 Fig. 9", "Three flows.", 0.1, 8.0, 2.0, "linkem")
    exp.parts.append(part)
    return exp


def _sweep() -> ExperimentResult:
    def swept(stack: str, gain: float) -> StackResult:
        points = [
            SweepPoint(v, [_flow("f", v * 0.1 * gain, pkts_sent=10000, retrans=int(v / 100), losses_recv=3)])
            for v in (100.0, 500.0, 900.0)
        ]
        return StackResult(stack, "sabul", flows=[_flow("f", 10.0)], sweep=points)

    paper = [{"value": 100.0, "mbps": 95.0, "loss_pct": 0.0}, {"value": 900.0, "mbps": 850.0}]
    part = _part("rate", {}, stacks={"frtp": swept("frtp", 0.95), "sabul": swept("sabul", 0.9)})
    part.sweep = {"option": "rate", "values": [100, 500, 900], "paper": paper}
    exp = ExperimentResult("frtp-rate", "FRTP at a fixed rate", "FRTP Fig. 4", "A sweep.", 0.1, 8.0, 2.0, "linkem")
    exp.parts.append(part)
    return exp


def _short_tcp() -> ExperimentResult:
    def short(stack: str, drop: float) -> StackResult:
        points = [ShortTcpPoint(n, 6.9 - drop * n, 10, [30.0] * n, {}, host=_host_report()) for n in (0, 1, 10)]
        return StackResult(stack, "udt", points=points, short_tcp_workers=4, short_tcp_cc="reno")

    part = _part("short", {"short_tcp": {"0": 69.0, "10": 48.0}})
    part.stacks = {"udt-rs": short("udt-rs", 0.2), "libudt": short("libudt", 0.25)}
    exp = ExperimentResult("friendliness", "TCP friendliness", "SC'04 Fig. 13", "Short flows.", 0.1, 8.0, 2.0, "linkem")
    exp.parts.append(part)
    return exp


def write_run_of_every_kind(run_dir: Path) -> None:
    """A run directory as `udtbed run` leaves it, made up: a one-flow part over three repeats, a
    part of several flows run once, a sweep, the short flows, the host's facts, and the simulated
    figures (one unreadable) with an NS-2 check beside them."""
    run_dir.mkdir(parents=True)
    results = [_efficiency(), _join(), _sweep(), _short_tcp()]
    for exp in results:
        exp.write(run_dir / f"{exp.experiment}.json")
    host = {
        "kernel": "Linux 6.1.0",
        "cpu_model": "Made-up CPU @ 3 GHz",
        "cores_online": 16,
        "run_cpus": 8,
        "governors": {"performance": "0-15"},
        "clocksource": "tsc",
        "sysctls": {"net.core.rmem_max": "67108864"},
        "tools": {"iperf3": "iperf 3.12"},
        "packages": {"matplotlib": "3.6"},
        "python": "3.11.2",
    }
    meta = {
        "run_id": "20260101-000000",
        "started": "2026-01-01T00:00:00",
        "commit": "abc1234",
        "backend": "linkem",
        "backend_reason": "udt-linkem built",
        "scale": 0.1,
        "scale_reason": "2 cores",
        "duration_s": 8.0,
        "host_runtime": "netns",
        "host_image": {"name": "udtbed-stacks", "id": "sha256:0123456789abcdef0123"},
        "udt_buffers": "default",
        "status": "ok",
        "repeat": 3,
        "experiments": [e.experiment for e in results],
        "host": host,
        "results": {e.experiment: f"{e.experiment}.json" for e in results},
    }
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    write_simulated(run_dir / "sim")
    (run_dir / "sim" / "broken.json").write_text('{"figure": ')
    checks = [_ns2_check("2f-10ms-100M-q10", 1.004, "agree"), _ns2_check("1f-1ms-1G-q83", 1.08, "disagree")]
    doc = {"command": "udtbed ns2-check --quick", "seeds": 3, "tolerance": 0.05, "scenarios": checks}
    (run_dir / "sim" / "ns2-check").mkdir()
    (run_dir / "sim" / "ns2-check" / "ns2-check.json").write_text(json.dumps(doc))


# What the report of that run shows today: every heading, in order (issue 43: a change that drops
# a section fails here; one that adds a section adds its heading).
EVERY_KIND_HEADINGS = [
    "UDT testbed run 20260101-000000",
    "Did it reproduce?",
    "Simulated figures",
    "Efficiency (SC'04 Fig. 11)",
    "chicago-local: chicago-local's path",
    "Streaming join (SC'04 Fig. 9)",
    "join-3: join-3's path",
    "FRTP at a fixed rate (FRTP Fig. 4)",
    "rate: rate's path",
    "TCP friendliness (SC'04 Fig. 13)",
    "short: short's path",
    "Simulated figures (NS-2 scenarios, make simulate)",
    "Fig. X: Fairness <of> two",
    "The simulator's TCP against NS-2 (ns2-check)",
]
SUMMARY_KEYS = ["run_id", "started", "commit", "scale", "duration_s", "repeat", "backend", "status", "experiments"]
SUMMARY_KEYS += ["host", "counts", "rows"]
SUMMARY_ROW_KEYS = ["experiment", "part", "stack", "band", "mean", "low", "high", "n", "mark"]


def test_a_run_of_every_part_kind_keeps_the_reports_sections_and_the_summarys_keys(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_run_of_every_kind(run_dir)
    p = subprocess.run([sys.executable, "-m", "udtbed", "report", str(run_dir)], capture_output=True, text=True)
    assert p.returncode == 0 and "report: " in p.stdout, p.stdout + p.stderr
    page = (run_dir / "report.html").read_text()
    headings = [html.unescape(re.sub(r"<[^>]+>", "", h)) for _, h in re.findall(r"<h([1-3])[^>]*>(.*?)</h\1>", page)]
    assert headings == EVERY_KIND_HEADINGS, headings
    # A plot per part (the join's capture adds its spacing's CDF) and the simulated figure's.
    assert page.count("<img ") == 6
    text = cells(page)
    # Each part's sections, in their order.
    for before, after in (
        ("|path|RTT want ms|", "|cores: 8 needed"),
        ("|cores: 8 needed", "|offloads: generic-receive-offload off on all 6 interfaces"),
        ("|offloads: generic-receive-offload off on all 6", "|3 repeats, the stacks in turns;"),
        ("|3 repeats, the stacks in turns;", "|time to 90 % of the bottleneck"),
        (
            "|b→c|110.000|131.000|100.0|61.0|OFF|",
            "|cores: 12 needed (flows 8, runner 1), the run had 4; not pinned: too few",
        ),
        ("|offloads not off on every interface", "|Timing off, so these results are not the protocols' alone"),
        ("|Timing off", "|UDT senders' link-capacity estimates"),
        ("|UDT senders' link-capacity estimates", "|stack / flow|rate's goodput Mb/s|"),
        ("|stack / flow|rate's goodput Mb/s|", "|udt-rs|: capture on every host interface|"),
        ("|udt-rs|: capture on every host interface|", "|Paper Fig. 5: at 50 Mb/s"),
        ("|Paper Fig. 5: at 50 Mb/s", "|udt-rs: ✓ join_mbps >= 0.8 x paper"),
        ("|stack|sending rate (Mb/s, paper scale)|", "|stack: short TCP Mb/s (share of no-bulk) at bulk flows|"),
    ):
        assert before in text and after in text and text.index(before) < text.index(after), (before, after)
    # The summary reads every way a band can: met, failed, missed by 4.11 too, inconclusive, unmeasured.
    assert "|udt-rs|: 2 met, 1 missed, 0 inconclusive, 1 where 4.11 misses too, 1 not measured|" in text, text[:3000]
    assert "|(libudt 90.5) FAIL|" in text and "|(libudt 90.5) 4.11 deviation|" in text, text[:5000]
    assert "|libudt|: 2 met, 0 missed, 1 inconclusive (1 on timing the host watch flagged), 1 where" in text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary) == SUMMARY_KEYS, list(summary)
    assert list(summary["host"]) == ["cpu_model", "kernel", "cores_online"]
    assert {s: list(c) for s, c in summary["counts"].items()} == {
        s: ["met", "missed", "inconclusive", "deviation"] for s in ("udt-rs", "libudt", "frtp", "sabul")
    }
    assert len(summary["rows"]) == 10 and all(list(r) == SUMMARY_ROW_KEYS for r in summary["rows"])
