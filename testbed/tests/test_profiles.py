"""Quick profiles: each topology, short and scaled (×0.1), asserting what a correct UDT stack
must reach there. Each band sits next to the paper figure it stands for.

Rates are L2 rates; a UDT data packet is 1456 payload bytes in a 1514-byte frame, so the
best goodput is 96.2 % of the emulated rate.
"""

import pytest

from profiles import SCALE, run_profile, udt_stacks

pytestmark = [pytest.mark.needs_root, pytest.mark.slow, pytest.mark.profile]
STACKS = udt_stacks()


def series_after(flow, t0):
    return [x for t, x in flow["series_1s"] if t > t0]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("topology, dst, rate_mbps", [
    ("chicago-local", "local", 1000), ("chicago-ottawa", "ottawa", 622), ("chicago-amsterdam", "amsterdam", 1000)])
def test_single_flow_efficiency(tmp_path, stack, topology, dst, rate_mbps):
    r = run_profile(tmp_path, topology, [("chicago", dst)], stack, duration=18)
    f = r["flows"][0]
    cap = rate_mbps * SCALE
    # SC'04 Fig. 11 / §5.1: a flow reaches 90 % of the link in 7.5 s -> 90 % within 8 s.
    assert f["time_to_90pct_s"] is not None and f["time_to_90pct_s"] <= 8.0, f["series_1s"]
    # Fig. 11: 940 of 1000 Mb/s (94 %) -> mean after 8 s >= 85 % (a short run on a shared
    # 2-core machine may include one loss event; 580/622 on OC-12 is SONET overhead we do not emulate).
    assert sum(series_after(f, 8)) / len(series_after(f, 8)) >= 0.85 * cap, f["series_1s"]


@pytest.mark.parametrize("stack", STACKS)
def test_three_site_fairness(tmp_path, stack):
    r = run_profile(tmp_path, "three-site", [("chicago", "local"), ("chicago", "ottawa"), ("chicago", "amsterdam")],
                    stack, duration=25)
    # SC'04 Fig. 12: ~325 Mb/s each of 1 Gb/s -> Jain's index >= 0.95 ...
    assert r["metrics"]["jain_index"] >= 0.95, r["metrics"]
    # ... and together they fill the link: 3 x 325 = 975 of 1000 -> aggregate >= 85 %.
    assert r["metrics"]["aggregate_mbps"] >= 0.85 * 1000 * SCALE, r["metrics"]


@pytest.mark.parametrize("stack", STACKS)
def test_streaming_join(tmp_path, stack):
    r = run_profile(tmp_path, "streaming-join", [("a", "c"), ("b", "c")], stack, duration=25)
    # SC'04 §5.3 / Fig. 1: UDT join throughput (2 x the slower stream) 600-800 of 1000 Mb/s
    # -> >= 600 Mb/s x scale, where TCP gets 2 x 3.52 = 7 Mb/s.
    join = 2 * min(f["mean_mbps"] for f in r["flows"])
    assert join >= 600 * SCALE, r["flows"]


@pytest.mark.parametrize("stack", STACKS)
def test_dumbbell_rtt_fairness(tmp_path, stack):
    r = run_profile(tmp_path, "dumbbell", [("s1", "r1"), ("s2", "r2")], stack, duration=25)
    means = {f["name"]: f["mean_mbps"] for f in r["flows"]}
    # SC'04 Fig. 6: RTT fairness within 10 % for RTTs 1-1000 ms; here 10 vs 100 ms over
    # 25 s (the paper runs 100 s) -> long/short ratio >= 0.7 and the link >= 85 % full.
    assert means["s2-r2"] / means["s1-r1"] >= 0.7, means
    assert sum(means.values()) >= 0.85 * 100 * SCALE, means


@pytest.mark.parametrize("stack", STACKS[:1])
def test_frtp_circuit_data_path(tmp_path, stack):
    r = run_profile(tmp_path, "frtp-circuit", [("sender", "receiver")], stack, duration=12)
    f = r["flows"][0]
    # FRTP: the dedicated circuit is filled (20 ms RTT) -> >= 85 % of the circuit after 8 s.
    assert sum(series_after(f, 8)) / len(series_after(f, 8)) >= 0.85 * 1000 * SCALE, f["series_1s"]
