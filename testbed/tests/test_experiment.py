"""Experiment files (experiments/*.toml): the shipped ones load, a bad one is refused with
file:line and what is wrong, and bands judge a result the way the report and the profiles read
it."""

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from udtbed.emulation.hostwatch import HostReport
from udtbed.experiments.bands import judge_all
from udtbed.experiments.experiment import EXPERIMENTS_DIR, ExperimentError, FlowOptions, load, load_all
from udtbed.experiments.short_tcp import short_tcp_ratio
from udtbed.results.report import render
from udtbed.results.results import ExperimentResult, FlowResult, PartResult, ShortTcpPoint, StackResult

GOOD = """
name = "tiny"
title = "One flow on the local path"
figure = "test"
[[part]]
label = "local"
topology = "chicago-local"
flows = [{ name = "f", src = "chicago", dst = "local" }]
paper = { udt = { f = 940 } }
profile = { duration = 10 }
[[part.band]]
metric = "mean_mbps"
flow = "f"
min = 0.8
of = "capacity"
paper = "940 of 1000 Mb/s"
why = "because"
[[part.band]]
metric = "time_to_90pct_s"
flow = "f"
max = 5
paper = "7.5 s"
why = "because"
"""


def write(tmp_path: Path, text: str, name: str = "tiny") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


def test_every_shipped_experiment_loads_and_names_a_paper_figure() -> None:
    exps = load_all()
    assert {"efficiency", "fairness", "join", "friendliness"} <= {n for n, e in exps.items() if e.default}
    for e in exps.values():
        for part in e.parts:
            assert part.topology.is_file()
            for band in part.bands:
                assert band.paper and band.why, (e.name, part.label, band)
    assert sum(1 for e in exps.values() for p in e.parts if p.profile) >= 7


@pytest.mark.parametrize(
    ("change", "message", "line"),
    [
        (('figure = "test"', 'figure = "test"\ncolour = "red"'), "unknown key 'colour'", 5),
        (('metric = "mean_mbps"', 'metric = "goodness"'), "metric 'goodness' is not one of", 10),
        (('dst = "local"', 'dst = "mars"'), "dst 'mars' is not a host of chicago-local.toml", 5),
        (('why = "because"\n[[part.band]]', "[[part.band]]"), "'why' must say which paper figure", 10),
        (('topology = "chicago-local"', 'topology = "atlantis"'), "topology 'atlantis'", 8),
        (('of = "capacity"', 'of = "furlongs"'), "of = 'furlongs' is not one of", 10),
        (
            ('of = "capacity"', 'of = "capacity"\nprofile_min = 0.5'),
            'profile_min / profile_max are for a band of = "re',
            10,
        ),
        (('of = "capacity"', 'of = "reference"\nprofile_min = "low"'), "profile_min must be a number", 10),
    ],
)
def test_a_bad_experiment_file_is_refused_with_file_line_and_why(
    tmp_path: Path, change: tuple[str, str], message: str, line: int
) -> None:
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ExperimentError) as e:
        load(path)
    assert str(e.value).startswith(f"{path}:"), e.value
    assert message in str(e.value), e.value


def test_name_must_match_the_file(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="differs from the file name"):
        load(write(tmp_path, GOOD, name="other"))


def flow(name: str, mbps: list[float], cap: float | None = 100.0) -> FlowResult:
    series = [(float(i + 1), x) for i, x in enumerate(mbps)]
    t90 = next((t for t, x in series if cap and x >= 0.9 * cap), None)
    return FlowResult(name, "chicago", "local", 0.0, series, [], sum(mbps) / len(mbps), 0, cap, t90)


def test_bands_judge_in_units_of_the_run_scale(tmp_path: Path) -> None:
    part = load(write(tmp_path, GOOD)).parts[0]
    fast = StackResult("udt-rs", "udt", [flow("f", [50, 95, 95, 95])])
    slow = StackResult("libudt", "udt", [flow("f", [10, 20, 70, 75])])
    tcp = StackResult("tcp-cubic", "tcp", [flow("f", [95] * 4)])
    v_fast = judge_all(part, fast, scale=0.1, warmup_s=1.0, duration_s=4.0)
    assert [v.ok for v in v_fast] == [True, True]
    assert v_fast[0].low == pytest.approx(80.0) and v_fast[1].high == 5.0
    assert "set for 10 s runs" in v_fast[0].note  # a 4 s run judged against a 10 s profile's band
    # Never at 90 % in a 10 s run: later than the 5 s bound, a miss; in a 4 s run, not judged.
    v_slow = judge_all(part, slow, scale=0.1, warmup_s=1.0, duration_s=10.0)
    assert [v.ok for v in v_slow] == [False, False] and "not within the 10 s run" in v_slow[1].line()
    v_short = judge_all(part, slow, scale=0.1, warmup_s=1.0, duration_s=4.0)
    assert v_short[1].ok is None and v_short[1].line().startswith("? ")
    assert judge_all(part, tcp, 0.1, 1.0, 10.0) == []  # UDT's bands do not judge TCP


def test_report_summary_answers_did_it_reproduce_first(tmp_path: Path) -> None:
    exp = load(write(tmp_path, GOOD))
    part = exp.parts[0]
    stacks = {
        "udt-rs": StackResult("udt-rs", "udt", [flow("f", [50, 95, 95, 95])]),
        "libudt": StackResult("libudt", "udt", [flow("f", [10, 20, 70, 75])]),
    }
    for s in stacks.values():
        s.verdicts = judge_all(part, s, 0.1, 1.0, 10.0)
    res = ExperimentResult(
        "tiny", exp.title, exp.figure, "", 0.1, 10.0, 1.0, "linkem",
        [PartResult("local", "chicago-local", "chicago-local.toml", "", {}, [], True, part.paper, stacks)],
    )  # fmt: skip
    page = render({"run_id": "r1", "status": "ok", "scale": 0.1}, [ExperimentResult.from_dict(_roundtrip(res))])
    summary = page[page.index("Did it reproduce?") : page.index("<h2>One flow")]
    marks = [summary.count(f"<span class=mark>{m}</span>") for m in "✓✕?"]
    assert marks == [2, 2, 0], marks  # libudt misses both: 90 % not within the 10 s run is later than 5 s
    assert "not within the 10 s run" in summary
    assert "<b>2 / 2</b>" in summary and "<b>0 / 2</b>" in summary
    assert "UDT 940 × 0.1 = 94.0" in summary and "href='#tiny--local'" in summary
    assert "id='tiny--local'" in page


def test_the_report_shows_each_udt_sender_s_capacity_estimate_against_the_bottleneck(tmp_path: Path) -> None:
    exp = load(write(tmp_path, GOOD))
    # The senders' pacing alone (all the report reads of it), and only the capacity estimate's figures.
    host = cast(
        HostReport, {"sender_pacing": {"f": {"capacity_median_pps": 90_000, "capacity_times_bottleneck": 1.09}}}
    )
    stacks = {"udt-rs": StackResult("udt-rs", "udt", [flow("f", [95, 95])], host=host)}
    res = ExperimentResult(
        "tiny", exp.title, exp.figure, "", 1.0, 10.0, 1.0, "linkem",
        [PartResult("local", "chicago-local", "chicago-local.toml", "", {}, [], True, exp.parts[0].paper, stacks)],
    )  # fmt: skip
    page = render({"run_id": "r1", "status": "ok", "scale": 1.0}, [ExperimentResult.from_dict(_roundtrip(res))])
    assert "link-capacity estimates, median after slow start" in page and "udt-rs f: 1.09× (90000 pkt/s)" in page


def _roundtrip(res: ExperimentResult) -> dict[str, Any]:
    import json

    return cast(dict[str, Any], json.loads(res.to_json()))


def test_shipped_experiments_dir_is_the_default() -> None:
    assert EXPERIMENTS_DIR.name == "experiments" and (EXPERIMENTS_DIR / "efficiency.toml").is_file()


MIXED = """
name = "mixed"
title = "Two SABUL flows beside two TCP flows"
figure = "test"
[[part]]
label = "alone"
topology = "starlight-local"
flows = [{ name = "tcp1", src = "chicago", dst = "local", stack = "tcp-cubic" }]
paper = { tcp = { tcp1 = 226 } }
[[part]]
label = "beside"
topology = "starlight-local"
protocols = ["sabul"]
flows = [
  { name = "sabul1", src = "chicago", dst = "local" },
  { name = "tcp1", src = "chicago", dst = "local", stack = "tcp-cubic" },
]
paper = { sabul = { sabul1 = 251 }, tcp = { tcp1 = 230 } }
[[part.band]]
protocol = "sabul"
metric = "mean_mbps"
flow = "tcp1"
min = 0.5
of = "fair_share"
paper = "TCP 230 of 1000 Mb/s beside SABUL"
why = "because"
[[part]]
label = "short"
topology = "chicago-amsterdam"
protocols = ["sabul"]
short_tcp = { src = "chicago", dst = "amsterdam", bulk_flows = [0, 9], workers = 10, size = 500000, cc = "reno" }
paper = { short_tcp = { "0" = 82, "9" = 32 } }
[[part.band]]
protocol = "sabul"
metric = "short_tcp_ratio"
min = 0.2
paper = "82 -> 32 Mb/s (0.39)"
why = "because"
"""


def test_flows_name_their_stack_parts_their_protocols_and_short_flows_their_size(tmp_path: Path) -> None:
    alone, beside, short = load(write(tmp_path, MIXED, "mixed")).parts
    assert alone.baseline and alone.flows[0].stack == "tcp-cubic"
    assert not beside.baseline and beside.protocols == ("sabul",)
    assert [f.stack for f in beside.flows] == [None, "tcp-cubic"]
    assert beside.runs("sabul") and not beside.runs("udt")
    assert short.short_tcp is not None and (short.short_tcp.size, short.short_tcp.workers) == (500000, 10)
    assert short.short_tcp.cc == "reno"
    assert short.short_tcp.bulk_flows == (0, 9) and short.bands[0].metric == "short_tcp_ratio"
    assert short.short_tcp.bulk == FlowOptions()  # the bulk flows run with the stack's own settings


def test_short_flows_bulk_flows_can_carry_a_udp_buffer(tmp_path: Path) -> None:
    text = MIXED.replace('cc = "reno" }', 'cc = "reno", bulk_udp_buffer = 65536 }')
    short = load(write(tmp_path, text, "mixed")).parts[2].short_tcp
    assert short is not None and short.bulk == FlowOptions(udp_buffer=65536)
    assert short.bulk.settings() == {"udp_buffer"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('stack = "tcp-cubic" }]', 'stack = "tcp-vegas" }]'), "stack 'tcp-vegas' is not a registry stack"),
        (('protocols = ["sabul"]', 'protocols = ["quic"]'), "protocols = [one or more of frtp, sabul, tcp, udt]"),
        (("size = 500000", "size = -1"), "short_tcp size must be a whole number > 0"),
        (("size = 500000", "colour = 1"), "unknown short_tcp key(s) ['colour']"),
        (('cc = "reno"', 'cc = "reno; rm -rf"'), "short_tcp cc must name a kernel congestion control"),
        (('cc = "reno"', 'cc = "reno", bulk_udp_buffer = "64k"'), "bulk_udp_buffer must be a whole number of bytes"),
        (('metric = "mean_mbps"', 'metric = "short_tcp_ratio"'), "does not apply to a part of bulk flows"),
        (("paper = { tcp = { tcp1 = 226 } }", 'paper = { tcp = { tcp1 = 226 } }\nprotocols = ["tcp"]'),
         "every flow names its stack"),
    ],
)  # fmt: skip
def test_a_bad_flow_stack_protocol_or_short_flow_is_refused(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    old, new = change
    assert old in MIXED
    path = write(tmp_path, MIXED.replace(old, new, 1), "mixed")
    with pytest.raises(ExperimentError) as e:
        load(path)
    assert str(e.value).startswith(f"{path}:") and message in str(e.value), e.value


def test_sabul_bands_judge_the_tcp_flows_beside_it_and_the_short_flows_ratio(tmp_path: Path) -> None:
    _, beside, short = load(write(tmp_path, MIXED, "mixed")).parts
    res = StackResult("sabul", "sabul", [flow("sabul1", [60] * 4), flow("tcp1", [30] * 4)])
    (v,) = judge_all(beside, res, 0.1, 1.0, 20.0)
    assert v.ok and v.low == pytest.approx(25.0)  # half of 100 Mb/s / 2 flows
    assert judge_all(beside, StackResult("udt-rs", "udt", res.flows), 0.1, 1.0, 20.0) == []
    pts = [ShortTcpPoint(0, 8.0, 10, [], {}), ShortTcpPoint(9, 1.0, 2, [], {})]
    low = StackResult("sabul", "sabul", points=pts, metrics={"short_tcp_ratio": short_tcp_ratio(pts)})
    (v,) = judge_all(short, low, 0.1, 1.0, 20.0)
    assert v.value == pytest.approx(0.125) and v.ok is False


def test_report_puts_each_flow_s_paper_figure_beside_ours_with_the_stack_it_ran(tmp_path: Path) -> None:
    exp = load(write(tmp_path, MIXED, "mixed"))
    beside = exp.parts[1]
    sabul = StackResult("sabul", "sabul", [flow("sabul1", [25.0] * 4), flow("tcp1", [23.0] * 4)])
    sabul.flows[0].stack, sabul.flows[0].protocol = "sabul", "sabul"
    sabul.flows[1].stack, sabul.flows[1].protocol = "tcp-cubic", "tcp"
    sabul.verdicts = judge_all(beside, sabul, 0.1, 1.0, 20.0)
    res = ExperimentResult(
        "mixed", exp.title, exp.figure, "", 0.1, 20.0, 1.0, "linkem",
        [PartResult("beside", "starlight-local", "starlight-local.toml", "", {}, [], True, beside.paper,
                    {"sabul": sabul})],
    )  # fmt: skip
    page = render({"run_id": "r1", "status": "ok", "scale": 0.1}, [ExperimentResult.from_dict(_roundtrip(res))])
    summary = page[page.index("Did it reproduce?") : page.index("<h2>Two SABUL")]
    assert "SABUL 251 × 0.1 = 25.1</td><td>–</td><td>25.0</td>" in summary
    # The TCP flow ran beside SABUL: its figure is TCP's, not greyed out as another protocol's.
    assert "tcp1 (tcp-cubic): mean Mb/s" in summary and "TCP 230 × 0.1 = 23.0</td><td>–</td><td>23.0</td>" in summary
    assert "<th>paper SABUL ×scale</th>" in page and "tcp1 (tcp-cubic)</td>" in page


def test_shipped_sabul_experiments_carry_the_paper_s_tables() -> None:
    exps = load_all()
    local, short = exps["sabul-local"], exps["sabul-friendliness"]
    alone, beside = local.parts
    assert alone.baseline and alone.paper == {"tcp": {"tcp1": 226, "tcp2": 225, "tcp3": 227, "tcp4": 225}}
    assert beside.paper == {"sabul": {"sabul1": 251, "sabul2": 237}, "tcp": {"tcp1": 230, "tcp2": 231}}
    assert beside.profile is not None and beside.profile.duration <= 30
    assert short.parts[0].short_tcp is not None and short.parts[0].short_tcp.bulk_flows == tuple(range(10))
    table2 = [82, 98, 78, 40, 65, 37, 37, 40, 36, 32]
    assert short.parts[0].paper["short_tcp"] == {str(n): x for n, x in enumerate(table2)}


FRTP = """
name = "fr"
title = "FRTP"
figure = "test"
[[part]]
label = "sweep"
topology = "frtp-circuit"
protocols = ["frtp"]
flows = [{ name = "f", src = "sender", dst = "receiver", rate = 500, io = "disk" }]
sweep = { option = "udp_buffer", values = [65536, 2097152], seconds = 8, paper = [
  { value = 65536, mbps = 320, loss_pct = 16.96 },
] }
[[part]]
label = "exact"
topology = "frtp-circuit"
capture = true
flows = [{ name = "f", src = "sender", dst = "receiver", rate = 1200, io = "disk", size = 1000000 }]
[[part.band]]
metric = "bytes_exact"
protocol = "frtp"
flow = "f"
min = 1
paper = "reliable"
why = "because"
[[part.band]]
metric = "paths_separated"
protocol = "frtp"
min = 1
paper = "two paths"
why = "because"
"""


def test_flows_carry_rates_buffers_and_files_and_a_sweep_runs_one_option_over_values(tmp_path: Path) -> None:
    from udtbed.experiments.experiment import FlowOptions

    e = load(write(tmp_path, FRTP, "fr"))
    sweep, exact = e.parts
    assert sweep.flows[0].options == FlowOptions(rate=500, io="disk")
    assert sweep.sweep is not None and sweep.sweep.option == "udp_buffer" and sweep.sweep.values == (65536, 2097152)
    assert sweep.sweep.paper[0] == {"value": 65536, "mbps": 320, "loss_pct": 16.96}
    assert sweep.flows[0].options.with_option("udp_buffer", 65536).settings() == {"rate_mbps", "udp_buffer"}
    assert exact.capture and exact.flows[0].options.size == 1000000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ((', io = "disk", size', ", size"), "a finite transfer (size) reads and writes files"),
        (("rate = 500", "rate = -5"), "rate must be Mb/s > 0"),
        (('option = "udp_buffer"', 'option = "mss"'), "sweep option 'mss' is not one of"),
        (("capture = true\n", ""), "a paths_separated band needs capture = true"),
        (("seconds = 8,", "seconds = 8, step = 2,"), "unknown sweep key(s) ['step']"),
        (('metric = "bytes_exact"', 'metric = "loss_pct"\nof = "rate"'), 'of = "rate" bounds mean_mbps of a flow'),
        (('metric = "bytes_exact"', 'metric = "bytes_exact"\nof = "reference"'), "has no reference stack"),
    ],
)
def test_a_bad_flow_option_or_sweep_is_refused(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    with pytest.raises(ExperimentError, match=re.escape(message)):
        load(write(tmp_path, FRTP.replace(*change), "fr"))


def test_report_plots_a_sweep_beside_the_paper_s_points_and_shows_the_capture(tmp_path: Path) -> None:
    from udtbed.emulation.capture import ipt_stats
    from udtbed.results.results import SweepPoint

    def flow(mbps: float, retrans: int) -> FlowResult:
        return FlowResult("f", "sender", "receiver", 0, [(1.0, mbps)], [], mbps, 1, pkts_sent=1000, retrans=retrans)

    st = StackResult("frtp", "frtp", sweep=[SweepPoint(65536, [flow(31.0, 170)]), SweepPoint(2097152, [flow(38, 0)])])
    st.capture = {
        "interfaces": {"sender/data": {"udp_data": 9, "udp_other": 0, "tcp": 0}},
        "separated": True,
        "udp_on_control": 0,
        "tcp_on_data": 0,
        "ipt": {"f": ipt_stats([0.0, 0.00024, 0.00048, 0.00073])},
    }
    sweep = {"option": "udp_buffer", "values": [65536, 2097152], "paper": [{"value": 65536, "mbps": 320}]}
    part = PartResult("sweep", "frtp-circuit", "frtp-circuit.toml", "", {}, [], True, {}, {"frtp": st}, sweep=sweep)
    res = ExperimentResult("fr", "FRTP", "Figs. 4-8", "", 0.1, 8, 3.2, "linkem", [part])
    html = render({"run_id": "x"}, [res])
    assert "UDP buffer (KB, paper scale)" in html and "<td>64</td><td>6.4</td><td>31.0</td><td>32.0</td>" in html
    assert "<td>17.000</td>" in html  # 170 retransmissions of 1000 packets sent
    assert "paths separated: yes" in html and "variance ms²" in html
    assert ExperimentResult.from_dict(json.loads(res.to_json())).parts[0].stacks["frtp"].sweep[1].flows[0].retrans == 0


def test_the_summary_puts_a_sweep_s_paper_points_beside_ours() -> None:
    from udtbed.results.results import SweepPoint

    f = FlowResult("f", "s", "r", 0, [(1.0, 38.6)], [], 38.6, 1, pkts_sent=1000, retrans=0)
    st = StackResult("frtp", "frtp", sweep=[SweepPoint(2097152, [f])])
    sweep = {"option": "udp_buffer", "values": [2097152], "paper": [{"value": 2097152, "mbps": 386, "loss_pct": 0.03}]}
    part = PartResult("fig7", "frtp-circuit", "frtp-circuit.toml", "", {}, [], True, {}, {"frtp": st}, sweep=sweep)
    html = render({"run_id": "x"}, [ExperimentResult("fr", "FRTP", "Fig. 7", "", 0.1, 8, 3.2, "linkem", [part])])
    summary = html[: html.index("<h2>FRTP")]
    assert "goodput Mb/s at UDP buffer 2048 KB</td><td class=l>38.6 (386 × 0.1)</td><td>–</td><td>38.6</td>" in summary
    assert "loss % at UDP buffer 2048 KB</td><td class=l>0.03</td><td>–</td><td>0.00</td>" in summary
