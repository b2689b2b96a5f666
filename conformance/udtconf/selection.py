"""What a conformance session runs: the stacks, the test cases, the matrix cells, and this
runner's shard of them.

Two ways to select, both from the environment (``python -m udtconf run`` sets it from its
command line):

* **The plain matrix** — ``STACKS`` (comma-separated names, default every conformance stack of
  the registry, ``STACKS_DIR`` included): every server × client × case among them, and every
  stack's active probes and adapter checks.
* **Stacks under test** — ``UDTC_STACK`` (os.pathsep-separated stack directories, anywhere on
  disk) paired with ``UDTC_AGAINST`` (comma-separated registry names, ``none`` for no partner;
  default: for each protocol of the stacks under test its partners in
  :data:`~udtharness.stacks.PARTNERS` that the registry holds — libudt and udt-rs for UDT, sabul
  and sabul-py for SABUL): only the cells that involve a stack under test (X × X, X × ref,
  ref × X; never ref × ref), and only the active probes and adapter checks of the stacks under
  test.

A stack is paired only with stacks of its own protocol, and a cell runs only the cases that
protocol defines (:data:`~udtharness.stacks.PROTOCOL_TESTCASES`): ``transfer`` is the UDT4 case
for UDT pairs and the SABUL case for SABUL pairs.

``CASES`` narrows the test cases (default: those of the selected stacks' protocols).
``UDTC_PROBES`` narrows the active probes: ``none``, or comma-separated probe ids or globs
(``server/*``), each matching a probe of the protocol of a stack whose probes run (a SABUL or
FRTP probe id names nothing a UDT stack runs: an error); the adapter checks always run.
``UDTC_SHARD=i/N`` keeps this runner's share: the units of work — one per cell (server, client,
case), so that a cell's interop run and its wire-rule and codec tests (which share the memoised
run) land together, and one per stack for its probes and adapter checks — sorted and dealt out
round-robin; shard i of N owns every N-th unit from the i-th. All N shards together run exactly
the selection.
"""

from __future__ import annotations

import fnmatch
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from udtharness.stacks import PARTNERS, TESTCASES, Stack, registry, search_path, select

if TYPE_CHECKING:
    from .active import Probe


class SelectionError(ValueError):
    """A selection the suite cannot run (unknown case, bad shard, conflicting variables); the
    message says what to change."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            i, n = (int(x) for x in text.strip().split("/"))
        except ValueError:
            raise SelectionError(f"shard {text!r}: write i/N, e.g. 2/4 (the 2nd of 4 runners)") from None
        if not 1 <= i <= n:
            raise SelectionError(f"shard {text!r}: needs 1 <= i <= N")
        return cls(i, n)

    def owns(self, unit: str, units: Sequence[str]) -> bool:
        """Whether ``unit`` (one of ``units``, in any order) falls to this shard; a unit not in
        ``units`` (a test outside the matrix) is placed by a hash of its name."""
        order = sorted(set(units))
        try:
            position = order.index(unit)
        except ValueError:
            position = zlib.crc32(unit.encode())
        return position % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def cell_unit(server: str, client: str, case: str) -> str:
    return f"cell/{server}/{client}/{case}"


def stack_unit(name: str) -> str:
    return f"stack/{name}"


def key_unit(key: str) -> str:
    """The unit of work a test key belongs to (see the module doc)."""
    kind, *rest = key.split("/")
    if kind in ("interop", "wire", "codec", "recovery") and len(rest) >= 3:
        return cell_unit(*rest[:3])
    if kind in ("active", "adapter") and rest:
        return stack_unit(rest[0])
    return f"test/{key}"


@dataclass(frozen=True)
class Selection:
    stacks: tuple[Stack, ...]  # every stack that plays a role in some cell, in selection order
    cases: tuple[str, ...]
    under_test: tuple[str, ...] = ()  # names; empty: the plain matrix (every stack is under test)
    shard: Shard | None = None
    registry: Mapping[str, Stack] = field(default_factory=dict, compare=False, repr=False)
    probes: tuple[str, ...] | None = None  # probe ids or globs; None: every probe

    def probe_selected(self, probe_id: str) -> bool:
        return self.probes is None or any(fnmatch.fnmatchcase(probe_id, p) for p in self.probes)

    def tested(self, name: str) -> bool:
        return not self.under_test or name in self.under_test

    @property
    def tested_stacks(self) -> list[Stack]:
        return [s for s in self.stacks if self.tested(s.name)]

    def all_cells(self) -> list[tuple[Stack, Stack, str]]:
        """(server, client, case) for every cell that involves a stack under test, all shards:
        stacks of one protocol, the cases of that protocol."""
        return [
            (s, c, case)
            for s in self.stacks
            for c in self.stacks
            if s.protocol == c.protocol and (self.tested(s.name) or self.tested(c.name))
            for case in self.cases
            if case in s.protocol_testcases
        ]

    @cached_property
    def units(self) -> tuple[str, ...]:
        cells = [cell_unit(s.name, c.name, case) for s, c, case in self.all_cells()]
        return tuple(sorted(cells + [stack_unit(s.name) for s in self.tested_stacks]))

    def owns(self, unit: str) -> bool:
        return self.shard is None or self.shard.owns(unit, self.units)

    def cells(self) -> list[tuple[Stack, Stack, str]]:
        """This shard's cells."""
        return [(s, c, k) for s, c, k in self.all_cells() if self.owns(cell_unit(s.name, c.name, k))]

    def probe_stacks(self) -> list[Stack]:
        """This shard's stacks for active probes and adapter checks."""
        return [s for s in self.tested_stacks if self.owns(stack_unit(s.name))]

    def needed_stacks(self) -> list[Stack]:
        """The stacks this shard runs at all (the ones whose builds it needs)."""
        names = {n for s, c, _ in self.cells() for n in (s.name, c.name)} | {s.name for s in self.probe_stacks()}
        return [s for s in self.stacks if s.name in names]


def parse_cases(text: str | None) -> tuple[str, ...]:
    if not text:
        return TESTCASES
    cases = list(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
    unknown = [c for c in cases if c not in TESTCASES]
    if unknown:
        raise SelectionError(f"unknown test case(s) {unknown}; known: {', '.join(TESTCASES)}")
    return tuple(cases)


def parse_probes(text: str | None, protocols: Iterable[str]) -> tuple[str, ...] | None:
    """``UDTC_PROBES``: None (every probe), () for ``none``, else the ids and globs, each of which
    must match some probe of ``protocols`` (those of the stacks whose probes run)."""
    if text is None or not text.strip():
        return None
    if text.strip() == "none":
        return ()
    wanted = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    protocols = list(dict.fromkeys(protocols))
    known = [p.id for protocol in protocols for p in protocol_probes(protocol)]
    unknown = [w for w in wanted if not fnmatch.filter(known, w)]
    if unknown:
        whose = ""
        for w in unknown:
            theirs = [o for o in PROBING_PROTOCOLS if fnmatch.filter([p.id for p in protocol_probes(o)], w)]
            if theirs:
                whose += f"; {w} is a probe of {'/'.join(theirs)}, not of {'/'.join(protocols)}"
        raise SelectionError(
            f"no probe of {'/'.join(protocols) or 'the stacks under test'} matches {unknown}{whose}; write 'none', "
            f"or probe ids or globs such as 'server/*' (probes: {', '.join(sorted(set(known))) or 'none'})"
        )
    return wanted


# The protocols with an active tester (udtconf.<protocol>.tester).
PROBING_PROTOCOLS = ("udt", "sabul", "frtp")


def protocol_probes(protocol: str) -> list[Probe[Any]]:
    """The active probes of ``protocol``, in the order its tester declares them ([] for tcp)."""
    from .frtp.tester import PROBES as FRTP  # the testers are heavy: only when probes are named
    from .sabul.tester import PROBES as SABUL
    from .udt.tester import PROBES as UDT

    probes: dict[str, Sequence[Probe[Any]]] = {"udt": UDT, "sabul": SABUL, "frtp": FRTP}
    return list(probes.get(protocol, ()))


def _narrow(cases: tuple[str, ...], stacks: Sequence[Stack], explicit: bool) -> tuple[str, ...]:
    """Without CASES: only the cases of the selected stacks' protocols (a UDT run lists no
    SABUL ``empty``)."""
    if explicit or not stacks:
        return cases
    return tuple(c for c in cases if any(c in s.protocol_testcases for s in stacks))


def from_env(environ: Mapping[str, str] = os.environ) -> Selection:
    """The selection the environment asks for; a :class:`SelectionError` or a
    :class:`~udtharness.stacks.StackError` says what to change when it cannot be run."""
    paths = [Path(p) for p in environ.get("UDTC_STACK", "").split(os.pathsep) if p.strip()]
    cases = parse_cases(environ.get("CASES"))
    explicit = bool(environ.get("CASES"))
    shard = Shard.parse(environ["UDTC_SHARD"]) if environ.get("UDTC_SHARD") else None
    reg = registry(search_path(environ), stacks=paths)
    if not paths:
        if environ.get("UDTC_AGAINST"):
            raise SelectionError(
                "UDTC_AGAINST pairs the stacks under test (UDTC_STACK=PATH) with others; set UDTC_STACK"
            )
        chosen = tuple(select(reg, environ.get("STACKS") or None))
        probes = parse_probes(environ.get("UDTC_PROBES"), (s.protocol for s in chosen))
        return Selection(chosen, _narrow(cases, chosen, explicit), shard=shard, registry=reg, probes=probes)
    if environ.get("STACKS"):
        raise SelectionError(
            "STACKS selects the plain matrix; with stacks under test (UDTC_STACK / --stack) name their "
            "partners in UDTC_AGAINST (--against) instead"
        )
    by_path = {s.path.resolve(): s for s in reg.values()}
    tested = [by_path[p.expanduser().resolve()] for p in paths]
    not_conformance = [s.name for s in tested if not s.conformance]
    if not_conformance:
        raise SelectionError(f"stack(s) {not_conformance} list no conformance test cases in their meta.toml")
    against_text = environ.get("UDTC_AGAINST") or default_partners(tested, reg)
    against = [] if against_text.strip() == "none" else select(reg, against_text)
    stacks = list({s.name: s for s in [*tested, *against]}.values())
    probes = parse_probes(environ.get("UDTC_PROBES"), (s.protocol for s in tested))
    return Selection(tuple(stacks), _narrow(cases, stacks, explicit), tuple(s.name for s in tested), shard, reg, probes)


def default_partners(tested: list[Stack], reg: Mapping[str, Stack]) -> str:
    """The ``--against`` default: for each protocol of the stacks under test, its partners of
    :data:`~udtharness.stacks.PARTNERS` that the registry holds (``none`` if there are none)."""
    protocols = dict.fromkeys(s.protocol for s in tested)
    names = [n for p in protocols for n in PARTNERS.get(p, ()) if n in reg and reg[n].conformance]
    return ",".join(names) or "none"
