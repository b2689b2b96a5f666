"""Every dashboard panel's query runs against a live influxd filled by a real (short) run: a UDT
stack through the emulator (throughput, sender, receiver, link), its calibration, short TCP
flows, and one conformance case run with INFLUX set."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from profiles import udt_stacks
from udtbed.experiments.experiment import TOPOLOGIES_DIR, Experiment, Flow, Part, ShortTcp
from udtbed.experiments.run import Run
from udtbed.experiments.runner import run_experiment
from udtbed.experiments.stacks import all_stacks
from udtbed.results import influx

REPO = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dash", REPO / "dashboards/generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_json_is_committed_and_current() -> None:
    gen = load_generator()
    assert json.loads((REPO / "dashboards/udtbed.json").read_text()) == gen.as_json(), (
        "dashboards/udtbed.json is stale: run make dashboards"
    )


def conformance_case(url: str, tmp_path: Path) -> None:
    """One quick interop case (udt-rs x udt-rs handshake) with its outcome sent to ``url``."""
    env = os.environ | {
        "INFLUX": url,
        "INFLUX_RUN": "dash-conformance",
        "STACKS": "udt-rs",
        "CASES": "handshake",
        "UDTC_NO_JUNIT": "1",
    }
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "-k", "test_matrix"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.mark.needs_root
@pytest.mark.slow
def test_every_panel_query_returns_data_from_a_real_run(tmp_path: Path) -> None:
    stacks = udt_stacks()
    if not stacks:
        pytest.skip("no UDT stack is built (sender and link series need one)")
    stack = stacks[0]
    with influx.LocalInfluxd(tmp_path / "influxdb") as db:
        writer = influx.InfluxWriter(db.url)
        run = Run(tmp_path, 0.1, 4, "linkem", writer, f"dash-{os.getpid()}")
        exp = Experiment(
            "dash",
            "dash",
            "",
            (
                Part("chicago-local", TOPOLOGIES_DIR / "chicago-local.toml", (Flow("local", "chicago", "local"),)),
                Part(
                    "fr", TOPOLOGIES_DIR / "chicago-amsterdam.toml", short_tcp=ShortTcp("chicago", "amsterdam", (0, 1))
                ),
            ),
        )
        run_experiment(run, exp, [all_stacks()[stack]])  # writes each part's calibration too
        writer.close()
        assert writer.failed is None and writer.written > 0
        conformance_case(db.url, tmp_path)

        gen = load_generator()
        values = {"run": run.run_id, "experiment": "dash", "stack": stack}
        for q in gen.queries(gen.as_json()):
            q = q.replace("$timeFilter", "time > now() - 1h").replace("$__interval", "1s")
            q = re.sub(r"/\^\$(\w+)\$/", lambda m: f"/^{values[m.group(1)]}$/", q)
            r = influx.query(db.url, q)["results"][0]
            assert "error" not in r, (q, r)
            assert r.get("series"), f"no data for: {q}"


def test_writer_never_fails_the_run_without_a_server() -> None:
    w = influx.InfluxWriter("http://127.0.0.1:9", log=lambda *_: None)
    w.write("throughput", {"run": "x"}, {"mbps": 1.0})
    w.close()
    assert w.failed
