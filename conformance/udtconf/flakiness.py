"""A cell's pass rate over repeated runs, and the gate's policy for a cell that passes only
sometimes (``python -m udtconf run --repeat N``, ``make conformance REPEAT=N``).

Some cases fail at random by nature (a lossy interop case whose timing decides whether a
retransmission is in time). quic-interop-runner lists such cases as flaky by hand; here the
suite measures it: the same selection runs N times, and each test key's outcomes give its pass
rate. A key is

* **passed** when it passed in every repeat it ran in,
* **failed** when it failed in every one,
* **flaky** when it passed in some and failed in others (its rate, e.g. 3 of 5, is reported),
* **skipped** when it never ran.

The gate's policy over repeats: a key that gated (udtconf.gate) in **every** repeat fails the
run (exit 1), as one run's failure does; a **flaky** gating key is reported with its rate and
does not fail the run, unless ``--flaky fail``, which counts any failure (the strict policy for
a stack's release). A key waived in a repeat counts as not passed there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from .report import FAILED, PASSED

Class = Literal["passed", "failed", "flaky", "skipped"]
POLICIES = ("pass", "fail")  # what a flaky gating key does to the run's exit


@dataclass(frozen=True)
class Cell:
    key: str
    statuses: tuple[str, ...]  # each repeat's, "" where the key did not run
    gating: tuple[bool, ...]  # each repeat: whether its failure gated there

    @property
    def passes(self) -> int:
        return sum(s in PASSED for s in self.statuses)

    @property
    def runs(self) -> int:
        return sum(s in PASSED + FAILED for s in self.statuses)

    @property
    def kind(self) -> Class:
        if self.runs == 0:
            return "skipped"
        if self.passes == self.runs:
            return "passed"
        return "failed" if self.passes == 0 else "flaky"

    @property
    def rate(self) -> str:
        return f"{self.passes} of {self.runs}"


def _entries(doc: Mapping[str, object]) -> dict[str, str]:
    raw = doc.get("entries")
    return {str(e["key"]): str(e["status"]) for e in raw if isinstance(e, dict)} if isinstance(raw, list) else {}


def _gating(doc: Mapping[str, object]) -> set[str]:
    g = doc.get("gate")
    items = g.get("gating", []) if isinstance(g, dict) else []
    return {str(o["key"]) for o in items if isinstance(o, dict)}


def cells(docs: Sequence[Mapping[str, object]]) -> list[Cell]:
    """Every key of the repeats' results.json documents, in first-seen order."""
    per = [_entries(d) for d in docs]
    gating = [_gating(d) for d in docs]
    keys = list(dict.fromkeys(k for p in per for k in p))
    return [Cell(k, tuple(p.get(k, "") for p in per), tuple(k in g for g in gating)) for k in keys]


def gates(cell: Cell, policy: str) -> bool:
    """Whether ``cell`` fails the run over the repeats under ``policy`` (POLICIES)."""
    if not any(cell.gating):
        return False
    if cell.kind == "failed":
        return True
    return cell.kind == "flaky" and policy == "fail"


def summarise(docs: Sequence[Mapping[str, object]], policy: str, out: Path | None = None) -> dict[str, object]:
    """The repeats' verdict (``flakiness.json`` in ``out`` when given)."""
    cs = cells(docs)
    doc: dict[str, object] = {
        "repeats": len(docs),
        "policy": policy,
        "counts": {k: sum(c.kind == k for c in cs) for k in ("passed", "failed", "flaky", "skipped")},
        "gating": [c.key for c in cs if gates(c, policy)],
        "flaky": [asdict(c) | {"rate": c.rate} for c in cs if c.kind == "flaky"],
        "failed": [c.key for c in cs if c.kind == "failed"],
    }
    if out is not None:
        (out / "flakiness.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return doc


def lines(doc: Mapping[str, object]) -> list[str]:
    """The repeats' verdict as text for the end of a run."""
    counts = doc["counts"]
    assert isinstance(counts, dict)
    out = [
        f"over {doc['repeats']} repeats: {counts['passed']} passed every time, {counts['failed']} failed every "
        f"time, {counts['flaky']} flaky, {counts['skipped']} never ran (flaky gating cells: "
        f"{'fail' if doc['policy'] == 'fail' else 'reported, do not fail'} the run)"
    ]
    flaky = doc["flaky"]
    assert isinstance(flaky, list)
    out += [f"  flaky: {c['key']} passed {c['rate']}" for c in flaky[:30]]
    return out


__all__ = ["Cell", "POLICIES", "cells", "gates", "lines", "summarise"]
