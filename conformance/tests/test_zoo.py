"""The suite's own conformance test: the zoo of misbehaving stacks (tests/zoo, issue 27) against
both reference stacks, each defect in the role and case that show it.

Every cell is run the way the matrix runs it (udtconf.udt.interop, capture included) and judged the
way the suite judges it: the interop run's one-line reason and the wire rules on its capture.
For each cell the test asserts the expected verdict of the default gate, and that the suite
names the zoo stack:

* a failing cell's one-line reason names the zoo stack first (its lead), and no clause of it
  puts a fault on a reference stack (:data:`BLAME`);
* no wire-rule violation is charged to a reference stack, except a reference's own finding
  that expectations.toml waives;
* for the stacks that crash, no active probe passes: a probe that drove the stack into its crash
  must fail.

All cells are run before anything is asserted, so that a failure lists every wrong cell, and
the whole table (defect × reference × role: verdict, culprit, reason) is printed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from udtconf import expectations
from udtconf.active import Outcome, ProbeResult
from udtconf.checks import Inconclusive
from udtconf.family import RUNS
from udtconf.runner import InteropRunner, RunStatus
from udtconf.udt.checks import Context, rules_for
from udtconf.udt.interop import UdtRunResult
from udtconf.udt.tester import PROBES, Probe, deadline_of, run_probe
from udtharness import processes
from udtharness.capture import can_capture
from udtharness.stacks import Stack, registry
from zoo import DEFECTS, Defect, make_stack
from zoo.peer import CRASH_MARK

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.interop, pytest.mark.needs_root]

REFERENCES = ("libudt", "udt-rs")
# Probes that drive a crashing zoo stack into its crash, one per role: the DGRAM drop request
# (a false pass of issue 27) and a crafted NAK to a sender.
CRASH_PROBES = ("server/msg-drop-dgram", "client/nak-duplicates")

# Clauses that put a fault on the stack they name (group "who"): a reason may name a reference
# stack as a bystander ("server libudt still running 10 s after the client failed"), never so.
_ROLE = r"(?:server|client)(?:-\d+)?"
BLAME = [
    re.compile(p)
    for p in (
        rf"^(?:stopped early after [\d.]+ s: )?{_ROLE} (?P<who>\S+) alive but deaf",
        rf"the {_ROLE} (?P<who>\S+) received data but sent no ACK",
        rf"receiver \({_ROLE} (?P<who>\S+)\) stopped ACKing",
        rf"which the {_ROLE} (?P<who>\S+) never NAKed",
        rf"never retransmitted by the {_ROLE} (?P<who>\S+)",
        rf"the {_ROLE} (?P<who>\S+) never answered",
        rf"after the {_ROLE} (?P<who>\S+)'s first-round reply",
        rf"the {_ROLE} (?P<who>\S+) sent no (?:handshake|data)",
        rf"nothing on the wire from the {_ROLE} (?P<who>\S+)",
        rf"{_ROLE} (?P<who>\S+) still running [\d.]+ s after the client finished",
        rf"{_ROLE} (?P<who>\S+) did not bind",
        rf"{_ROLE} (?P<who>\S+)(?:'s handshake response carries| ignored) MSS",
    )
]


@dataclass
class Cell:
    defect: Defect
    reference: str
    role: str  # the zoo stack's role
    res: UdtRunResult
    verdict: str = "pass"  # pass | reported | fail (the default gate's view of the cell)
    culprit: str = "–"
    rules: list[str] = field(default_factory=list)  # failed wire rules: "id [grade]: violation"
    wrong: list[str] = field(default_factory=list)  # what the suite got wrong in this cell

    def row(self) -> str:
        pair = f"zoo {self.role} × {self.reference}, {self.res.case}"
        lines = [f"{self.defect.name:17} {pair:33} {self.verdict:8} culprit {self.culprit:20} {self.res.reason}"]
        lines += [f"{'':17}   wire {r}" for r in self.rules[:4]]
        lines += [f"{'':17}   WRONG: {w}" for w in self.wrong]
        return "\n".join(lines)


def clauses(reason: str) -> list[str]:
    return [c.strip() for c in reason.split("; ") if c.strip()]


def named(clause: str, stacks: tuple[str, ...]) -> list[str]:
    """The stacks ``clause`` names, in the order it names them."""
    found = [(m.start(), s) for s in stacks for m in re.finditer(rf"(?<![\w-]){re.escape(s)}(?![\w-])", clause)]
    return [s for _, s in sorted(found)]


# Clauses that only describe the run ("data: 12 sequence numbers reached the server …", "last
# packets: client X at …, server Y at …"): naming a stack there is no verdict on it.
NEUTRAL = ("data: ", "last packets: ")


def culprit(reason: str, stacks: tuple[str, ...]) -> str | None:
    """The stack a reason leads with: the first named in its first clause that names any and is
    not a mere description (:data:`NEUTRAL`)."""
    return next((n[0] for c in clauses(reason) if not c.startswith(NEUTRAL) and (n := named(c, stacks))), None)


def blamed_in(reason: str) -> Iterator[tuple[str, str]]:
    """(stack, clause) for every clause that puts a fault on a stack (:data:`BLAME`)."""
    for c in clauses(reason):
        for pattern in BLAME:
            if m := pattern.search(c):
                yield m.group("who"), c


def judge(cell: Cell, server: Stack, client: Stack, exp: expectations.Expectations) -> None:
    res, zoo = cell.res, cell.defect.stack_name
    stacks = (zoo, *REFERENCES)
    if res.status in (RunStatus.SKIPPED, RunStatus.UNSUPPORTED):
        cell.verdict = res.status
        cell.wrong.append(f"the cell did not run: {res.reason}")
        return
    if res.status == RunStatus.FAIL:
        cell.verdict = "fail"
        cell.culprit = culprit(res.reason, stacks) or "nobody"
        if cell.culprit != zoo:
            cell.wrong.append(f"the reason leads with {cell.culprit}, not {zoo}")
    for who, clause in blamed_in(res.reason):
        if who in REFERENCES:
            cell.wrong.append(f"the reason blames {who}: {clause!r}")
    names = {"server": server.name, "client": client.name}
    if not res.conns:
        cell.wrong.append("no capture of the run: the wire rules cannot be checked")
    ctx = Context(res.case, set(res.dropped), res.client_leg)
    for rule in rules_for(res.case):
        found = []
        for conn in res.conns:
            try:
                found += rule.run(conn, ctx)
            except Inconclusive:
                continue
        for v in found:
            who = names[v.party]
            key = f"wire/{server.name}/{client.name}/{res.case}/{rule.id}"
            if who in REFERENCES and exp.waiver_for(key, [who]):
                continue  # a reference's own finding, recorded and waived (expectations.toml)
            cell.rules.append(f"{rule.id} [{rule.grade}]: {v.render(names)}")
            if rule.grade == "MUST":
                cell.verdict = "fail"
            elif cell.verdict == "pass":
                cell.verdict = "reported"
            if who in REFERENCES:
                cell.wrong.append(f"wire rule {rule.id} charges {who}: {v.render(names)}")
    if cell.verdict != "pass" and cell.culprit == "–":
        cell.culprit = zoo if all(f"[{zoo} as" in r for r in cell.rules) else "a reference"
    d = cell.defect
    if cell.verdict != d.verdict:
        cell.wrong.append(f"verdict {cell.verdict}, expected {d.verdict}")
    if d.rule and not any(r.startswith(f"{d.rule} ") and f"[{zoo} as" in r for r in cell.rules):
        cell.wrong.append(f"wire rule {d.rule} does not name {zoo}")
    if d.says and not re.search(d.says, res.reason):
        cell.wrong.append(f"the reason does not say {d.says!r}")


@pytest.fixture(scope="module")
def references() -> dict[str, Stack]:
    if not can_capture():
        pytest.skip("no capture (needs root for dumpcap/tcpdump): the wire rules are half of each verdict")
    reg = registry()
    refs = {name: reg[name] for name in REFERENCES}
    missing = {name: s.missing() for name, s in refs.items() if s.missing()}
    if missing:
        pytest.skip(f"reference stacks not built: {missing} (make build/libudt-peer build-udt)")
    return refs


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.name for d in DEFECTS])
def test_the_zoo_stack_is_the_culprit_of_its_own_defect(
    defect: Defect, references: dict[str, Stack], tmp_path: Path
) -> None:
    zoo = make_stack(tmp_path / "stacks", defect)
    runner = InteropRunner(RUNS, tmp_path / "results", capture=True)
    exp = expectations.load()
    cells = []
    for case in defect.cases:
        for ref in REFERENCES:
            for role in defect.roles:
                server, client = (zoo, references[ref]) if role == "server" else (references[ref], zoo)
                res = runner.run(server, client, case)
                assert isinstance(res, UdtRunResult)
                cell = Cell(defect, ref, role, res)
                judge(cell, server, client, exp)
                cells.append(cell)
    print("\n" + "\n".join(c.row() for c in cells))
    wrong = [f"{c.defect.name}, zoo {c.role} × {c.reference}: {w}" for c in cells for w in c.wrong]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("defect", [d for d in DEFECTS if d.crashes], ids=[d.name for d in DEFECTS if d.crashes])
@pytest.mark.parametrize("probe_id", CRASH_PROBES)
def test_no_probe_passes_a_stack_that_crashed(defect: Defect, probe_id: str, tmp_path: Path) -> None:
    zoo = make_stack(tmp_path / "stacks", defect)
    probe = next(p for p in PROBES if p.id == probe_id)
    workdir = tmp_path / "probe"
    res = run_probe(zoo, probe, workdir)
    log = (workdir / f"{probe.role}.log").read_text(errors="replace")
    print(f"\n{defect.name} {probe_id}: {res.verdict}")
    assert CRASH_MARK in log, f"the zoo stack's defect never struck in {probe_id}: the probe shows nothing"
    assert res.outcome == Outcome.FAIL, f"{probe_id} {res.outcome} with {zoo.name}, which crashed: {res.details}"
    assert re.search(r" log: |exit \d|killed|crash", res.details), (
        f"the failure does not say how it crashed: {res.details}"
    )


# What a probe may take past its deadline to unwind: stop the stack's processes (2 s of grace
# each), write probe.log. A bound on a hang, not a measure of speed.
DEADLINE_MARGIN = 10.0


def _in_a_thread(stack: Stack, probe: Probe, workdir: Path) -> tuple[threading.Thread, list[ProbeResult]]:
    """``probe`` run against ``stack`` in a thread of its own (started), and where its result will be."""
    done: list[ProbeResult] = []
    worker = threading.Thread(target=lambda: done.append(run_probe(stack, probe, workdir)), daemon=True)
    worker.start()
    return worker, done


def test_no_probe_runs_past_its_deadline_against_a_stack_that_never_stops_sending(tmp_path: Path) -> None:
    """Issue 41: two probes waited for a stack to go quiet, one for 20 minutes. Against a listener
    that never stops sending, every probe its test cases allow ends within its deadline plus
    :data:`DEADLINE_MARGIN`; each runs in a thread of its own, so that one that hangs fails the
    test instead of holding it."""
    defect = next(d for d in DEFECTS if d.name == "always-sending")
    zoo = make_stack(tmp_path / "stacks", defect)
    walls: list[tuple[float, str]] = []
    late = []
    for probe in PROBES:
        if not zoo.supports(probe.testcase):
            print(f"{probe.id:40} skipped: TESTCASE={probe.testcase} not listed")
            continue
        deadline = deadline_of(probe)
        before = len(processes.started())
        t0 = time.monotonic()
        worker, done = _in_a_thread(zoo, probe, tmp_path / "probes" / probe.id.replace("/", "_"))
        worker.join(deadline + DEADLINE_MARGIN)
        wall = time.monotonic() - t0
        if worker.is_alive():  # stop the stack, so that the stuck probe ends before the next starts
            late.append(f"{probe.id}: still running {wall:.0f} s in, past its {deadline:.0f} s deadline")
            for proc in processes.started()[before:]:
                processes.stop(proc)
            worker.join(30)
        walls.append((wall, probe.id))
        print(f"{probe.id:40} {wall:6.1f} s of {deadline:3.0f} s  {done[0].verdict if done else '(no result)'}")
    wall, longest = max(walls)
    print(f"longest: {longest}, {wall:.1f} s")
    assert not late, "\n".join(late)


def test_the_absurd_handshake_probe_fails_a_stack_that_accepts_mss_0(tmp_path: Path) -> None:
    """Issue 41: a listener that took MSS 0, answered with a response the suite could not decode
    and streamed ACKs passed server/handshake-absurd-mss-ffs, its answer counted as none."""
    defect = next(d for d in DEFECTS if d.name == "accepts-mss-0")
    zoo = make_stack(tmp_path / "stacks", defect)
    probe = next(p for p in PROBES if p.id == "server/handshake-absurd-mss-ffs")
    workdir = tmp_path / "probe"
    res = run_probe(zoo, probe, workdir)
    print(f"\n{probe.id}: {res.verdict}\n  " + "\n  ".join(res.notes))
    logs = "".join(p.read_text(errors="replace") for p in workdir.glob("*/server.log"))
    assert "zoo: accepted MSS 0" in logs, "the zoo stack never took MSS 0: the probe shows nothing"
    assert res.outcome == Outcome.FAIL, f"{probe.id} {res.outcome} with {zoo.name}, which accepted MSS 0"
    assert "MSS 0: accepted (MSS below 76)" in res.details, res.details
