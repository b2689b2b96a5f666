"""``python -m udtconf run``: usage errors exit 2 with what to do; the gate decides 0 or 1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from udtconf.run import main, matrix_lines
from udtconf.runner import RunStatus

# A stack that binds the server port and exits 0, and whose client fails at once: an interop
# failure within a second, without a real UDT stack.
ENTRYPOINT = f"""#!/usr/bin/env bash
case "${{TESTCASE:-}}" in handshake) ;; *) exit 127 ;; esac
case "$ROLE" in
  server) exec {sys.executable} -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], int(sys.argv[2]))); time.sleep(1)' \\
    "$SERVER_ADDR" "$SERVER_PORT" ;;
  client) echo "client gives up" >&2; exit 1 ;;
esac
"""


def _stack(root: Path, name: str = "tp", extra: str = "") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "meta.toml").write_text(f'name = "{name}"\nversion = "0"\ntestcases = ["handshake"]\n{extra}')
    ep = d / "entrypoint"
    ep.write_text(ENTRYPOINT)
    ep.chmod(0o755)
    return d


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        rc = main(["run", *argv])
    except SystemExit as e:  # argparse's own usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out + err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: --stack"),
        (["--stack", "NOWHERE"], "not a directory"),
        (["--stack", "TMP"], "no meta.toml"),
        (["--stack", "TP", "--against", "libudt,quic"], r"unknown stack(s) ['quic']"),
        (["--stack", "TP", "--cases", "transfer,wrapp"], r"unknown test case(s) ['wrapp']"),
        (["--stack", "TP", "--shard", "3/2"], "shard '3/2': needs 1 <= i <= N"),
        (["--stack", "TP", "--fail-on", "should"], "invalid choice: 'should'"),
        (["--stack", "TP", "--influx", "localhost:8086"], "give an http(s):// URL"),
    ],
)
def test_usage_errors_exit_2_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    tp = _stack(tmp_path / "adapters")
    subst = {"NOWHERE": str(tmp_path / "nowhere"), "TMP": str(tmp_path), "TP": str(tp)}
    rc, out = _run(capsys, *[subst.get(a, a) for a in argv], "--out", str(tmp_path / "out"))
    assert rc == 2
    assert message in out


def test_bad_meta_toml_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tp = _stack(tmp_path, extra="testcases = []\n")
    rc, out = _run(capsys, "--stack", str(tp))
    assert rc == 2 and f"{tp}/meta.toml: not valid TOML" in out


def test_a_name_clash_with_a_registry_stack_exits_2_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _stack(tmp_path, "libudt")
    rc, out = _run(capsys, "--stack", str(mine), "--list")
    assert rc == 2 and "two stacks named 'libudt'" in out and str(mine / "meta.toml") in out


def test_bad_per_stack_expectations_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tp = _stack(tmp_path)
    (tp / "expectations.toml").write_text('[[waiver]]\nmatch = "interop/*"\nstacks = ["tp"]\nkind = "finding"\n')
    rc, out = _run(capsys, "--stack", str(tp), "--list")
    assert rc == 2 and f"{tp}/expectations.toml: [[waiver]] #1" in out and "missing ['reason', 'since']" in out


def test_failed_build_exits_2_with_the_command_and_the_log_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tp = _stack(tmp_path, extra="build = \"echo 'cc: error: peer.c: no such file'; exit 1\"\n")
    rc, out = _run(capsys, "--stack", str(tp), "--against", "none", "--out", str(tmp_path / "out"))
    assert rc == 2
    assert "stack 'tp': build failed (exit 1)" in out and "cc: error: peer.c: no such file" in out
    assert (tmp_path / "out/build-tp.log").is_file()
    assert not (tmp_path / "out/results.json").exists(), "the suite does not start after a failed build"


def test_list_shows_the_cells_of_a_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tp = _stack(tmp_path)
    rc, out = _run(capsys, "--stack", str(tp), "--against", "libudt", "--cases", "handshake", "--list")
    assert rc == 0
    assert "3 interop cells:" in out and "server libudt × client tp: handshake" in out
    assert "server libudt × client libudt" not in out
    rc, out = _run(capsys, "--stack", str(tp), "--against", "libudt", "--list", "--shard", "2/2")
    assert rc == 0 and "(shard 2/2)" in out


def _suite(tmp_path: Path, tp: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "udtconf", "run", "--stack", str(tp), "--against", "none", "--cases", "handshake"]
    argv += ["--out", str(out), *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    results = out / "results.json"
    return p.returncode, json.loads(results.read_text()) if results.is_file() else {}, p.stdout + p.stderr


@pytest.mark.slow
def test_a_gating_failure_exits_1_and_a_stacks_own_waiver_turns_it_into_an_xfail(tmp_path: Path) -> None:
    tp = _stack(tmp_path)
    rc, doc, out = _suite(tmp_path, tp)
    assert rc == 1, out
    gate = doc["gate"]
    assert isinstance(gate, dict) and [o["key"] for o in gate["gating"]] == ["interop/tp/tp/handshake"]
    assert "client tp exit 1" in gate["gating"][0]["message"]
    junit = (tmp_path / "out/junit.xml").read_text()
    assert 'name="udtc_gate" value="gating"' in junit

    (tp / "expectations.toml").write_text(
        '[[waiver]]\nmatch = "interop/tp/tp/handshake"\nstacks = ["tp"]\nkind = "finding"\n'
        'reason = "our client reports failure after a complete send (issue 12)"\nsince = 2026-11-23\n'
    )
    rc, doc, out = _suite(tmp_path, tp)
    assert rc == 0, out
    gate = doc["gate"]
    assert isinstance(gate, dict) and not gate["gating"]
    assert [o["key"] for o in gate["waived"]] == ["interop/tp/tp/handshake"]
    entries = doc["entries"]
    assert isinstance(entries, list)
    (cell,) = [e for e in entries if e["key"] == "interop/tp/tp/handshake"]
    assert cell["status"] == "xfail"


@pytest.mark.slow
def test_shards_of_a_run_split_cells_from_probes(tmp_path: Path) -> None:
    tp = _stack(tmp_path)
    rc, doc, out = _suite(tmp_path, tp, "--shard", "2/2")
    assert rc == 0, out  # the failing interop cell is shard 1's
    entries = doc["entries"]
    assert isinstance(entries, list)
    assert entries and all(str(e["key"]).startswith(("adapter/tp/", "active/tp/")) for e in entries)
    rc, doc, out = _suite(tmp_path, tp, "--shard", "1/2")
    assert rc == 1, out
    entries = doc["entries"]
    assert isinstance(entries, list)
    assert {str(e["key"]).split("/")[0] for e in entries} <= {"interop", "wire", "codec"}


def test_options_become_the_suites_environment(tmp_path: Path) -> None:
    from udtconf.run import parser, run_env

    args = parser().parse_args(
        ["run", "--stack", str(tmp_path / "a"), "--stack", "b", "--against", "none", "--cases", "loss"]
        + ["--fail-on", "required", "--shard", "1/3", "--out", str(tmp_path / "o"), "--influx", "http://db:8086"]
    )
    env = run_env(args, {"STACKS": "libudt", "PATH": "/bin", "UDTC_SHARD": "2/2"})
    assert env["UDTC_STACK"] == os.pathsep.join([str(tmp_path / "a"), str(Path("b").absolute())])
    assert env["UDTC_AGAINST"] == "none" and env["CASES"] == "loss" and env["UDTC_GATE"] == "required"
    assert env["UDTC_SHARD"] == "1/3" and env["UDTC_RESULTS"] == str(tmp_path / "o")
    assert env["INFLUX"] == "http://db:8086" and env["PATH"] == "/bin"
    assert "STACKS" not in env, "the plain matrix's selection does not leak into a run"
    default = run_env(parser().parse_args(["run", "--stack", "x"]), {"UDTC_AGAINST": "stale"})
    # no --against: the selection picks each protocol's partners (libudt,udt-rs for UDT; test_selection)
    assert default["UDTC_GATE"] == "must" and "UDTC_AGAINST" not in default


def test_the_printed_matrix_marks_cases_skipped_after_a_failed_handshake() -> None:
    doc = {
        "entries": [
            {"key": "interop/b/libudt/handshake", "status": "failed", "message": "server b exit 101"},
            {"key": "interop/b/libudt/transfer", "status": "skipped", "message": "handshake failed for server b × …"},
            {"key": "interop/b/libudt/dgram", "status": "skipped", "message": "unsupported: b does not list dgram"},
        ]
    }
    lines = matrix_lines(doc, ["b"])
    assert "server b            × client libudt       ✕ handshake  – transfer  ? dgram" in lines[0]


def test_probes_and_limits_become_the_suites_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from udtconf.run import parser, run_env

    args = parser().parse_args(["run", "--stack", "x", "--probes", "none", "--mem-limit", "4G", "--cpu-limit", "60"])
    env = run_env(args, {"UDTC_PROBES": "stale"})
    assert env["UDTC_PROBES"] == "none" and env["UDTC_MEM_LIMIT"] == "4G" and env["UDTC_CPU_LIMIT"] == "60"
    assert env["UDTC_RUN_ID"], "the run's processes carry its id, so that a stopped run can find them"
    tp = _stack(tmp_path)
    rc, out = _run(capsys, "--stack", str(tp), "--against", "none", "--probes", "none", "--list")
    assert rc == 0 and "(probes: none)" in out
    rc, out = _run(capsys, "--stack", str(tp), "--mem-limit", "lots", "--list")
    assert rc == 2 and "--mem-limit: memory limit 'lots': write a size such as 2G" in out
    rc, out = _run(capsys, "--stack", str(tp), "--probes", "server/nothing-like-it", "--list")
    assert rc == 2 and "no probe of udt matches ['server/nothing-like-it']" in out


def test_a_probe_of_another_protocol_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 41: an FRTP probe given for a UDT stack was accepted, and nothing ran (exit 0)
    tp = _stack(tmp_path)
    rc, out = _run(capsys, "--stack", str(tp), "--against", "none", "--probes", "sender/zero-rate", "--list")
    assert rc == 2 and "sender/zero-rate is a probe of frtp, not of udt" in out
    listed = out.split("(probes: ")[1]
    assert "server/malformed-then-serve" in listed and "sender/" not in listed and "receiver/" not in listed


def test_list_names_the_probes_and_only_the_cells_both_stacks_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 41: --list printed no probe, and counted the cases (rendezvous, ...) tp does not claim
    tp = _stack(tmp_path)
    (tp / "meta.toml").write_text('name = "tp"\nversion = "0"\ntestcases = ["handshake", "transfer"]\n')
    rc, out = _run(capsys, "--stack", str(tp), "--against", "libudt", "--probes", "server/*", "--list")
    assert rc == 0
    assert "6 interop cells:" in out and "rendezvous" not in out
    assert "not run: 21 cells of a case one of their stacks does not claim" in out
    assert "    server/malformed-then-serve (TESTCASE=transfer)" in out
    assert "server/many-connections-one-port: skipped, tp does not claim multiconnect" in out
    assert "client/early-nak" not in out  # not selected by --probes


def test_every_option_of_run_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 41: --repeat and --flaky were in --help and nowhere in docs/conformance
    rc, out = _run(capsys, "--help")
    options = set(re.findall(r"--[a-z][a-z-]+", out)) - {"--help"}
    assert rc == 0 and {"--stack", "--repeat", "--flaky", "--list"} <= options
    docs = (Path(__file__).resolve().parents[2] / "docs" / "conformance" / "README.md").read_text()
    assert sorted(o for o in options if f"`{o}" not in docs and f"[{o}" not in docs) == []


def test_a_failed_handshake_hints_at_running_without_it() -> None:
    from udtconf.run import handshake_hint

    doc = {
        "entries": [{"key": "interop/b/b/transfer", "status": "skipped", "message": "handshake failed for server b"}]
    }
    assert handshake_hint(doc, ["handshake", "transfer", "loss"]) == (
        "hint: a pair's handshake failed, so its other cases were not run (fail-fast); to see them, run without "
        "handshake: --cases transfer,loss"
    )
    assert handshake_hint({"entries": []}, ["handshake"]) is None


@pytest.mark.slow
def test_a_case_the_stack_does_not_claim_stays_unsupported_after_a_failed_handshake(tmp_path: Path) -> None:
    from conftest import FailFastRunner
    from udtharness.stacks import load

    tp = load(_stack(tmp_path))  # claims handshake only; its client fails
    runner = FailFastRunner(tmp_path / "results", ("handshake", "transfer"))
    assert runner.run(tp, tp, "handshake").status == RunStatus.FAIL
    res = runner.run(tp, tp, "transfer")
    assert res.status == RunStatus.UNSUPPORTED and "does not list transfer" in res.reason


def test_a_cell_that_passes_sometimes_is_flaky_and_one_that_never_does_failed() -> None:
    from udtconf import flakiness

    def doc(statuses: dict[str, str], gating: list[str]) -> dict[str, object]:
        return {
            "entries": [{"key": k, "status": s} for k, s in statuses.items()],
            "gate": {"gating": [{"key": k} for k in gating]},
        }

    docs = [
        doc({"interop/a/b/loss": "failed", "interop/a/b/transfer": "passed", "wire/x": "failed"}, ["interop/a/b/loss"]),
        doc({"interop/a/b/loss": "passed", "interop/a/b/transfer": "passed", "wire/x": "failed"}, []),
        doc({"interop/a/b/loss": "passed", "interop/a/b/transfer": "passed", "wire/x": "failed"}, []),
    ]
    cells = {c.key: c for c in flakiness.cells(docs)}
    assert (cells["interop/a/b/loss"].kind, cells["interop/a/b/loss"].rate) == ("flaky", "2 of 3")
    assert cells["interop/a/b/transfer"].kind == "passed" and cells["wire/x"].kind == "failed"
    # The policy: a flaky gating cell is reported and does not fail the run, unless --flaky fail;
    # a cell that failed every time fails it when it gated (wire/x never gated: reported only).
    assert flakiness.summarise(docs, "pass")["gating"] == []
    assert flakiness.summarise(docs, "fail")["gating"] == ["interop/a/b/loss"]
    docs[1]["gate"] = docs[2]["gate"] = docs[0]["gate"]
    for d in docs[1:]:
        d["entries"][0]["status"] = "failed"  # type: ignore[index]
    assert flakiness.summarise(docs, "pass")["gating"] == ["interop/a/b/loss"]


@pytest.mark.slow
def test_repeats_report_a_cell_that_fails_only_the_first_time_as_flaky(tmp_path: Path) -> None:
    # udt-rs behind an entrypoint whose first handshake client gives up: the cell fails in the
    # first repeat and passes in the second.
    udt_rs = Path(__file__).resolve().parents[2] / "stacks" / "udt-rs"
    d = tmp_path / "flaky"
    d.mkdir()
    (d / "meta.toml").write_text('name = "flaky"\nprotocol = "udt"\nversion = "0"\ntestcases = ["handshake"]\n')
    count = tmp_path / "clients"
    (d / "entrypoint").write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$ROLE" = client ] && [ "$TESTCASE" = handshake ]; then\n'
        f'  echo x >> "{count}"; [ "$(wc -l < "{count}")" -eq 1 ] && exit 1\nfi\n'
        f'exec "{udt_rs}/entrypoint" "$@"\n'
    )
    (d / "entrypoint").chmod(0o755)
    rc, doc, out = _suite(tmp_path, d, "--probes", "none", "--repeat", "2")
    assert rc == 0, out
    verdict = json.loads((tmp_path / "out" / "flakiness.json").read_text())
    assert [c["key"] for c in verdict["flaky"]] == ["interop/flaky/flaky/handshake"], verdict
    assert verdict["flaky"][0]["rate"] == "1 of 2" and "flaky: interop/flaky/flaky/handshake passed 1 of 2" in out
    assert (tmp_path / "out" / "repeat-2" / "results.json").is_file()
    # The strict policy: the same flaky cell fails the run.
    count.unlink()
    rc, _, out = _suite(tmp_path, d, "--probes", "none", "--repeat", "2", "--flaky", "fail")
    assert rc == 1 and "1 gating cell(s) failed or were flaky" in out, out
