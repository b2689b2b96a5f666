"""The scenario key ``tcp_profile`` (docs/simulator.md, "Scenario files"): the loader passes it to
every TCP flow of the run spec and refuses a bad one naming file and key; the simulator refuses it too."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from udtbed.simulation import sim

needs_simulator = pytest.mark.skipif(not sim.SIMULATOR.exists(), reason=f"{sim.SIMULATOR} not built (make build-sim)")


def _write(
    tmp_path: Path, head: str = "", flows: str = "{ protocol = 'tcp' }", metric: str = "jain", tail: str = ""
) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f"name = 'p'\nfigure = 'F'\ntitle = 'T'\nsetup = 'S'\nclaim = 'C'\nmetric = '{metric}'\n{head}"
        "x = 'rtt_ms'\nvalues = [10]\nbottleneck = { rate_mbps = 10, queue = 'bdp' }\n"
        f"[[series]]\nlabel = 'a'\nflows = [{flows}]\n{tail}"
    )
    return path


def _flows(spec: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(f["protocol"], f.get("tcp_profile")) for f in spec["flows"]]


def test_a_scenario_profile_reaches_every_tcp_flow_unless_one_names_its_own(tmp_path: Path) -> None:
    flows = "{ protocol = 'tcp' }, { protocol = 'udt' }, { protocol = 'tcp', tcp_profile = 'default' }"
    sc = sim.load(_write(tmp_path, "tcp_profile = 'ns2-2.26'\n", flows))
    assert sc.tcp_profile == "ns2-2.26"
    (p,) = sim.expand(sc)
    assert _flows(p.specs[0]) == [("tcp", "ns2-2.26"), ("udt", None), ("tcp", "default")]


def test_without_a_profile_the_spec_is_as_before(tmp_path: Path) -> None:
    (p,) = sim.expand(sim.load(_write(tmp_path)))
    assert "tcp_profile" not in p.specs[0]["flows"][0]


def test_the_profile_reaches_short_transfers_and_the_friendliness_twin(tmp_path: Path) -> None:
    short = "[series.short_flows]\nbytes = 1048576\nconcurrency = 2\ncount = 4\nrtt_ms = 10\n"
    sc = sim.load(_write(tmp_path, "tcp_profile = 'ns2-2.26'\n", "{ protocol = 'udt' }", "friendliness", short))
    (p,) = sim.expand(sc)
    mixed, twin = p.specs
    assert mixed["short_flows"]["tcp_profile"] == "ns2-2.26"
    assert _flows(mixed) == [("udt", None)]
    assert _flows(twin) == [("tcp", "ns2-2.26")]


@pytest.mark.parametrize(
    ("head", "flows", "key", "says"),
    [
        ("tcp_profile = 'ns2-2.35'\n", "{ protocol = 'tcp' }", "tcp_profile", "'ns2-2.35' is not a TCP profile"),
        ("", "{ protocol = 'tcp', tcp_profile = 'ns2' }", "series[0].flows[0].tcp_profile", "use one of default"),
        ("", "{ protocol = 'udt', tcp_profile = 'ns2-2.26' }", "series[0].flows[0].tcp_profile", "TCP only"),
    ],
)
def test_a_bad_profile_names_file_and_key(tmp_path: Path, head: str, flows: str, key: str, says: str) -> None:
    path = _write(tmp_path, head, flows)
    with pytest.raises(sim.ScenarioError, match=re.escape(f"{path}: {key}: ") + ".*" + re.escape(says)):
        sim.load(path)


@needs_simulator
def test_the_simulator_refuses_a_profile_it_does_not_have() -> None:
    spec = {
        "seed": 1,
        "duration_s": 2,
        "bottleneck": {"rate_mbps": 10, "queue_pkts": 10},
        "flows": [{"protocol": "tcp", "rtt_ms": 10, "tcp_profile": "ns2-2.27"}],
    }
    p = subprocess.run([str(sim.SIMULATOR), "-"], input=json.dumps(spec), capture_output=True, text=True, check=False)
    assert p.returncode == 2 and 'tcp_profile "ns2-2.27" is not a TCP profile' in p.stderr


@needs_simulator
def test_the_ns2_226_profile_runs_in_a_scenario(tmp_path: Path) -> None:
    spec = {
        "seed": 1,
        "duration_s": 5,
        "bottleneck": {"rate_mbps": 10, "queue_pkts": 20},
        "flows": [{"protocol": "tcp", "rtt_ms": 100, "tcp_profile": p} for p in sim.TCP_PROFILES],
    }
    result = sim.run_one(spec, sim.SIMULATOR)
    assert [f["delivered_bytes"] > 0 for f in result["flows"]] == [True, True]
    assert result["spec"]["flows"][1]["tcp_profile"] == "ns2-2.26"
