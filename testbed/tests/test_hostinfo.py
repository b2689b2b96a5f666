"""The host's facts a run records (udtbed.emulation.hostinfo): read where they can be, and a fact that
cannot be read says so instead of failing the run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest
from udtbed.emulation import hostinfo


def test_the_host_facts_name_the_kernel_cpus_sysctls_and_tool_versions() -> None:
    # describe() gives run.json's facts as plain objects; the test reads them as the JSON they become.
    h = cast(dict[str, Any], hostinfo.describe(sorted(os.sched_getaffinity(0))))
    assert h["kernel"].startswith(os.uname().sysname) and h["run_cpus"] == len(os.sched_getaffinity(0))
    assert set(h["sysctls"]) == set(hostinfo.SYSCTLS)
    assert h["sysctls"]["net.core.rmem_max"].isdigit()
    assert set(h["tools"]) >= {"iperf3", "tshark", "ip", "ethtool", "mininet"}
    # Every CPU of the run has a governor entry, "none" where the kernel exposes no cpufreq.
    assert sum(len(c.split(",")) for c in h["governors"].values()) >= 1


def test_a_tool_that_is_not_installed_is_unknown_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(hostinfo.TOOLS, "nosuch", ["udtb-no-such-tool-xyz", "--version"])
    tools = cast(dict[str, str], hostinfo.describe([0])["tools"])
    assert tools["nosuch"] == "unknown: not installed"


def test_governors_group_the_cpus_that_share_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = hostinfo._read

    def fake(path: Path) -> str | None:
        if "cpufreq" in str(path):
            return "performance" if "cpu0" in str(path) or "cpu1" in str(path) else None
        return real(path)

    monkeypatch.setattr(hostinfo, "_read", fake)
    assert hostinfo.governors([0, 1, 2]) == {"performance": [0, 1], "none": [2]}
