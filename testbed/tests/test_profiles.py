"""Quick profiles: each topology, short and scaled (×0.1), asserting what a correct UDT 4.11
stack must reach there. Each band sits next to the paper figure it stands for, and where UDT
4.11's algorithm cannot meet the paper's figure the band says why (docs/testbed.md, "Quick
profiles").

Rates are L2 rates; a UDT data packet is 1456 payload bytes in a 1514-byte frame, so the
best goodput is 96.2 % of the emulated rate.

Scale 0.1 is a power of ten on purpose: UDT's increase (UDT4.md §12.3) picks a power of ten
from the spare bandwidth, so every path moves down exactly one row of the SC'04 Table 1 and
the increase relative to the link is the same as at full scale. Other scales would not keep
the dynamics.
"""

import pytest
from profiles import SCALE, run_profile, udt_stacks

pytestmark = [pytest.mark.needs_root, pytest.mark.slow, pytest.mark.profile]
STACKS = udt_stacks()


def mean_after(flow, t0):
    xs = [x for t, x in flow["series_1s"] if t > t0]
    assert xs, f"no samples after {t0} s: {flow['series_1s']}"
    return sum(xs) / len(xs)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize(
    "topology, dst, rate_mbps", [("chicago-local", "local", 1000), ("chicago-amsterdam", "amsterdam", 1000)]
)
def test_single_flow_fills_a_1gbit_path(tmp_path, stack, topology, dst, rate_mbps):
    def bands(r):
        f = r["flows"][0]
        cap = rate_mbps * SCALE
        # SC'04 §3.3: 90 % of the link within 7.5 s of a loss (formula (1), from zero, uncapped).
        # 4.11 leaves slow start at the receiver's still-rising arrival speed (30-40 % here), may
        # cut that up to 5 times by 1.125 (to ~17 %), then climbs 0.1 packet per SYN: +12 Mb/s per
        # s at this scale, less where ACK jitter skips a rate-control tick -> ~10 s at worst; with
        # room for a loaded 2-core machine, 90 % within 15 s. Measured: libudt 4-6 s, udt-rs 6-9 s.
        assert f["time_to_90pct_s"] is not None and f["time_to_90pct_s"] <= 15.0, f["series_1s"]
        # Fig. 11: 940 of 1000 Mb/s (94 %) once there -> mean after 15 s >= 85 % (a loss event
        # in those 10 s costs up to 1 - 1.125^-5 = 45 % for a few seconds).
        assert mean_after(f, 15) >= 0.85 * cap, f["series_1s"]

    run_profile(tmp_path, topology, [("chicago", dst)], stack, duration=25, bands=bands)


@pytest.mark.parametrize("stack", STACKS)
def test_single_flow_on_oc12_reaches_90pct(tmp_path, stack):
    def bands(r):
        f = r["flows"][0]
        cap = 622 * SCALE
        # Fig. 11: 580 of 622 Mb/s (93 %) on the OC-12 (the paper's figure includes SONET overhead
        # we do not emulate). 4.11 on this path: the packet pairs measure 622 Mb/s, and below the
        # rate of its last decrease a flow's spare bandwidth is capped at Bandwidth/9 = 69 Mb/s
        # (6.9 at this scale), one row lower in Table 1 than on a 1 Gb/s link: 0.1 (0.01) packet
        # per SYN, 1.9 % of the link per second. After slow start (up to 5 decreases from the
        # start-up overshoot) the climb to 90 % takes 5-30 s: measured libudt 6-21 s (once never
        # in 40 s on a loaded machine), udt-rs 4-23 s -> 90 % within 35 s of a 40 s run ...
        assert f["time_to_90pct_s"] is not None and f["time_to_90pct_s"] <= 35.0, f["series_1s"]
        # ... and the mean after 8 s (the paper's 7.5 s) >= 65 % of the link (measured 70-87 %).
        assert mean_after(f, 8) >= 0.65 * cap, f["series_1s"]

    run_profile(tmp_path, "chicago-ottawa", [("chicago", "ottawa")], stack, duration=40, bands=bands)


@pytest.mark.parametrize("stack", STACKS)
def test_three_site_shares_the_link(tmp_path, stack):
    def bands(r):
        m, means = r["metrics"], [f["mean_mbps"] for f in r["flows"]]
        # SC'04 Fig. 12: ~325 Mb/s each of 1 Gb/s (Jain 1.0). 4.11: the Ottawa flow sits behind
        # the 622 Mb/s link, so after every loss its increase is 10x smaller than the 1 Gb/s flows'
        # (see the OC-12 profile) and it gets less. Measured Jain for libudt and udt-rs alike:
        # 0.78-0.88 over 20-25 s, 0.85-0.94 over 40-60 s (TCP cubic 0.63) -> over 60 s, Jain >= 0.80
        # (2026-11-22, 60 s: udt-rs 0.861-0.900, libudt 0.899-0.955) ...
        assert m["jain_index"] >= 0.80, (m, means)
        # ... no flow starved: each >= 30 % of a fair share. Fairness is Jain's bound above; this
        # one catches a flow that collapses. Measured Ottawa: libudt 52-66 %, udt-rs 39-45 % -- the
        # udt-rs sender's loss epochs run deeper than 4.11's (docs/testbed.md, "Quick profiles":
        # an open difference, not a tolerance the paper gives) ...
        assert min(means) >= 0.3 * 1000 * SCALE / 3, means
        # ... and together they fill the link: 3 x 325 = 975 of 1000 -> aggregate >= 85 %.
        assert m["aggregate_mbps"] >= 0.85 * 1000 * SCALE, m

    run_profile(
        tmp_path,
        "three-site",
        [("chicago", "local"), ("chicago", "ottawa"), ("chicago", "amsterdam")],
        stack,
        duration=60,
        bands=bands,
    )


@pytest.mark.parametrize("stack", STACKS)
def test_streaming_join(tmp_path, stack):
    def bands(r):
        # SC'04 §5.3 / Fig. 1: UDT join throughput (2 x the slower stream) 600-800 of 1000 Mb/s
        # -> >= 600 Mb/s x scale, where TCP gets 2 x 3.52 = 7 Mb/s.
        join = 2 * min(f["mean_mbps"] for f in r["flows"])
        assert join >= 600 * SCALE, r["flows"]

    run_profile(tmp_path, "streaming-join", [("a", "c"), ("b", "c")], stack, duration=25, bands=bands)


@pytest.mark.parametrize("stack", STACKS)
def test_dumbbell_rtt_fairness(tmp_path, stack):
    def bands(r):
        means = {f["name"]: f["mean_mbps"] for f in r["flows"]}
        # SC'04 Fig. 6: RTT fairness within 10 % for RTTs 1-1000 ms; here 10 vs 100 ms over
        # 25 s (the paper runs 100 s). Measured long/short (2026-11-22, 4 runs each): udt-rs
        # 0.88-1.07, libudt 0.75-0.94, one run (stack not recorded) 0.70; the same after the first 10 s, so it
        # is 4.11's share at this rate, not the long flow's start-up. TCP's 1/RTT would give
        # ~0.1 -> long/short >= 0.6, and the link >= 85 % full (measured 91-94 %).
        assert means["s2-r2"] / means["s1-r1"] >= 0.6, means
        assert sum(means.values()) >= 0.85 * 100 * SCALE, means

    run_profile(tmp_path, "dumbbell", [("s1", "r1"), ("s2", "r2")], stack, duration=25, bands=bands)


@pytest.mark.parametrize("stack", STACKS[:1])
def test_frtp_circuit_data_path(tmp_path, stack):
    def bands(r):
        f = r["flows"][0]
        # The circuit's data path, with control on the second net, carries a UDT flow at rate.
        # FRTP itself would hold a fixed rate; 4.11's control on this 20 ms, BDP-queued circuit
        # probes into the queue about every 8 s and a loss epoch cuts the rate by up to 1.125^5,
        # climbed back in ~4 s. Measured mean after 8 s of 20 s: libudt 86-88 %, udt-rs 81-88 %
        # (a 12 s run with one epoch in its last 4 s: 85 %) -> >= 75 % after 8 s.
        assert mean_after(f, 8) >= 0.75 * 1000 * SCALE, f["series_1s"]

    run_profile(tmp_path, "frtp-circuit", [("sender", "receiver")], stack, duration=20, bands=bands)
