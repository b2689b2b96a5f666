"""The performance gate (udtbed.results.gate): the builds take turns, each run gets its build's binary,
and the two sides are compared as udtbed compare does."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from udtbed.results import gate
from udtbed.results.results import ExperimentResult, PartResult, StackResult, Verdict

BAND = "mean_mbps(local) >= 0.85 x capacity"


def _fake_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, goodput: Callable[[str, int], float]
) -> list[tuple[str, str]]:
    """subprocess.run for `udtbed run`: records (label, UDT_BIN) and writes a run whose goodput
    ``goodput(binary, n)`` gives."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(gate, "GATE_DIR", tmp_path / "gate")

    def fake(
        argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        assert env is not None, "udtbed run without UDT_BIN"
        results = gate.GATE_DIR / "runs" / argv[argv.index("--results") + 1].rsplit("/", 1)[-1]
        label = results.name
        calls.append((label, env["UDT_BIN"]))
        d = results / f"run{len(calls)}"
        d.mkdir(parents=True)
        g = goodput(env["UDT_BIN"], len(calls))
        res = StackResult("udt-rs", "udt", verdicts=[Verdict("mean_mbps", BAND, "", "", g, 85.0, None, True)])
        part = PartResult("chicago-local", "t", "t.toml", "", {}, [], True, {}, stacks={"udt-rs": res})
        ExperimentResult("efficiency", "", "", "", 0.1, 20.0, 8.0, "linkem", parts=[part]).write(d / "e.json")
        (d / "run.json").write_text(json.dumps({"run_id": d.name, "results": {"efficiency": "e.json"}}))
        latest = results / "latest"
        latest.unlink(missing_ok=True)
        latest.symlink_to(d.name)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr("udtbed.results.gate.subprocess.run", fake)
    return calls


def test_the_builds_take_turns_each_with_its_own_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _fake_runs(monkeypatch, tmp_path, lambda b, n: 90.0)
    base, head = gate.run_turns(tmp_path / "base-udt", tmp_path / "head-udt", 3, ["--experiments", "efficiency"])
    assert [c[0] for c in calls] == ["base", "head"] * 3
    assert {c for c in calls} == {("base", str(tmp_path / "base-udt")), ("head", str(tmp_path / "head-udt"))}
    assert len(base) == len(head) == 3 and len(set(base)) == 3


def test_noise_does_not_block_and_a_slower_head_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    head_bin = tmp_path / "head-udt"
    head_bin.write_text("")
    monkeypatch.setattr(gate, "HEAD_BIN", head_bin)
    monkeypatch.setattr(gate, "base_binary", lambda ref, log=print: ("abc", tmp_path / "base-udt"))
    noise = [90.1, 89.7, 90.4, 90.0, 89.8, 90.3]
    _fake_runs(monkeypatch, tmp_path, lambda b, n: noise[n - 1])
    (row,) = gate.gate("HEAD", 3, [])
    assert row.outcome == "same", row
    _fake_runs(monkeypatch, tmp_path / "2", lambda b, n: 90.0 + (n % 3) * 0.3 if "base" in b else 80.0 + (n % 3) * 0.3)
    (row,) = gate.gate("HEAD", 3, [])
    assert row.outcome == "regressed" and row.change is not None and row.change < -0.1, row


def test_the_gate_wants_two_runs_a_build_and_a_built_head(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(gate.GateError, match="at least 2"):
        gate.gate("HEAD", 1, [])
    monkeypatch.setattr(gate, "HEAD_BIN", tmp_path / "missing")
    with pytest.raises(gate.GateError, match="make build"):
        gate.gate("HEAD", 2, [])


def test_a_head_binary_made_elsewhere_is_gated_in_place_of_this_checkout_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(gate.GateError, match="no such file"):
        gate.gate("HEAD", 2, [], head_bin=tmp_path / "nowhere")
    head = tmp_path / "wrapped-udt"
    head.write_text("")
    monkeypatch.setattr(gate, "base_binary", lambda ref, log=print: ("abc", tmp_path / "base-udt"))
    calls = _fake_runs(monkeypatch, tmp_path, lambda b, n: 90.0 + n % 2)
    gate.gate("HEAD", 2, [], head_bin=head)
    assert [c[1] for c in calls if c[0] == "head"] == [str(head), str(head)]
