"""The INFLUX=URL results plugin: tags of a case, and a missing server never fails the suite."""

from types import SimpleNamespace
from typing import Literal

import pytest
from udtconf.influx_results import InfluxResults, case_tags


def test_case_keys_become_server_client_case_tags() -> None:
    assert case_tags("interop/libudt/udt-rs/handshake") == {
        "kind": "interop",
        "server": "libudt",
        "client": "udt-rs",
        "case": "handshake",
    }
    assert case_tags("wire/udt-rs/libudt/loss/nak-range")["case"] == "loss/nak-range"
    assert case_tags("active/udt-rs/syn-cookie") == {
        "kind": "active",
        "server": "udt-rs",
        "client": "udt-rs",
        "case": "syn-cookie",
    }


def report(
    when: Literal["setup", "call", "teardown"], outcome: Literal["passed", "failed", "skipped"], **extra: object
) -> pytest.TestReport:
    props = [("udtc_key", "interop/a/b/handshake")]
    rep = pytest.TestReport("x::y", ("x", 1, "y"), {}, outcome, None, when, duration=0.25, user_properties=props)
    for k, v in extra.items():
        setattr(rep, k, v)
    return rep


def test_one_point_per_case_and_a_missing_server_is_reported_once() -> None:
    plugin = InfluxResults("http://127.0.0.1:9", "r1")
    plugin.pytest_runtest_logreport(report("setup", "passed"))
    plugin.pytest_runtest_logreport(report("call", "skipped", wasxfail="known"))
    plugin.pytest_runtest_logreport(report("teardown", "passed"))
    assert len(plugin.points) == 1
    assert plugin.points[0].startswith(
        "conformance,case=handshake,client=b,kind=interop,outcome=xfailed,run=r1,server=a duration_s=0.25,passed=1.0 "
    )
    lines: list[str] = []
    writer = SimpleNamespace(line=lambda text, **_: lines.append(text))
    session = SimpleNamespace(config=SimpleNamespace(get_terminal_writer=lambda: writer))
    plugin.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert len(lines) == 1 and "not written" in lines[0]
