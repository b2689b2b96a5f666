"""The simulator's TCP against NS-2 (udtbed.simulation.ns2check, docs/simulator.md "Checked against NS-2")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from udtbed.__main__ import main
from udtbed.simulation import ns2check, sim

needs_ns2 = pytest.mark.skipif(
    ns2check.ns_binary() is None, reason="needs NS-2's ns (make setup installs Debian's ns2)"
)
needs_simulator = pytest.mark.skipif(not sim.SIMULATOR.exists(), reason=f"{sim.SIMULATOR} not built (make build-sim)")

FIXTURES = Path(__file__).parent / "fixtures"
# The scenario tests/fixtures/ns2check-2f-10ms-loss-seed1.out is NS-2's output of (seed 1).
FIXTURE_SCENARIO = ns2check.CrossCheck("fixture-2f-10ms", 2, 10.0, 100.0, 10, 0.001, 5.0, 2.0)


def _settings(script: str) -> dict[tuple[str, str], str]:
    return {(m[1], m[2]): m[3] for m in re.finditer(r"^(Agent/\S+) set (\w+) (\S+)", script, re.M)}


def test_script_configures_ns2_agents_as_our_model_claims() -> None:
    got = _settings(ns2check.ns2_script(ns2check.scenarios(quick=True)[0], 1))
    want = {
        "packetSize_": "1460",
        "tcpip_base_hdr_size_": "40",
        "window_": "20000",
        "windowInit_": "2",
        "syn_": "false",
        "minrto_": "0.2",
        "rtxcur_init_": "3.0",
        "maxrto_": "60",
        "tcpTick_": "0.000001",
        "singledup_": "0",
        "maxburst_": "0",
        "numdupacks_": "3",
        "timestamps_": "false",
    }
    assert {k: got[("Agent/TCP", k)] for k in want} == want
    assert got[("Agent/TCPSink", "maxSackBlocks_")] == "3"


def test_script_builds_our_dumbbell() -> None:
    sc = ns2check.CrossCheck("t", 2, 100.0, 10.0, 83, delay_ms=5.0)
    script = ns2check.ns2_script(sc, 1)
    # Bottleneck both ways at the rate with delay D; the forward queue in packets.
    assert "$ns simplex-link $r1 $r2 10000000.0 0.005 DropTail" in script
    assert "$ns simplex-link $r2 $r1 10000000.0 0.005 DropTail" in script
    assert "$ns queue-limit $r1 $r2 83" in script
    # Access links: one-way rtt/2 - D = 45 ms each way; sinks right after the bottleneck.
    assert script.count("$ns simplex-link $s(1) $r1 100000000000.0 0.045 DropTail") == 1
    assert "$ns attach-agent $r2 $sink(1)" in script
    assert "Agent/TCP/Sack1" in script and "Agent/TCPSink/Sack1" in script
    assert "DelAck" not in script and "ErrorModel" not in script


def test_lossy_script_puts_an_error_model_on_the_bottleneck() -> None:
    script = ns2check.ns2_script(ns2check.CrossCheck("t", 1, 10.0, 100.0, 83, loss=0.001), 3)
    assert "$em set rate_ 0.001" in script and "$ns lossmodel $em $r1 $r2" in script
    assert f"$defaultRNG seed {ns2check.ns2_seed(3)}" in script


def test_ns2_seed_is_large_so_the_first_draw_is_not_tiny() -> None:
    assert all(ns2check.ns2_seed(k) > 10_000 for k in range(1, 20))
    assert len({ns2check.ns2_seed(k) for k in range(1, 20)}) == 19


def test_both_simulators_get_the_same_start_times() -> None:
    sc = ns2check.scenarios()[0]
    starts = ns2check.start_times(sc, 2)
    assert [f["start_s"] for f in ns2check.sim_spec(sc, 2)["flows"]] == starts
    script = ns2check.ns2_script(sc, 2)
    assert all(f'$ns at {float(t)!r} "$ftp({i}) start"' in script for i, t in enumerate(starts))


def test_sim_spec_matches_the_scenario() -> None:
    sc = ns2check.CrossCheck("t", 3, 10.0, 100.0, 10, loss=0.001, delay_ms=1.0)
    spec = ns2check.sim_spec(sc, 4)
    assert spec["seed"] == 4
    assert spec["bottleneck"] == {
        "rate_mbps": 100.0,
        "queue_pkts": 10,
        "delay_ms": 1.0,
        "loss": 0.001,
        "access_rate_mbps": 100_000.0,
    }
    assert [f["protocol"] for f in spec["flows"]] == ["tcp"] * 3


def test_parser_reads_a_real_ns2_run() -> None:
    text = (FIXTURES / "ns2check-2f-10ms-loss-seed1.out").read_text()
    got = ns2check.parse_ns2_output(text, FIXTURE_SCENARIO)
    # 25807460 - 8780960 bytes_ (1500 a segment) over 3 s, as 1460-byte payload.
    assert got.goodput_mbps[0] == pytest.approx((25807460 - 8780960) * 1460 / 1500 * 8 / 1e6 / 3)
    assert got.goodput_mbps[1] == pytest.approx((19264460 - 6491960) * 1460 / 1500 * 8 / 1e6 / 3)
    assert (got.drops, got.random_drops) == (76, 34)


def test_parser_counts_across_the_sinks_32_bit_wrap() -> None:
    sc = ns2check.CrossCheck("t", 1, 1.0, 1000.0, 83, duration_s=3.0, warmup_s=1.0)
    text = "ns2check snap 1 2000000000\nns2check snap 2 -2094967296\nns2check snap 3 -1994967296\nns2check drops 0 0\n"
    got = ns2check.parse_ns2_output(text, sc)
    assert got.goodput_mbps[0] == pytest.approx(300_000_000 * 1460 / 1500 * 8 / 1e6 / 2)


def test_parser_refuses_an_output_without_its_lines() -> None:
    with pytest.raises(ValueError, match="lacks"):
        ns2check.parse_ns2_output("ns2check snap 2 1 2\n", FIXTURE_SCENARIO)


def test_missing_ns_exits_2_and_names_make_setup(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ns2check, "NS_BINARY", "ns-is-not-installed-here")
    assert main(["ns2-check", "--quick"]) == 2
    assert "make setup" in capsys.readouterr().err
    with pytest.raises(ns2check.NsMissing, match="make setup"):
        ns2check.run_ns2(FIXTURE_SCENARIO, 1)


def test_verdict_is_inconclusive_within_the_seeds_scatter() -> None:
    def side(*means: float) -> ns2check.Side:
        return ns2check.Side([ns2check.Figures((m,), 0, 0) for m in means])

    sc = ns2check.scenarios(quick=True)[0]
    assert ns2check.Comparison(sc, side(10.2, 10.4), side(10.0, 10.1)).verdict is ns2check.Verdict.AGREE
    assert ns2check.Comparison(sc, side(12.0, 12.1), side(10.0, 10.1)).verdict is ns2check.Verdict.DISAGREE
    assert ns2check.Comparison(sc, side(8.0, 14.0), side(10.0, 10.2)).verdict is ns2check.Verdict.INCONCLUSIVE


@needs_ns2
@needs_simulator
def test_quick_points_agree_with_ns2(tmp_path: Path) -> None:
    results = ns2check.compare(ns2check.scenarios(quick=True), seeds=2)
    assert [c.verdict for c in results] == [ns2check.Verdict.AGREE] * len(results), ns2check.table(results)
    # Loss-free and deterministic, the single flow's figures are NS-2's to the packet.
    one = results[0]
    assert one.ours.drops == one.ns2.drops
    ns2check.write(results, tmp_path, 2, "test")
    assert "| 1f-10ms-100M-q83 |" in (tmp_path / "ns2-check.md").read_text()


def test_the_ns2_226_profile_sets_ns2_to_the_papers_defaults() -> None:
    sc = ns2check.scenarios(quick=True)[0]
    got = _settings(ns2check.ns2_script(sc, 1, "ns2-2.26"))
    want = {
        "syn_": "true",
        "delay_growth_": "true",
        "minrto_": "1",
        "rtxcur_init_": "6.0",
        "maxrto_": "64",
        "tcpTick_": "0.01",
        "singledup_": "1",
        "precisionReduce_": "false",
        # The rest as the default profile's.
        "packetSize_": "1460",
        "windowInit_": "2",
        "numdupacks_": "3",
    }
    assert {k: got[("Agent/TCP", k)] for k in want} == want
    assert len(ns2check.ns2_settings("ns2-2.26")) == len(ns2check.NS2_SETTINGS) + 1
    assert _settings(ns2check.ns2_script(sc, 1)) == _settings(ns2check.ns2_script(sc, 1, "default"))
    with pytest.raises(ValueError, match="not one of"):
        ns2check.ns2_settings("ns2-2.27")


def test_sim_spec_puts_the_flows_on_the_profile() -> None:
    sc = ns2check.scenarios(quick=True)[1]
    assert {f.get("tcp_profile") for f in ns2check.sim_spec(sc, 1, "ns2-2.26")["flows"]} == {"ns2-2.26"}
    assert all("tcp_profile" not in f for f in ns2check.sim_spec(sc, 1)["flows"])


@needs_ns2
@needs_simulator
def test_quick_points_agree_with_ns2_on_the_ns2_226_profile() -> None:
    results = ns2check.compare(ns2check.scenarios(quick=True), seeds=2, profile="ns2-2.26")
    assert [c.verdict for c in results] == [ns2check.Verdict.AGREE] * len(results), ns2check.table(results)
    # SYN, Limited Transmit, 10 ms ticks and whole-segment halvings: still NS-2's drops to the packet.
    one = results[0]
    assert one.ours.drops == one.ns2.drops
