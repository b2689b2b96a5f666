"""Wire rules, whatever the protocol: what a rule is, what it yields, and its registry.

Each protocol declares its rules on this machinery, keyed to its spec: UDT4's in
:mod:`udtconf.udt.checks` (``docs/spec/UDT4.md``), SABUL's in :mod:`udtconf.sabul.checks`
(``docs/spec/SABUL.md``), FRTP's in :mod:`udtconf.frtp.checks` (``docs/spec/FRTP.md``).

A :class:`Rule` has a case id (``<protocol>/<section>/<name>``), the requirement it checks
(quoted or closely paraphrased from the spec), a grade (MUST fails the test; SHOULD is reported
as a warning-level failure that expectations may waive) and the test cases it applies to.
Running a rule on what the capture shows yields :class:`Violation` s, or raises
:class:`Inconclusive` when the capture cannot decide.

A violation names the *party the rule constrains*: the side (and so the stack) that failed to
do what the rule requires, which is not always the side whose packet shows the symptom. Its
frame is the one where the symptom shows, or none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .registry import Registry


@dataclass(frozen=True)
class Violation:
    party: str  # "client" | "server": the side the rule constrains, which failed to do what it requires
    frame: int | None  # where the symptom shows (not necessarily a packet the party sent)
    message: str

    def render(self, stacks: dict[str, str]) -> str:
        where = f"frame {self.frame}" if self.frame is not None else "capture"
        return f"[{stacks.get(self.party, self.party)} as {self.party}] {where}: {self.message}"


class Inconclusive(Exception):
    """The capture does not contain what the rule needs (e.g. no paced sending)."""


S = TypeVar("S")  # what a rule reads: a UDT connection, a SABUL session
C = TypeVar("C")  # the test case's context


@dataclass(frozen=True)
class Rule(Generic[S, C]):
    """A wire rule of any protocol of the family (:class:`udtconf.sabul.checks.SabulRule` adds the side)."""

    id: str
    section: str
    grade: str  # "MUST" | "SHOULD"
    requirement: str
    fn: Callable[[S, C], Iterable[Violation]]
    cases: frozenset[str]

    def run(self, conn: S, ctx: C) -> list[Violation]:
        return list(self.fn(conn, ctx))


R = TypeVar("R", bound=Rule[Any, Any])


class Rules(Registry[R]):
    """A protocol's rules, in declaration order."""

    def for_case(self, testcase: str) -> list[R]:
        return [r for r in self if testcase in r.cases]
