"""``conformance/expectations.toml``: required tests (CI gate) and known findings/flakes."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .stacks import CONFORMANCE_DIR


@dataclass(frozen=True)
class Known:
    match: str
    kind: str  # "finding" | "flaky"
    reason: str


@dataclass(frozen=True)
class Expectations:
    required: tuple[str, ...]
    known: tuple[Known, ...]

    def is_required(self, key: str) -> bool:
        return any(fnmatch.fnmatchcase(key, g) for g in self.required)

    def known_for(self, key: str) -> Known | None:
        return next((k for k in self.known if fnmatch.fnmatchcase(key, k.match)), None)


def load(path: Path = CONFORMANCE_DIR / "expectations.toml") -> Expectations:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    known = tuple(
        Known(k["match"], k.get("kind", "finding"), " ".join(k.get("reason", "").split()))
        for k in data.get("known", [])
    )
    for k in known:
        if k.kind not in ("finding", "flaky"):
            raise ValueError(f"{path}: known entry {k.match} has kind {k.kind!r}, expected finding|flaky")
    return Expectations(tuple(data.get("required", [])), known)
