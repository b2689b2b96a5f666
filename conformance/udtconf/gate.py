"""The gate: which failures decide a conformance run's exit status (``UDTC_GATE``, ``--fail-on``).

Every failure is reported (JUnit, results.json, matrix.html); the gate only decides which of
them fail the run:

* ``must`` — what a stack cannot get wrong and interoperate: interop cells (data intact, both
  roles exit 0), adapter checks (the contract), active probes (a crash, hang or lost data under
  crafted input), and wire rules graded MUST (UDT4.md's "must"). SHOULD rules and the codec
  cross-check (our decoder against Wireshark's, a check of the suite itself) are reported only.
* ``required`` — the tests matched by a ``required`` glob of the expectations files.
* ``all`` — every failure.

Tests outside the matrix (the suite's own unit tests, which have no key) always gate. A waived
failure (:mod:`udtconf.expectations`) is an XFAIL, not a failure, under every gate.
The default is ``all`` for ``pytest conformance`` and ``must`` for ``python -m udtconf run``.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from .expectations import Expectations

GATES = ("must", "required", "all")
MUST_KINDS = ("interop", "adapter", "active")


class GateError(ValueError):
    pass


def mode(environ: Mapping[str, str] = os.environ) -> str:
    value = environ.get("UDTC_GATE") or "all"
    if value not in GATES:
        raise GateError(f"UDTC_GATE={value!r}: use one of {', '.join(GATES)} (docs/conformance/README.md, 'The gate')")
    return value


def gates(gate: str, key: str | None, grade: str, exp: Expectations) -> bool:
    """Whether a failure of test ``key`` (``None``: a test outside the matrix; ``grade``: a wire
    rule's MUST/SHOULD, else empty) fails the run under ``gate``."""
    if gate == "all" or key is None:
        return True
    if gate == "required":
        return exp.is_required(key)
    kind = key.split("/", 1)[0]
    if kind == "wire":
        return grade == "MUST"
    return kind in MUST_KINDS


class Verdict(StrEnum):
    """What the gate made of a failed test (its value names the list in results.json)."""

    GATING = "gating"  # fails the run
    REPORTED = "reported"  # failed; does not fail the run under this gate
    WAIVED = "waived"  # an expected failure of the stacks its waiver names


@dataclass
class Outcome:
    """A failed or waived test as the gate saw it."""

    key: str  # the test key, or the pytest node id for a test outside the matrix
    verdict: Verdict
    message: str


def summary(gate: str, outcomes: Sequence[Outcome]) -> dict[str, object]:
    """The ``gate`` section of results.json."""
    by = {str(v): [asdict(o) for o in outcomes if o.verdict == v] for v in Verdict}
    return {"mode": gate, "passed": not by[Verdict.GATING], **by}


def annotate(outdir: Path, gate: str, outcomes: Sequence[Outcome]) -> None:
    """Adds the gate to the session's results.json (key ``gate``) and matrix.html (a section at
    the end), when the report wrote them."""
    data = summary(gate, outcomes)
    results = outdir / "results.json"
    if results.is_file():
        doc = json.loads(results.read_text())
        doc["gate"] = data
        results.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    matrix = outdir / "matrix.html"
    if matrix.is_file():
        with open(matrix, "a") as f:
            f.write("\n" + render_html(gate, outcomes))


def render_html(gate: str, outcomes: Sequence[Outcome]) -> str:
    gating = [o for o in outcomes if o.verdict == Verdict.GATING]
    head = (
        f"<h2 id='gate'>Gate: {html.escape(gate)} — "
        + (f"<span class='bad'>failed ({len(gating)} gating)</span>" if gating else "<span class='ok'>passed</span>")
        + "</h2>"
    )
    if not outcomes:
        return head + "<p>No failures.</p>"
    css = {Verdict.GATING: "bad", Verdict.REPORTED: "unk", Verdict.WAIVED: "known"}
    rows = [
        f"<tr><td><code>{html.escape(o.key)}</code></td><td class='{css[o.verdict]}'>{o.verdict}</td>"
        f"<td>{html.escape(o.message)}</td></tr>"
        for o in sorted(outcomes, key=lambda o: list(css).index(o.verdict))
    ]
    return (
        head + f"<p>gating: fails the run under UDTC_GATE={html.escape(gate)}; reported: failed, does not gate; "
        "waived: an expected failure of the stacks its waiver names.</p>"
        + "<table><tr><th>test</th><th>verdict</th><th>message</th></tr>"
        + "".join(rows)
        + "</table>"
    )
