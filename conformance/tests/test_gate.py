"""The gate: which failures fail a run under UDTC_GATE / --fail-on, and how results show it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from udtconf import gate
from udtconf.expectations import load


@pytest.mark.parametrize(
    ("key", "grade", "must", "required"),
    [
        ("interop/a/b/transfer", "", True, True),
        ("adapter/a/unknown_testcase_exits_127", "", True, True),
        ("active/a/client/medium-ack", "", True, True),  # a remote crash under a probe gates
        ("wire/a/b/close/udt4/5.6/shutdown-on-close", "MUST", True, True),  # MUST: gated under both
        ("wire/a/b/transfer/udt4/2/info-less-padding", "SHOULD", False, False),  # SHOULD: reported
        ("wire/a/b/loss/udt4/9.2/full-ack-every-syn", "SHOULD", False, False),
        ("codec/a/b/transfer", "", False, True),  # a check of our decoder against Wireshark's
        (None, "", True, True),  # the suite's own unit tests always gate
    ],
)
def test_gate_classification(key: str | None, grade: str, must: bool, required: bool) -> None:
    exp = load()
    assert gate.gates("must", key, grade, exp) is must
    assert gate.gates("required", key, grade, exp) is required
    assert gate.gates("all", key, grade, exp) is True


def test_gate_mode_from_the_environment() -> None:
    assert gate.mode({}) == "all"
    assert gate.mode({"UDTC_GATE": "must"}) == "must"
    with pytest.raises(gate.GateError, match="UDTC_GATE='strict': use one of must, required, all"):
        gate.mode({"UDTC_GATE": "strict"})


def test_results_show_which_failures_gated(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"entries": []}))
    (tmp_path / "matrix.html").write_text("<table></table>")
    outcomes = [
        gate.Outcome("interop/tp/libudt/transfer", gate.Verdict.GATING, "client tp#0 exit 1"),
        gate.Outcome("wire/tp/tp/transfer/udt4/2/info-less-padding", gate.Verdict.REPORTED, "SHOULD violated"),
        gate.Outcome("active/libudt/client/early-nak", gate.Verdict.WAIVED, "waived finding on libudt"),
    ]
    gate.annotate(tmp_path, "must", outcomes)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["gate"]["mode"] == "must" and doc["gate"]["passed"] is False
    assert [o["key"] for o in doc["gate"]["gating"]] == ["interop/tp/libudt/transfer"]
    assert [o["key"] for o in doc["gate"]["reported"]] == ["wire/tp/tp/transfer/udt4/2/info-less-padding"]
    page = (tmp_path / "matrix.html").read_text()
    assert "Gate: must" in page and "failed (1 gating)" in page
    assert "<td class='bad'>gating</td><td>client tp#0 exit 1</td>" in page
    gate.annotate(tmp_path, "all", [])
    assert json.loads((tmp_path / "results.json").read_text())["gate"]["passed"] is True
