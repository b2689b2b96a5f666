"""pytest wiring for the conformance suite: stack/case selection (STACKS, CASES), the
interop runner shared by the session, required/known markers from expectations.toml, and
the JSON/HTML/JUnit reports under results/conformance/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from udtconf import expectations, report
from udtconf.checks import rules_for
from udtconf.interop import RESULTS_DIR, InteropRunner
from udtconf.stacks import TESTCASES, Stack, discover

# INFLUX=URL: each case's outcome to InfluxDB; a progress bar on a terminal (see the modules' docs).
pytest_plugins = ["udtconf.influx_results", "udtconf.pytest_progress"]

_KEY = pytest.StashKey[list]()
_FAILED = pytest.StashKey[list]()


def selected_stacks() -> list[Stack]:
    return discover(os.environ.get("STACKS") or None)


def selected_cases() -> list[str]:
    env = os.environ.get("CASES")
    if not env:
        return list(TESTCASES)
    cases = [c.strip() for c in env.split(",") if c.strip()]
    unknown = [c for c in cases if c not in TESTCASES]
    if unknown:
        raise pytest.UsageError(f"unknown CASES {unknown}; known: {list(TESTCASES)}")
    return cases


def pytest_configure(config: pytest.Config) -> None:
    if config.option.xmlpath is None and not os.environ.get("UDTC_NO_JUNIT"):
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        config.option.xmlpath = str(RESULTS_DIR / "junit.xml")
    config.stash[_KEY] = []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if "matrix_cell" in names:
        stacks = selected_stacks()
        params = [(s, c, case) for s in stacks for c in stacks for case in selected_cases()]
        metafunc.parametrize("matrix_cell", params, ids=[f"{s.name}-{c.name}-{k}" for s, c, k in params])
    elif "matrix_rule" in names:
        stacks = selected_stacks()
        params = [(s, c, case, r) for s in stacks for c in stacks for case in selected_cases() for r in rules_for(case)]
        metafunc.parametrize("matrix_rule", params, ids=[f"{s.name}-{c.name}-{k}-{r.id}" for s, c, k, r in params])
    elif "stack" in names:
        stacks = selected_stacks()
        metafunc.parametrize("stack", stacks, ids=[s.name for s in stacks])


def item_key(item: pytest.Item) -> str | None:
    cs = getattr(item, "callspec", None)
    if cs is None:
        return None
    p = cs.params
    if "matrix_cell" in p:
        s, c, case = p["matrix_cell"]
        kind = "interop" if item.originalname == "test_matrix" else "codec"
        return f"{kind}/{s.name}/{c.name}/{case}"
    if "matrix_rule" in p:
        s, c, case, r = p["matrix_rule"]
        return f"wire/{s.name}/{c.name}/{case}/{r.id}"
    if "stack" in p:
        probe = p.get("probe")
        name = getattr(probe, "id", None) or item.originalname.removeprefix("test_")
        return f"{'active' if probe is not None else 'adapter'}/{p['stack'].name}/{name}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    exp = expectations.load()
    for item in items:
        key = item_key(item)
        if key is None:
            continue
        item.user_properties.append(("udtc_key", key))
        if exp.is_required(key):
            item.add_marker(pytest.mark.required)
        known = exp.known_for(key)
        if known:
            item.add_marker(pytest.mark.xfail(reason=f"known {known.kind}: {known.reason}", strict=False))


@pytest.fixture(scope="session")
def runner() -> InteropRunner:
    return InteropRunner()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()
    props = dict(item.user_properties)
    if rep.failed:
        item.config.stash.setdefault(_FAILED, []).append(props.get("udtc_key"))
    if "udtc_key" not in props:
        return
    if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
        status = rep.outcome
        if hasattr(rep, "wasxfail"):
            status = "xfail" if rep.outcome == "skipped" else "xpass"
        item.config.stash[_KEY].append(
            report.Entry.from_props(
                props,
                nodeid=item.nodeid,
                status=status,
                message=(
                    str(rep.longrepr.reprcrash.message)
                    if hasattr(rep.longrepr, "reprcrash") and rep.longrepr.reprcrash
                    # type: ignore[union-attr]
                    else (rep.longrepr[2] if isinstance(rep.longrepr, tuple) else getattr(rep, "wasxfail", ""))
                ),
            )
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    entries = session.config.stash.get(_KEY, [])
    if entries:
        report.write(entries, RESULTS_DIR, Path(session.config.option.xmlpath or ""))
    # UDTC_GATE=required: the run reports everything but its exit status only reflects the
    # tests marked `required` in expectations.toml (plus any unit test outside the matrix).
    if os.environ.get("UDTC_GATE") == "required" and exitstatus == pytest.ExitCode.TESTS_FAILED:
        exp = expectations.load()
        gating = [e for e in session.config.stash.get(_FAILED, []) if e is None or exp.is_required(e)]
        if not gating:
            session.exitstatus = pytest.ExitCode.OK
