"""The HTML matrix and JSON from synthetic entries."""

from __future__ import annotations

import json
from pathlib import Path

from udtconf.report import Entry, render_html, write


def test_matrix_marks_and_links(tmp_path: Path) -> None:
    entries = [
        Entry(
            "interop/a/a/transfer",
            "n1",
            "passed",
            logdir=str(tmp_path / "runs/a__a__transfer"),
            pcap=str(tmp_path / "runs/a__a__transfer/capture.pcap"),
        ),
        Entry("interop/a/b/transfer", "n2", "failed", message="output differs"),
        Entry("interop/b/a/transfer", "n3", "skipped", message="not built"),
        Entry(
            "wire/a/a/transfer/udt4/5.3/ack-forms",
            "n4",
            "failed",
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
