"""The HTML matrix and JSON from synthetic entries."""

from __future__ import annotations

import json
from pathlib import Path

from udtconf.report import Entry, Status, render_html, write


def test_matrix_marks_and_links(tmp_path: Path) -> None:
    entries = [
        Entry(
            "interop/a/a/transfer",
            "n1",
            Status.PASSED,
            logdir=str(tmp_path / "runs/a__a__transfer"),
            pcap=str(tmp_path / "runs/a__a__transfer/capture.pcap"),
        ),
        Entry("interop/a/b/transfer", "n2", Status.FAILED, message="output differs"),
        Entry("interop/b/a/transfer", "n3", Status.SKIPPED, message="not built"),
        Entry(
            "wire/a/a/transfer/udt4/5.3/ack-forms",
            "n4",
            Status.FAILED,
            grade="MUST",
            section="5.3",
            violations=["[a as server] frame 7: light ACK with additional info 3"],
        ),
    ]
    page = render_html(entries, tmp_path)
    assert "<th>a</th><th>b</th>" in page
    assert "href='runs/a__a__transfer/capture.pcap'" in page
    # a MUST violation turns a passing transfer into ✕
    assert "class='bad' href='runs/a__a__transfer'" in page
    assert "frame 7: light ACK with additional info 3" in page
    assert "title='not built'>?" in page
    write(entries, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["summary"] == {"passed": 1, "failed": 2, "skipped": 1}
    assert [e["status"] for e in data["entries"]] == ["passed", "failed", "skipped", "failed"]  # the values


def test_failed_run_shows_its_verdict_and_diagnosis_not_pytest_text(tmp_path: Path) -> None:
    run = str(tmp_path / "runs/a__b__wrap")
    e = Entry(
        "interop/a/b/wrap",
        "n1",
        Status.FAILED,
        message="Failed: wrap: server a × client b: output differs … assert 'fail' == 'pass'",
        logdir=run,
        verdict="output differs (144144 vs 1048576 bytes); receiver (server a) stopped ACKing at 0x7fffffff",
        detail=["client b log, last 1 lines:", "  thread 'main' panicked at src/ack.rs:9:5: <16 bytes>"],
    )
    page = render_html([e], tmp_path)
    assert "title='output differs (144144 vs 1048576 bytes); receiver (server a) stopped ACKing at 0x7fffffff'" in page
    assert "assert &#x27;fail&#x27;" not in page
    assert "<h2>Failed runs</h2>" in page and "href='runs/a__b__wrap'><code>a/b/wrap</code></a>" in page
    assert "panicked at src/ack.rs:9:5: &lt;16 bytes&gt;</pre></details>" in page


def test_active_rows_have_a_verdict_details_and_links_to_log_and_capture(tmp_path: Path) -> None:
    probe_dir = tmp_path / "active/x/client_medium-ack"
    e = Entry(
        "active/x/client/medium-ack",
        "n1",
        Status.FAILED,
        message="Failed: x (client) client/medium-ack [UDT4.md §5.3]: … (log: …)",
        section="5.3, 8.6",
        logdir=str(probe_dir),
        pcap=str(probe_dir / "probe.pcap"),
        log=str(probe_dir / "probe.log"),
        verdict="fail — stack crashed (killed by SIGSEGV)",
        detail=["2 medium ACKs: 0 new packets, 0 ACK2s in reply"],
    )
    page = render_html([e], tmp_path)
    row = page[page.index("<h2>Active tester</h2>") :]
    assert "<a href='active/x/client_medium-ack/probe.log'>log</a>" in row
    assert "<a href='active/x/client_medium-ack/probe.pcap'>pcap</a>" in row
    assert "fail — stack crashed (killed by SIGSEGV)<details>" in row
    assert "Failed:" not in row


def test_entry_reads_verdict_detail_and_log_from_test_properties() -> None:
    props = {"udtc_key": "active/x/p", "udtc_verdict": "pass — ok", "udtc_detail": ["n1", "n2"], "udtc_log": "/l"}
    e = Entry.from_props(props, "id", Status.PASSED, "")
    assert (e.text, e.detail, e.log) == ("pass — ok", ["n1", "n2"], "/l")
    xfail = Entry("interop/a/b/c", "id", Status.XFAIL, message="known finding: race", verdict="output differs")
    assert xfail.text == "output differs — known finding: race"


def test_cases_skipped_after_a_failed_handshake_are_marked_apart_from_unsupported(tmp_path: Path) -> None:
    why = "skipped: handshake failed for server a × client b (see runs/a__b__handshake): server a exit 101"
    entries = [
        Entry("interop/a/b/handshake", "n1", Status.FAILED, message="server a exit 101"),
        Entry("interop/a/b/transfer", "n2", Status.SKIPPED, message=why),
        Entry("interop/a/b/dgram", "n3", Status.SKIPPED, message="unsupported: b meta.toml does not list dgram"),
    ]
    page = render_html(entries, tmp_path)
    assert f"title='{why}'>–</span> transfer" in page
    assert "does not list dgram'>?</span> dgram" in page


def test_an_unselected_pair_or_case_shows_nothing_an_unclaimed_case_a_question_mark(tmp_path: Path) -> None:
    entries = [
        Entry("interop/tp/tp/handshake", "n1", Status.FAILED, message="client tp exit 1"),
        Entry("interop/tp/ref/handshake", "n2", Status.PASSED),
        Entry("interop/ref/tp/handshake", "n3", Status.PASSED),
        Entry("interop/tp/tp/mss", "n4", Status.SKIPPED, message="unsupported: tp meta.toml does not list mss"),
    ]
    page = render_html(entries, tmp_path)
    # server ref × client ref was never selected (only cells with the stack under test run)
    ref_row = page.split("<tr><th>ref</th>")[1].split("</tr>")[0]
    assert ref_row.startswith("\n<td></td>"), ref_row  # columns: ref, tp
    assert "not supported" not in ref_row and "?" not in ref_row
    assert "title='unsupported: tp meta.toml does not list mss'>?</span> mss" in page
    # a case of no pair's (mss for tp × ref) is not listed under that pair
    tp_row = page.split("<tr><th>tp</th>")[1].split("</tr>")[0]
    assert tp_row.count("</span> mss") == 1
