"""pytest wiring for the conformance suite: the selection (STACKS, CASES, STACKS_DIR, UDTC_STACK,
UDTC_AGAINST, UDTC_SHARD; udtconf.selection), the interop runner shared by the session (with
fail-fast on a pair's failed handshake), the `required` marker and scoped waivers from the
expectations files, the gate (UDTC_GATE; udtconf.gate) and the JSON/HTML/JUnit reports under
UDTC_RESULTS (default results/conformance/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from udtconf import expectations, gate, report
from udtconf.expectations import Expectations
from udtconf.family import RUNS
from udtconf.frtp.checks import rules_for as frtp_rules_for
from udtconf.report import SKIPPED_AFTER_HANDSHAKE
from udtconf.runner import RESULTS_DIR, InteropRunner, RunResult, RunStatus
from udtconf.sabul.checks import rules_for as sabul_rules_for
from udtconf.selection import Selection, SelectionError, from_env, key_unit
from udtconf.udt.checks import rules_for
from udtconf.udt.recovery import ADAPTER_CASE as RECOVERY_CASE
from udtharness import processes
from udtharness.stacks import Stack, StackError

# INFLUX=URL: each case's outcome to InfluxDB; a progress bar on a terminal (see the modules' docs).
pytest_plugins = ["udtconf.influx_results", "udtconf.pytest_progress"]

_ENTRIES = pytest.StashKey[list[report.Entry]]()
_OUTCOMES = pytest.StashKey[list[gate.Outcome]]()
_SELECTION = pytest.StashKey[Selection]()
_EXPECTATIONS = pytest.StashKey[Expectations]()
_GATE = pytest.StashKey[str]()


def results_dir() -> Path:
    return Path(os.environ["UDTC_RESULTS"]).absolute() if os.environ.get("UDTC_RESULTS") else RESULTS_DIR


def pytest_configure(config: pytest.Config) -> None:
    try:
        selection = from_env()
        config.stash[_EXPECTATIONS] = expectations.for_stacks(selection.stacks)
        config.stash[_GATE] = gate.mode()
    except (SelectionError, StackError, expectations.ExpectationsError, gate.GateError) as e:
        raise pytest.UsageError(str(e)) from e
    config.stash[_SELECTION] = selection
    # SIGTERM (make conformance, udtconf run) ends the session as Ctrl-C does: every stack stopped
    processes.interrupt_on_sigterm()
    if config.option.xmlpath is None and not os.environ.get("UDTC_NO_JUNIT"):
        results_dir().mkdir(parents=True, exist_ok=True)
        config.option.xmlpath = str(results_dir() / "junit.xml")
    config.stash[_ENTRIES] = []
    config.stash[_OUTCOMES] = []


def pytest_report_header(config: pytest.Config) -> list[str]:
    sel = config.stash[_SELECTION]
    tested = f"under test: {', '.join(sel.under_test)}; " if sel.under_test else ""
    shard = f"; shard {sel.shard}" if sel.shard else ""
    return [
        f"udtconf: stacks {', '.join(s.name for s in sel.stacks)} ({tested}cases {', '.join(sel.cases)}){shard}; "
        f"gate {config.stash[_GATE]}; results {results_dir()}"
    ]


def _protocols(metafunc: pytest.Metafunc) -> set[str] | None:
    """The protocols a test module or function is for (``@pytest.mark.protocols("udt")``), or
    None for every protocol."""
    mark = metafunc.definition.get_closest_marker("protocols")
    return set(mark.args) if mark else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    sel = metafunc.config.stash[_SELECTION]
    names = metafunc.fixturenames
    wanted = _protocols(metafunc)
    cells = [(s, c, k) for s, c, k in sel.all_cells() if wanted is None or s.protocol in wanted]
    if "matrix_cell" in names:
        metafunc.parametrize("matrix_cell", cells, ids=[f"{s.name}-{c.name}-{k}" for s, c, k in cells])
    elif "matrix_rule" in names:
        params = [(s, c, case, r) for s, c, case in cells if s.protocol == "udt" for r in rules_for(case)]
        metafunc.parametrize("matrix_rule", params, ids=[f"{s.name}-{c.name}-{k}-{r.id}" for s, c, k, r in params])
    elif "sabul_rule" in names:
        sabul = [(s, c, case, r) for s, c, case in cells if s.protocol == "sabul" for r in sabul_rules_for(case)]
        metafunc.parametrize("sabul_rule", sabul, ids=[f"{s.name}-{c.name}-{k}-{r.id}" for s, c, k, r in sabul])
    elif "frtp_rule" in names:
        frtp = [(s, c, case, r) for s, c, case in cells if s.protocol == "frtp" for r in frtp_rules_for(case)]
        metafunc.parametrize("frtp_rule", frtp, ids=[f"{s.name}-{c.name}-{k}-{r.id}" for s, c, k, r in frtp])
    elif "recovery_pair" in names:
        # udtconf.udt.recovery: one run per UDT pair that plays the case the comparison runs
        pairs = list(
            {(s.name, c.name): (s, c) for s, c, k in cells if s.protocol == "udt" and k == RECOVERY_CASE}.values()
        )
        metafunc.parametrize("recovery_pair", pairs, ids=[f"{s.name}-{c.name}" for s, c in pairs])
    elif "stack" in names:
        stacks = [s for s in sel.tested_stacks if wanted is None or s.protocol in wanted]
        metafunc.parametrize("stack", stacks, ids=[s.name for s in stacks])


def item_key(item: pytest.Item) -> str | None:
    cs = getattr(item, "callspec", None)
    if cs is None:
        return None
    test = str(getattr(item, "originalname", item.name))
    p = cs.params
    if _empty_matrix(item):
        return None
    if "matrix_cell" in p:
        s, c, case = p["matrix_cell"]
        kind = "interop" if test == "test_matrix" else "codec"
        return f"{kind}/{s.name}/{c.name}/{case}"
    if "recovery_pair" in p:
        s, c = p["recovery_pair"]
        return f"recovery/{s.name}/{c.name}/{RECOVERY_CASE}"
    for name in ("matrix_rule", "sabul_rule", "frtp_rule"):
        if name in p:
            s, c, case, r = p[name]
            return f"wire/{s.name}/{c.name}/{case}/{r.id}"
    if "stack" in p:
        probe = p.get("probe")
        name = getattr(probe, "id", None) or test.removeprefix("test_")
        return f"{'active' if probe is not None else 'adapter'}/{p['stack'].name}/{name}"
    return None


_MATRIX_PARAMS = {
    "matrix_cell": tuple,
    "matrix_rule": tuple,
    "sabul_rule": tuple,
    "frtp_rule": tuple,
    "recovery_pair": tuple,
    "stack": Stack,
}


def _empty_matrix(item: pytest.Item) -> bool:
    """A matrix test with nothing to run: its protocols have no cell or stack in this selection
    (pytest then makes one placeholder item from the empty parameter list)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(name in params and not isinstance(params[name], kind) for name, kind in _MATRIX_PARAMS.items())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sel, exp = config.stash[_SELECTION], config.stash[_EXPECTATIONS]
    keep, drop = [], []
    for item in items:
        if _empty_matrix(item):
            drop.append(item)
            continue
        key = item_key(item)
        # With stacks under test only their tests run: the suite's own unit tests are ours to run.
        unit = key_unit(key) if key else f"test/{item.nodeid}"
        probe = getattr(getattr(item, "callspec", None), "params", {}).get("probe")
        unselected_probe = probe is not None and not sel.probe_selected(str(getattr(probe, "id", "")))
        if (key is None and sel.under_test) or unselected_probe or (sel.shard and not sel.shard.owns(unit, sel.units)):
            drop.append(item)
            continue
        keep.append(item)
        if key is None:
            continue
        item.user_properties.append(("udtc_key", key))
        if exp.is_required(key):
            item.add_marker(pytest.mark.required)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class FailFastRunner(InteropRunner):
    """The session's runner: once a pair's handshake cell failed (when handshake is selected),
    the pair's other cases skip at once instead of each costing a timeout."""

    def __init__(self, results_dir: Path, cases: tuple[str, ...]) -> None:
        super().__init__(RUNS, results_dir)
        self.cases = cases

    def run(self, server: Stack, client: Stack, case: str) -> RunResult:
        claimed = server.supports(case) and client.supports(case)  # else: "?", unclaimed, not "–"
        if case != "handshake" and "handshake" in self.cases and claimed:
            hs = super().run(server, client, "handshake")
            if hs.status == RunStatus.FAIL:
                return RunResult(
                    server.name,
                    client.name,
                    case,
                    RunStatus.SKIPPED,
                    f"{SKIPPED_AFTER_HANDSHAKE} {server.name} × client {client.name} (see {hs.logdir}): {hs.reason}",
                    hs.logdir,
                )
        return super().run(server, client, case)


@pytest.fixture(scope="session")
def runner(pytestconfig: pytest.Config) -> InteropRunner:
    return FailFastRunner(results_dir(), pytestconfig.stash[_SELECTION].cases)


@pytest.fixture(scope="session")
def selection(pytestconfig: pytest.Config) -> Selection:
    """The session's selection (stacks, cases, the registry they come from)."""
    return pytestconfig.stash[_SELECTION]


@pytest.fixture(scope="session", name="results_dir")
def results_dir_fixture() -> Path:
    """Where this session writes results (UDTC_RESULTS, default results/conformance/)."""
    return results_dir()


def _message(rep: pytest.TestReport) -> str:
    crash = getattr(rep.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    if isinstance(rep.longrepr, tuple):
        return str(rep.longrepr[2])
    return str(getattr(rep, "wasxfail", "") or rep.longrepr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()
    config = item.config
    props = dict(item.user_properties)
    key = props.get("udtc_key")
    key = key if isinstance(key, str) else None
    if rep.failed:
        message = " ".join(_message(rep).split())[:600]
        # A wire rule records the stacks its violations blame; otherwise every stack of the key is.
        raw = props.get("udtc_blamed")
        blamed = [str(b) for b in raw] if isinstance(raw, list) else []
        waiver = config.stash[_EXPECTATIONS].waiver_for(key, blamed) if key else None
        if waiver is not None:
            # An expected failure, as pytest's own xfail reports one.
            rep.outcome = "skipped"
            rep.wasxfail = waiver.describe()
            verdict = gate.Verdict.WAIVED
        else:
            grade = str(props.get("udtc_grade", ""))
            verdict = (
                gate.Verdict.GATING
                if gate.gates(config.stash[_GATE], key, grade, config.stash[_EXPECTATIONS])
                else gate.Verdict.REPORTED
            )
        # JUnit writes the properties of the teardown report, which copies the item's.
        item.user_properties.append(("udtc_gate", verdict))
        rep.user_properties.append(("udtc_gate", verdict))
        config.stash[_OUTCOMES].append(gate.Outcome(key or item.nodeid, verdict, message))
    if key is None:
        return
    if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
        status = report.Status(rep.outcome)
        if hasattr(rep, "wasxfail"):
            status = report.Status.XFAIL if rep.outcome == "skipped" else report.Status.XPASS
        config.stash[_ENTRIES].append(
            report.Entry.from_props(props, nodeid=item.nodeid, status=status, message=_message(rep))
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    processes.cleanup()  # whatever an interrupted run left: the registered groups, then the marked


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    entries = config.stash.get(_ENTRIES, [])
    outcomes = config.stash.get(_OUTCOMES, [])
    out = results_dir()
    if entries:
        report.write(entries, out, Path(config.option.xmlpath or ""))
        gate.annotate(out, config.stash[_GATE], outcomes)
    # The run reports every failure; its exit status reflects only the gating ones.
    if exitstatus == pytest.ExitCode.TESTS_FAILED and not any(o.verdict == gate.Verdict.GATING for o in outcomes):
        session.exitstatus = pytest.ExitCode.OK
