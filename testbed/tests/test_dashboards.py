"""Every dashboard panel's query runs against a live influxd filled by a real (short) run."""

import importlib.util
import json
import os

import pytest
from profiles import udt_stacks
from udtbed import influx
from udtbed.experiments import Experiment, Flow, Part, Run, run_experiment
from udtbed.stacks import all_stacks

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]
REPO = influx.Path(__file__).resolve().parents[2]


def load_generator():
    spec = importlib.util.spec_from_file_location("dash", REPO / "dashboards/generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_json_is_committed_and_current():
    gen = load_generator()
    assert json.loads((REPO / "dashboards/udtbed.json").read_text()) == gen.dashboard(), (
        "dashboards/udtbed.json is stale: run python dashboards/generate.py"
    )


def test_every_panel_query_returns_data_from_a_real_run(tmp_path):
    stack = (udt_stacks() or ["tcp-cubic"])[0]
    with influx.LocalInfluxd(tmp_path / "influxdb") as db:
        writer = influx.InfluxWriter(db.url)
        run = Run(tmp_path, 0.1, 4, "linkem", writer, f"dash-{os.getpid()}")
        exp = Experiment(
            "dash",
            "dash",
            "",
            [
                Part("chicago-local", "chicago-local", [Flow("local", "chicago", "local")]),
                Part("fr", "chicago-amsterdam", [], short_tcp=[0, 1]),
            ],
        )
        run_experiment(run, exp, [all_stacks()[stack]])
        writer.close()
        assert writer.failed is None and writer.written > 0
        gen = load_generator()
        queries = [p["targets"][0]["query"] for p in gen.dashboard()["panels"]]
        queries += [v["query"] for v in gen.dashboard()["templating"]["list"]]
        for q in queries:
            q = (
                q.replace("$timeFilter", "time > now() - 1h")
                .replace("$__interval", "1s")
                .replace("/^$run$/", f"/^{run.run_id}$/")
                .replace("/^$experiment$/", "/^dash$/")
            )
            r = influx.query(db.url, q)["results"][0]
            assert "error" not in r, (q, r)
            assert r.get("series"), f"no data for: {q}"


def test_writer_never_fails_the_run_without_a_server():
    w = influx.InfluxWriter("http://127.0.0.1:9", log=lambda *_: None)
    w.write("throughput", {"run": "x"}, {"mbps": 1.0})
    w.close()
    assert w.failed
