"""pytest plugin: each conformance case's outcome and duration to InfluxDB 1.x.

Active when ``INFLUX`` is an ``http(s)://`` URL (the testbed's ``local``/``none`` are not).
One point per case (a test with a ``udtc_key``, conftest.py) in database ``udtbed``,
measurement ``conformance``: fields ``duration_s``, ``passed`` (1/0), tags ``run`` (``INFLUX_RUN``
or the session's start time), ``kind`` (interop, codec, wire, active, adapter), ``server``,
``client``, ``case`` and ``outcome`` (passed, failed, skipped, xfailed, xpassed). The points go
in one HTTP line-protocol POST at the end of the session; a missing or failing server is
reported once and never fails the suite.
"""

from __future__ import annotations

import os
import time
import urllib.parse
import urllib.request

import pytest

DB = "udtbed"


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace(" ", "\\ ").replace(",", "\\,").replace("=", "\\=")


def url() -> str | None:
    u = os.environ.get("INFLUX", "")
    return u.rstrip("/") if u.startswith(("http://", "https://")) else None


def case_tags(key: str) -> dict[str, str]:
    """``interop/SERVER/CLIENT/CASE``, ``wire/SERVER/CLIENT/CASE/RULE``, ``active/STACK/PROBE``…
    as tags; an active or adapter case runs one stack, which is both its server and client."""
    kind, *rest = key.split("/")
    if kind in ("active", "adapter") and len(rest) >= 2:
        return {"kind": kind, "server": rest[0], "client": rest[0], "case": "/".join(rest[1:])}
    if len(rest) >= 3:
        return {"kind": kind, "server": rest[0], "client": rest[1], "case": "/".join(rest[2:])}
    return {"kind": kind, "case": "/".join(rest)}


def outcome(rep: pytest.TestReport) -> str | None:
    """The case's outcome from the report that decides it (call, or a setup that did not pass)."""
    if not (rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed")):
        return None
    if hasattr(rep, "wasxfail"):
        return "xfailed" if rep.outcome == "skipped" else "xpassed"
    return rep.outcome


class InfluxResults:
    """Collects the session's points and POSTs them at its end."""

    def __init__(self, url: str, run: str) -> None:
        self.url, self.run = url, run
        self.points: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = dict(report.user_properties).get("udtc_key")
        result = outcome(report)
        if not isinstance(key, str) or result is None:
            return
        tags = {"run": self.run, **case_tags(key), "outcome": result}
        t = ",".join(f"{_esc(k)}={_esc(v)}" for k, v in sorted(tags.items()) if v)
        passed = 1.0 if result in ("passed", "xfailed") else 0.0
        self.points.append(f"conformance,{t} duration_s={float(report.duration)!r},passed={passed!r} {time.time_ns()}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.points:
            return
        body, self.points = "\n".join(self.points).encode(), []
        try:
            create = urllib.parse.urlencode({"q": f"CREATE DATABASE {DB}"}).encode()
            for target, data in ((f"{self.url}/query", create), (f"{self.url}/write?db={DB}&precision=ns", body)):
                req = urllib.request.Request(target, data=data, method="POST")
                with urllib.request.urlopen(req, timeout=5) as r:
                    r.read()
        except Exception as e:  # noqa: BLE001 - results to InfluxDB never fail the suite
            session.config.get_terminal_writer().line(
                f"influxdb: {self.url}: {e} (conformance results not written; the suite goes on)", yellow=True
            )


def pytest_configure(config: pytest.Config) -> None:
    u = url()
    if u:
        run = os.environ.get("INFLUX_RUN") or time.strftime("conformance-%Y%m%d-%H%M%S")
        config.pluginmanager.register(InfluxResults(u, run), "udtconf-influx-results")
