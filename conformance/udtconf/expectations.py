"""Expectations: which tests CI requires, and which failures are waived — and for which stacks.

``conformance/expectations.toml`` holds the suite's own; a stack may keep an
``expectations.toml`` of the same format next to its ``meta.toml``, which applies only to tests
involving that stack (:func:`for_stacks`). A file has

* ``required`` — globs over test keys (``interop/<server>/<client>/<case>``,
  ``wire/<server>/<client>/<case>/<rule>``, ``codec/…``, ``recovery/<server>/<client>/loss``
  (:mod:`udtconf.udt.recovery`), ``active/<stack>/<probe>``,
  ``adapter/<stack>/<check>``) that get the ``required`` marker and gate under
  ``UDTC_GATE=required`` (:mod:`udtconf.gate`);
* ``[[waiver]]`` entries — a failure they cover becomes an expected failure (XFAIL), shown in
  the matrix with its reason, never silently passed. Each names the ``stacks`` it was observed
  on, a ``kind`` (``finding``: the stack deviates; ``flaky``: a timing check this host cannot
  always meet), a ``reason`` and the date it was recorded (``since``); ``cases`` optionally
  narrows it to some test cases (for an active key: probe ids, for an adapter key: checks).

A waiver covers a failure only when every stack *blamed* for it is one of its ``stacks``: for a
wire rule the stacks the violations name (the party the rule constrains, UDT4.md's sides mapped
to the cell's stacks), otherwise every stack in the test's key. So a waiver recorded for libudt
never turns a third party's failure of the same rule, in a cell shared with libudt, into an XFAIL.
"""

from __future__ import annotations

import datetime
import fnmatch
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from udtharness.stacks import Stack

from . import CONFORMANCE_DIR

DEFAULT_PATH = CONFORMANCE_DIR / "expectations.toml"
KINDS = ("finding", "flaky")
_WAIVER_KEYS = {"match", "stacks", "cases", "kind", "reason", "since"}


class ExpectationsError(ValueError):
    """An expectations file that cannot be used; the message names the file and the entry."""


def key_stacks(key: str) -> frozenset[str]:
    """The stacks a test key involves: server and client of a cell, or the one stack."""
    kind, *rest = key.split("/")
    if kind in ("interop", "wire", "codec", "recovery"):
        return frozenset(rest[:2])
    return frozenset(rest[:1])


def key_case(key: str) -> str:
    """The test case of a cell key; the probe id of an active key; the check of an adapter key."""
    kind, *rest = key.split("/")
    if kind in ("interop", "wire", "codec", "recovery"):
        return rest[2] if len(rest) > 2 else ""
    return "/".join(rest[1:])


@dataclass(frozen=True)
class Required:
    glob: str
    scope: str | None = None  # a per-stack file's stack: applies only to keys involving it

    def matches(self, key: str) -> bool:
        return (self.scope is None or self.scope in key_stacks(key)) and fnmatch.fnmatchcase(key, self.glob)


@dataclass(frozen=True)
class Waiver:
    match: str  # glob over test keys
    stacks: frozenset[str]  # observed on: covers a failure only if every blamed stack is listed
    kind: str  # finding | flaky
    reason: str
    since: datetime.date
    cases: frozenset[str] | None = None  # None: every case
    scope: str | None = None  # a per-stack file's stack
    source: str = ""  # file and entry, for messages

    def covers(self, key: str, blamed: Iterable[str] = ()) -> bool:
        """Whether a failure of ``key`` blamed on ``blamed`` (default: every stack of the key) is waived."""
        stacks = key_stacks(key)
        guilty = frozenset(blamed) or stacks
        return (
            fnmatch.fnmatchcase(key, self.match)
            and (self.cases is None or key_case(key) in self.cases)
            and (self.scope is None or self.scope in stacks)
            and guilty <= self.stacks
        )

    def describe(self) -> str:
        return f"waived {self.kind} on {', '.join(sorted(self.stacks))} since {self.since.isoformat()}: {self.reason}"


@dataclass(frozen=True)
class Expectations:
    required: tuple[Required, ...] = ()
    waivers: tuple[Waiver, ...] = ()

    def is_required(self, key: str) -> bool:
        return any(r.matches(key) for r in self.required)

    def waiver_for(self, key: str, blamed: Iterable[str] = ()) -> Waiver | None:
        blamed = tuple(blamed)
        return next((w for w in self.waivers if w.covers(key, blamed)), None)

    def __add__(self, other: Expectations) -> Expectations:
        return Expectations(self.required + other.required, self.waivers + other.waivers)


def load(path: Path = DEFAULT_PATH, scope: str | None = None) -> Expectations:
    """Reads and checks an expectations file; ``scope``: the stack a per-stack file belongs to."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ExpectationsError(f"{path}: cannot read: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ExpectationsError(f"{path}: not valid TOML: {e}") from e
    if "known" in data:
        raise ExpectationsError(
            f"{path}: [[known]] entries are now [[waiver]] entries, each with the stacks it was observed on "
            '(stacks = ["…"]) and the date it was recorded (since = YYYY-MM-DD); see docs/conformance/README.md'
        )
    unknown = sorted(set(data) - {"required", "waiver"})
    if unknown:
        raise ExpectationsError(f"{path}: unknown key(s) {unknown}; an expectations file has 'required' and [[waiver]]")
    required = data.get("required", [])
    if not (isinstance(required, list) and all(isinstance(g, str) for g in required)):
        raise ExpectationsError(f"{path}: 'required' must be a list of glob strings, not {required!r}")
    entries = data.get("waiver", [])
    if not isinstance(entries, list):
        raise ExpectationsError(f"{path}: 'waiver' must be an array of tables ([[waiver]])")
    waivers = tuple(_waiver(path, i, e, scope) for i, e in enumerate(entries, 1))
    return Expectations(tuple(Required(g, scope) for g in required), waivers)


def _waiver(path: Path, index: int, entry: object, scope: str | None) -> Waiver:
    where = f"{path}: [[waiver]] #{index}"
    if not isinstance(entry, Mapping):
        raise ExpectationsError(f"{where}: not a table")
    if isinstance(entry.get("match"), str):
        where += f" (match = {entry['match']!r})"
    unknown = sorted(set(entry) - _WAIVER_KEYS)
    if unknown:
        raise ExpectationsError(f"{where}: unknown key(s) {unknown}; known: {sorted(_WAIVER_KEYS)}")
    missing = sorted({"match", "stacks", "kind", "reason", "since"} - set(entry))
    if missing:
        raise ExpectationsError(
            f"{where}: missing {missing}; a waiver names the test keys it covers (match), the stacks it was "
            "observed on (stacks), finding|flaky (kind), why (reason) and when it was recorded (since = YYYY-MM-DD)"
        )
    match, kind, reason = entry["match"], entry["kind"], entry["reason"]
    if not isinstance(match, str) or not match:
        raise ExpectationsError(f"{where}: 'match' must be a glob string")
    if kind not in KINDS:
        raise ExpectationsError(f"{where}: kind {kind!r} is not one of {list(KINDS)}")
    if not isinstance(reason, str) or not reason.strip():
        raise ExpectationsError(f"{where}: 'reason' must say why (a non-empty string)")
    stacks = _names(where, entry, "stacks")
    if not stacks:
        raise ExpectationsError(f"{where}: 'stacks' must name at least one stack the waiver was observed on")
    cases = _names(where, entry, "cases") if "cases" in entry else None
    return Waiver(
        match,
        stacks,
        kind,
        " ".join(reason.split()),
        _date(where, entry["since"]),
        cases,
        scope,
        where,
    )


def _names(where: str, entry: Mapping[str, object], key: str) -> frozenset[str]:
    value = entry[key]
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ExpectationsError(f"{where}: '{key}' must be a list of names, not {value!r}")
    return frozenset(value)


def _date(where: str, value: object) -> datetime.date:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise ExpectationsError(f"{where}: 'since' must be a date (since = 2026-11-23), not {value!r}")


def for_stacks(stacks: Iterable[Stack], path: Path = DEFAULT_PATH) -> Expectations:
    """The suite's expectations plus each stack's own ``expectations.toml`` (if it has one),
    scoped to the tests that involve that stack."""
    exp = load(path)
    for s in stacks:
        own = s.path / "expectations.toml"
        if own.is_file():
            exp = exp + load(own, scope=s.name)
    return exp
