"""How the matrix tests of both protocols turn what they ran into the test's outcome and the
``udtc_*`` properties the reports read: an active-tester probe (test_active, test_sabul_active)
and a wire rule on an interop run's capture (test_wire_rules, test_sabul_wire_rules)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from udtconf.active import Probe, ProbeResult
from udtconf.checks import Inconclusive, Rule, Violation
from udtconf.runner import InteropRunner, RunResult, RunStatus
from udtharness.stacks import Stack

# pytest's record_property fixture: a name and a JSON-able value for the test's report.
RecordProperty = Callable[[str, object], None]

U = TypeVar("U")  # what a rule reads: a UDT connection, a SABUL session
C = TypeVar("C")


def probe_verdict(
    stack: Stack,
    probe: Probe[Any],
    run_probe: Callable[[Stack, Any, Path], ProbeResult],
    results_dir: Path,
    record_property: RecordProperty,
    *,
    spec: str,
    plays: str,
) -> None:
    """Runs ``probe`` against ``stack`` and fails the test on a ``fail``, naming the part the stack
    ``plays`` and the section of ``spec``."""
    record_property("udtc_section", probe.section)
    record_property("udtc_requirement", probe.summary)
    if stack.missing():
        pytest.skip(f"stack {stack.name} not built: {', '.join(stack.missing())}")
    if not stack.supports(probe.testcase):
        pytest.skip(f"{stack.name} meta.toml does not list {probe.testcase}, the TESTCASE this probe starts it with")
    workdir = results_dir / "active" / stack.name / probe.id.replace("/", "_")
    record_property("udtc_logdir", str(workdir))
    res = run_probe(stack, probe, workdir)
    record_property("udtc_verdict", res.verdict)
    record_property("udtc_detail", res.notes)
    record_property("udtc_log", str(res.log or ""))
    record_property("udtc_pcap", str(res.pcap or ""))
    record_property("udtc_violations", [res.details, *res.notes])
    if res.failed:
        pytest.fail(
            f"{stack.name} ({plays}) {probe.id} [{spec} §{probe.section}]: {res.details}; "
            f"{'; '.join(res.notes)} (log: {res.log})",
            pytrace=False,
        )


def rule_run(
    rule: Rule[Any, Any],
    server: Stack,
    client: Stack,
    case: str,
    runner: InteropRunner,
    record_property: RecordProperty,
) -> RunResult:
    """The interop run ``rule`` is checked on; skips the test where the run did not happen."""
    record_property("udtc_grade", rule.grade)
    record_property("udtc_section", rule.section)
    record_property("udtc_requirement", rule.requirement)
    res = runner.run(server, client, case)
    record_property("udtc_logdir", str(res.logdir))
    record_property("udtc_pcap", str(res.pcap or ""))
    if res.status in (RunStatus.SKIPPED, RunStatus.UNSUPPORTED):
        pytest.skip(f"run {res.status}: {res.reason}")
    return res


def rule_verdict(
    rule: Rule[U, C],
    res: RunResult,
    captured: list[U],
    ctx: C,
    names: dict[str, str],
    record_property: RecordProperty,
    *,
    spec: str,
    no_capture: str,
    blame: Callable[[Violation], str],
) -> None:
    """Checks ``rule`` on each ``captured`` connection or session of ``res`` and fails the test on
    a violation; ``names`` maps each role (in the order the failure names them) to its stack,
    ``blame`` a violation to the stack a waiver must name. Skips without a complete capture, or
    when the rule was inconclusive on every connection."""
    if not captured:
        pytest.skip(no_capture)
    if res.capture_lost:
        pytest.skip(f"capture incomplete: the capture tool dropped {res.capture_lost} packets (host overloaded)")
    violations: list[str] = []
    blamed: set[str] = set()
    inconclusive: list[str] = []
    for unit in captured:
        try:
            found = rule.run(unit, ctx)
        except Inconclusive as e:
            inconclusive.append(str(e))
            continue
        violations += [v.render(names) for v in found]
        blamed |= {blame(v) for v in found}
    record_property("udtc_violations", violations)
    record_property("udtc_blamed", sorted(blamed))  # the stacks a waiver must name (expectations.py)
    if violations:
        shown = "\n  ".join(violations[:10])
        more = f"\n  … and {len(violations) - 10} more" if len(violations) > 10 else ""
        pair = " × ".join(f"{role} {name}" for role, name in names.items())
        pytest.fail(
            f"{rule.grade} violated: {rule.id} ({spec} §{rule.section}) in {res.case}, {pair}, capture {res.pcap}:"
            f"\n  {shown}{more}\n  requirement: {rule.requirement}",
            pytrace=False,
        )
    if inconclusive and len(inconclusive) == len(captured):
        pytest.skip(f"inconclusive: {inconclusive[0]}")
