"""The quick profiles' second attempt (tests/profiles.py): a miss the machine caused is told apart
from one the stack caused, also when the machine keeps the paths from calibrating at all."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import profiles
import pytest
from udtbed.emulation.hostwatch import HostReport
from udtbed.experiments.experiment import load_all
from udtbed.experiments.runner import CalibrationError
from udtbed.results.results import FlowResult, PartResult, StackResult, Verdict

EXP = load_all()["efficiency"]
PART = next(p for p in EXP.parts if p.label == "chicago-local")
STEAL = cast(HostReport, {"steal_pct": 25.0, "flags": ["the hypervisor took 25 % of the machine's CPU time"]})


def missed(host: HostReport) -> SimpleNamespace:
    """A run of the part whose one band udt-rs missed, with ``host`` its host report."""
    flow = FlowResult("local", "chicago", "local", 0.0, [(1.0, 10.0)], [], 10.0, 0, 100.0)
    r = StackResult("udt-rs", "udt", [flow], host=host)
    r.verdicts = [Verdict("mean_mbps", "mean_mbps(local) >= 0.85 x capacity", "p", "w", 10.0, 85.0, None, False)]
    part = PartResult("chicago-local", "chicago-local", "f.toml", "", {}, [], True, {}, {"udt-rs": r})
    return SimpleNamespace(parts=[part])


def attempts(monkeypatch: pytest.MonkeyPatch, *outcomes: Any) -> None:
    """The runner's results (or errors) for the first and the second attempt, in turn."""
    left = list(outcomes)

    def run_experiment(*_: Any) -> Any:
        out = left.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    monkeypatch.setattr(profiles, "run_experiment", run_experiment)


def test_paths_that_no_longer_calibrate_after_the_machine_flagged_a_miss_are_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts(monkeypatch, missed(STEAL), CalibrationError("calibration of chicago-local is off beyond tolerance"))
    with pytest.raises(pytest.skip.Exception, match="inconclusive: .* then failed to calibrate"):
        profiles.run_profile(tmp_path, EXP, PART, "udt-rs")


def test_paths_that_do_not_calibrate_on_the_first_attempt_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts(monkeypatch, CalibrationError("calibration of chicago-local is off beyond tolerance"))
    with pytest.raises(CalibrationError):
        profiles.run_profile(tmp_path, EXP, PART, "udt-rs")


def test_a_miss_the_machine_did_not_flag_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts(monkeypatch, missed(cast(HostReport, {})), CalibrationError("never reached"))
    with pytest.raises(AssertionError, match="missed its bands"):
        profiles.run_profile(tmp_path, EXP, PART, "udt-rs")


def missed_window(host: HostReport, value: float) -> SimpleNamespace:
    """A run whose one missed band is a mean over the run's last seconds."""
    run = missed(host)
    r = run.parts[0].stacks["udt-rs"]
    band = "mean_mbps(local, after 15 s) >= 0.85 x capacity"
    r.verdicts = [Verdict("mean_mbps", band, "p", "w", value, 85.0, None, False)]
    return run


def test_a_miss_of_a_window_one_loss_epoch_decides_runs_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    met = missed_window(cast(HostReport, {}), 90.0)
    met.parts[0].stacks["udt-rs"].verdicts[0].ok = True
    attempts(monkeypatch, missed_window(cast(HostReport, {}), 84.8), met)
    assert profiles.run_profile(tmp_path, EXP, PART, "udt-rs").verdicts[0].value == 90.0


def test_a_window_missed_in_both_runs_fails_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts(monkeypatch, missed_window(cast(HostReport, {}), 84.8), missed_window(cast(HostReport, {}), 83.0))
    with pytest.raises(AssertionError, match=r"(?s)attempt 1: .*84\.8.*83"):
        profiles.run_profile(tmp_path, EXP, PART, "udt-rs")
