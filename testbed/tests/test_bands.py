"""Bands read against the reference stack (issue 13): every verdict of a part that ran the stack
under test and libudt (UDT 4.11) carries libudt's value on the same band and reads PASS, FAIL or
4.11 deviation; the results JSON keeps that, and the report's summary shows it. Results built in
memory: no network, no processes."""

import html
import json
import re
from pathlib import Path
from typing import cast

import pytest
from udtbed.emulation import hostwatch
from udtbed.emulation.hostwatch import HostReport
from udtbed.experiments.bands import against_reference, judge_all
from udtbed.experiments.experiment import TOPOLOGIES_DIR, Band, Flow, Part
from udtbed.results import runs_index
from udtbed.results.report import render
from udtbed.results.results import ExperimentResult, FlowResult, PartResult, StackResult, Verdict
from udtharness.stacks import reference_stacks

# One part, one flow, run by udt-rs and by libudt (the reference stack): a band with two sides and
# one the flows never meet (they never reach 90 % of the link in the 10 s run).
PART = Part(
    "local",
    TOPOLOGIES_DIR / "chicago-local.toml",
    flows=(Flow("f", "chicago", "local"),),
    bands=(
        Band("mean_mbps", "50-90 %", "two sides", flow="f", min=0.5, max=0.9, of="capacity"),
        Band("time_to_90pct_s", "7.5 s", "never reached here", flow="f", max=5),
    ),
)
SCALE, WARMUP, DURATION = 0.1, 1.0, 10.0


def result(stack: str, mbps: float) -> StackResult:
    """``stack`` at a steady ``mbps`` on a 100 Mb/s bottleneck (never 90 %: no time to 90 %)."""
    series = [(float(t), mbps) for t in range(1, 6)]
    return StackResult(stack, "udt", [FlowResult("f", "chicago", "local", 0.0, series, [], mbps, 0, 100.0)])


def judged(**mbps: float) -> dict[str, StackResult]:
    """The part's stacks judged as the runner judges them: each on its own, then read against libudt."""
    stacks = {name.replace("_", "-"): result(name.replace("_", "-"), x) for name, x in mbps.items()}
    for name, s in stacks.items():
        s.verdicts = judge_all(PART, s, SCALE, WARMUP, DURATION, reference=name == "libudt")
    against_reference(stacks, "libudt", PART, SCALE, WARMUP, DURATION)
    return stacks


def test_libudt_is_the_registry_s_reference_stack_for_udt() -> None:
    assert reference_stacks()["udt"] == "libudt"


@pytest.mark.parametrize(
    ("ours", "libudt", "reading"),
    [
        (70.0, 45.0, "PASS"),  # within the band, whatever the reference does
        (40.0, 70.0, "FAIL"),  # below the band while the reference is within it
        (40.0, 95.0, "FAIL"),  # the reference misses on the other side: no excuse for ours
        (40.0, 45.0, "4.11 deviation"),  # both below: 4.11 itself does not reach the paper
        (95.0, 92.0, "4.11 deviation"),  # both above
    ],
)
def test_a_verdict_reads_against_the_reference_stack_s_value_on_the_same_band(
    ours: float, libudt: float, reading: str
) -> None:
    stacks = judged(udt_rs=ours, libudt=libudt)
    v, late = stacks["udt-rs"].verdicts
    assert (v.value, v.ok, v.reading) == (ours, reading == "PASS", reading)
    assert (v.ref_stack, v.ref_value, v.ref_ok) == ("libudt", libudt, 50.0 <= libudt <= 90.0)
    assert v.line().endswith(f"(want 50 – 90; libudt {libudt:.3g}): {reading}"), v.line()
    # Neither flow reached 90 % in the 10 s run: both missed the 5 s bound, 4.11 as well.
    assert (late.value, late.ok, late.reading, late.ref_ok) == (None, False, "4.11 deviation", False)
    assert late.line() == "✕ time_to_90pct_s(f) <= 5: not within the 10 s run (want ≤ 5; libudt –): 4.11 deviation"
    # The reference's own verdict is PASS or, when it misses, a 4.11 deviation by definition.
    own = stacks["libudt"].verdicts[0]
    assert own.reading == ("PASS" if own.ok else "4.11 deviation") and own.ref_stack == ""


def test_a_miss_with_no_reference_in_the_run_reads_fail() -> None:
    (v, _) = judged(udt_rs=40.0)["udt-rs"].verdicts
    assert (v.ok, v.reading, v.ref_stack, v.ref_value) == (False, "FAIL", "", None)
    assert v.line().endswith("(want 50 – 90): FAIL")


def run_result() -> ExperimentResult:
    stacks = judged(udt_rs=40.0, libudt=45.0)
    part_result = PartResult("local", "chicago-local", "chicago-local.toml", "", {}, [], True, {}, stacks)
    return ExperimentResult("ref", "One flow against the reference", "test", "", SCALE, DURATION, WARMUP, "linkem",
                            [part_result])  # fmt: skip


def test_readings_and_reference_values_survive_the_results_json() -> None:
    res = run_result()
    back = ExperimentResult.from_dict(json.loads(res.to_json()))
    assert back.parts[0].stacks == res.parts[0].stacks
    v = back.parts[0].stacks["udt-rs"].verdicts[0]
    assert (v.reading, v.ref_stack, v.ref_value, v.ref_ok) == ("4.11 deviation", "libudt", 45.0, False)


def test_a_verdict_written_before_readings_still_loads_unread() -> None:
    old = {"metric": "mean_mbps", "band": "b", "paper": "p", "why": "w", "value": 40.0, "low": 50.0, "ok": False}
    v = Verdict.from_dict(old)
    assert (v.ok, v.reading, v.ref_stack, v.ref_value, v.ref_ok) == (False, None, "", None, None)
    assert v.line() == "✕ b: 40 (want ≥ 50)"


def cells(page: str) -> str:
    """The page's text with one | between cells (and between the parts of one)."""
    return re.sub(r"\s*\|[|\s]*", "|", html.unescape(re.sub(r"<[^>]+>", "|", page)))


def test_the_summary_shows_each_stack_s_reading_beside_the_reference_s_value() -> None:
    res = run_result()
    page = render({"run_id": "r1", "status": "ok", "scale": SCALE}, [res])
    summary = page[page.index("Did it reproduce?") : page.index("<h2>One flow")]
    text = cells(summary)
    row = "|mean_mbps(f) >= 0.5 x capacity and <= 0.9 x capacity|50-90 %|50 – 90|"
    # A column per stack, in the order they ran: udt-rs, then libudt.
    assert row + "40|✕|(libudt 45) 4.11 deviation|45|✕|4.11 deviation|" in text, text
    assert "<td class=dev title=" in summary  # neither passed nor failed: its own colour
    assert "|bands met|0 / 2|(2 4.11 deviation)|0 / 2|(2 4.11 deviation)|" in text, text
    # The part's verdicts in words say the same.
    details = page[page.index("<h2>One flow") :]
    assert "udt-rs: ✕ mean_mbps(f) &gt;= 0.5 x capacity and &lt;= 0.9 x capacity: 40 (want 50 – 90; libudt 45): " \
           "4.11 deviation" in details  # fmt: skip

    stacks = judged(udt_rs=40.0, libudt=70.0)
    res.parts[0].stacks = stacks
    text = cells(render({"run_id": "r1"}, [res]))
    assert row + "40|✕|(libudt 70) FAIL|70|✓|PASS|" in text, text


# The same part with udt-rs held to libudt in the same run (issue 13): goodput within 5 % (the
# quick profile's floor 0.8), 90 % no later (in make testbed only: no profile bound).
PARITY = Part(
    "local",
    TOPOLOGIES_DIR / "chicago-local.toml",
    flows=(Flow("f", "chicago", "local"),),
    bands=PART.bands
    + (
        Band("mean_mbps", "as fast as 4.11", "parity", flow="f", min=0.95, of="reference", profile_min=0.8),
        Band("time_to_90pct_s", "no later than 4.11", "parity", flow="f", max=1.0, of="reference"),
    ),
)


def parity(
    ours: float, libudt: float, t90: tuple[float | None, float | None] = (None, None), profile: bool = False
) -> dict[str, StackResult]:
    """udt-rs's verdicts on PARITY beside libudt's run; ``t90``: (ours, libudt) seconds to 90 %."""
    stacks = {"udt-rs": result("udt-rs", ours), "libudt": result("libudt", libudt)}
    for (name, s), t in zip(stacks.items(), t90, strict=True):
        s.flows[0].time_to_90pct_s = t
        s.verdicts = judge_all(PARITY, s, SCALE, WARMUP, DURATION, reference=name == "libudt")
    assert [v.relative for v in stacks["libudt"].verdicts] == [False, False]  # not judged on itself
    assert against_reference(stacks, "libudt", PARITY, SCALE, WARMUP, DURATION, profile) == [stacks["udt-rs"]]
    return stacks


@pytest.mark.parametrize(
    ("ours", "libudt", "ok"),
    [(60.0, 60.0, True), (57.0, 60.0, True), (56.9, 60.0, False), (80.0, 60.0, True)],
)
def test_a_reference_relative_band_holds_our_goodput_to_the_reference_s_in_the_same_run(
    ours: float, libudt: float, ok: bool
) -> None:
    v = parity(ours, libudt)["udt-rs"].verdicts[2]
    assert v.relative and (v.value, v.low, v.ok) == (ours, 0.95 * libudt, ok)
    assert (v.reading, v.ref_stack, v.ref_value) == ("PASS" if ok else "FAIL", "libudt", libudt)
    assert v.line().endswith(f"(want ≥ {0.95 * libudt:.3g}; libudt {libudt:.3g}): {'PASS' if ok else 'FAIL'}")


def test_the_quick_profile_judges_a_reference_relative_band_at_its_own_floor_and_skips_one_without() -> None:
    verdicts = parity(50.0, 60.0, profile=True)["udt-rs"].verdicts
    assert [v.band for v in verdicts if v.relative] == ["mean_mbps(f) >= 0.95 x reference"]  # no t90 floor
    v = verdicts[-1]
    assert (v.low, v.ok) == (0.8 * 60.0, True)  # 0.83: a loss epoch's worth behind, not a stall
    assert v.line().endswith("PASS - the quick profile's bound: >= 0.8 x reference"), v.line()


@pytest.mark.parametrize(
    ("t90", "ok"),
    [((4.0, 9.0), True), ((9.0, 9.0), True), ((10.0, 9.0), False), ((None, 9.0), False), ((4.0, None), True)],
)
def test_ninety_percent_no_later_than_the_reference_and_never_is_the_later(
    t90: tuple[float | None, float | None], ok: bool
) -> None:
    v = parity(60.0, 60.0, t90)["udt-rs"].verdicts[3]
    assert v.metric == "time_to_90pct_s" and v.relative and v.ok is ok
    neither = parity(60.0, 60.0, (None, None))["udt-rs"].verdicts[3]
    assert (neither.ok, neither.shown) == (None, "not within the 10 s run")  # neither got there: not judged
    assert "neither this stack nor the reference reached 90 %" in neither.note


def test_a_flow_that_never_reached_90_percent_misses_a_bound_the_run_outlasted_and_is_unjudged_otherwise() -> None:
    s = result("udt-rs", 60.0)
    (_, late) = judge_all(PART, s, SCALE, WARMUP, 4.0)  # a 4 s run: shorter than the 5 s bound
    assert (late.ok, late.reading, late.shown) == (None, None, "not within the 4 s run")
    assert "the run ended before the band's bound" in late.note
    (_, late) = judge_all(PART, s, SCALE, WARMUP, 5.0)
    assert (late.ok, late.reading) == (False, "FAIL")
    s.flows[0].series_1s = []  # no goodput at all: nothing to say when it would have got there
    (_, late) = judge_all(PART, s, SCALE, WARMUP, 10.0)
    assert (late.ok, late.shown) == (None, "")
    assert late.line().startswith("? time_to_90pct_s(f) <= 5: not measured")


def test_the_summary_says_not_within_the_run_for_a_flow_that_never_reached_90_percent() -> None:
    page = cells(render({"run_id": "r1", "status": "ok", "scale": SCALE}, [run_result()]))
    assert "not within the 10 s run|✕" in page, page


def test_without_the_reference_in_the_run_a_reference_relative_band_is_not_judged() -> None:
    s = result("udt-rs", 40.0)
    s.verdicts = judge_all(PARITY, s, SCALE, WARMUP, DURATION)
    assert against_reference({"udt-rs": s}, "libudt", PARITY, SCALE, WARMUP, DURATION) == []
    assert not any(v.relative for v in s.verdicts) and len(s.verdicts) == 2


def test_the_summary_shows_a_reference_relative_band_for_the_stack_beside_the_reference_only() -> None:
    stacks = parity(50.0, 60.0)
    part_result = PartResult("local", "chicago-local", "chicago-local.toml", "", {}, [], True, {}, stacks)
    res = ExperimentResult("ref", "Parity", "test", "", SCALE, DURATION, WARMUP, "linkem", [part_result])
    back = ExperimentResult.from_dict(json.loads(res.to_json()))
    assert back.parts[0].stacks["udt-rs"].verdicts[2].relative
    text = cells(render({"run_id": "r1"}, [back]))
    assert "|mean_mbps(f) >= 0.95 x reference|as fast as 4.11|≥ 57|50|✕|(libudt 60) FAIL|–|" in text, text


def test_a_short_run_leaves_out_the_papers_start_up_and_a_long_one_is_read_over_its_second_half() -> None:
    from udtbed.experiments.run import Run

    assert Run.warmup_of(20) == 8.0 and Run.warmup_of(10) == 4.0  # min(8 s, 40 %)
    assert Run.warmup_of(40) == 8.0
    assert Run.warmup_of(60) == 8.0  # the fairness profile: its band was measured over 52 s
    assert Run.warmup_of(100) == 50.0  # DURATION=100: the papers' 100 s traces, second half


def test_a_part_the_host_watch_flagged_counts_inconclusive_in_the_headline_and_keeps_its_figures(
    tmp_path: Path,
) -> None:
    # udt-rs misses both bands (40 against libudt's 70; neither reaches 90 %), but another process
    # took a core meanwhile: the machine was measured too, so neither met nor missed.
    stacks = judged(udt_rs=40.0, libudt=70.0)
    busy = {"pid": 4242, "comm": "cc1plus", "cpu_pct": 80.0}
    host = cast(HostReport, {"emulators": {}, "outside_processes": [busy]})
    host["flags"] = hostwatch.flags(host)
    stacks["udt-rs"].host = host
    part_result = PartResult("local", "chicago-local", "chicago-local.toml", "", {}, [], True, {}, stacks)
    res = ExperimentResult("ref", "One flow against the reference", "test", "", SCALE, DURATION, WARMUP, "linkem",
                           [part_result])  # fmt: skip
    res = ExperimentResult.from_dict(json.loads(res.to_json()))
    page = render({"run_id": "r1", "status": "ok", "scale": SCALE}, [res])
    text = cells(page)
    assert "|udt-rs|: 0 met, 0 missed, 2 inconclusive (2 on timing the host watch flagged)|" in text, text
    assert "|libudt|: 1 met, 0 missed, 1 where 4.11 misses too|" in text, text
    row = "|mean_mbps(f) >= 0.5 x capacity and <= 0.9 x capacity|50-90 %|50 – 90|"
    assert row + "40|~|(libudt 70) inconclusive|70|✓|PASS|" in text, text
    # The part's own section keeps the figures as measured, with the flag beside them.
    details = page[page.index("<h2>One flow") :]
    assert "Timing off" in details and "cc1plus (pid 4242) 80 %" in details
    assert "udt-rs: ✕ mean_mbps(f) &gt;= 0.5 x capacity and &lt;= 0.9 x capacity: 40" in details
    # The run's summary.json (the index of runs) counts them so too.
    counts = runs_index.summarise(tmp_path, {"run_id": "r1"}, [res])["counts"]
    assert counts["udt-rs"] == {"met": 0, "missed": 0, "inconclusive": 2, "deviation": 0}, counts
