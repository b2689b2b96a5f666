"""The N×M interop matrix: every server stack × client stack × test case, on loopback.

A failed run says why in one line (its diagnosis' headline) and keeps the whole diagnosis
(udtconf.diagnosis: crash lines, log tails, stats; udtconf.udt.diagnosis: what the capture shows) for the report."""

from __future__ import annotations

import pytest
from udtconf.runner import InteropRunner, RunStatus
from udtharness.stacks import Stack
from verdicts import RecordProperty

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def test_matrix(matrix_cell: tuple[Stack, Stack, str], runner: InteropRunner, record_property: RecordProperty) -> None:
    server, client, case = matrix_cell
    res = runner.run(server, client, case)
    record_property("udtc_logdir", str(res.logdir))
    record_property("udtc_pcap", str(res.pcap or ""))
    record_property("udtc_verdict", res.reason)
    if res.diagnosis:
        record_property("udtc_detail", res.diagnosis.lines())
    if res.status in (RunStatus.SKIPPED, RunStatus.UNSUPPORTED):
        pytest.skip(f"{res.status}: {res.reason}")
    if res.status == RunStatus.INCONCLUSIVE:  # shown as ?, with the reason: never a ✓
        pytest.skip(res.reason)
    if res.status != RunStatus.PASS:
        pytest.fail(
            f"{case}: server {server.name} × client {client.name}: {res.reason} (logs: {res.logdir})", pytrace=False
        )
