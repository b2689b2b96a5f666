"""What the host a run ran on is, for ``run.json`` and the report: the facts a reader needs
to trust or repeat a figure and that no result line shows (Flent's and iperf3's users ask for
the same). Kernel, CPU model and frequency governor of the run's CPUs, the socket-buffer
sysctls, and the versions of the tools and stacks the testbed drives. Each fact is read, never
assumed; one that cannot be read says why (``"unknown: ..."``), so a missing tool never fails a
run."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from .cores import cpu_list

# The sysctls that bound a UDP or TCP socket's buffers (the runner asks for up to 64 MB).
SYSCTLS = (
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_max_backlog",
    "net.ipv4.udp_mem",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
)

# Tools the testbed runs, with the argument that prints their version.
TOOLS = {
    "iperf3": ["iperf3", "--version"],
    "tshark": ["tshark", "--version"],
    "tcpdump": ["tcpdump", "--version"],
    "ip": ["ip", "-V"],
    "ethtool": ["ethtool", "--version"],
    "docker": ["docker", "--version"],
}

# Debian packages whose version is the version of a stack or tool the testbed uses.
PACKAGES = ("libudt0", "libudt-dev", "mininet", "iproute2", "iperf3", "tshark", "linux-image-amd64")


def _first_line(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "unknown: not installed"
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown: {e}"
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0].strip() if out else f"unknown: `{' '.join(argv)}` printed nothing (exit {p.returncode})"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = _read(Path("/proc/cpuinfo")) or ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else platform.processor() or "unknown: no model name in /proc/cpuinfo"


def governors(cpus: Iterable[int]) -> dict[str, list[int]]:
    """Each frequency governor of ``cpus`` with the CPUs that have it; ``none`` where the kernel
    exposes no cpufreq (a VM, typically), so the host, not the run, sets the clock."""
    out: dict[str, list[int]] = {}
    for c in sorted(cpus):
        g = _read(Path(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")) or "none"
        out.setdefault(g, []).append(c)
    return out


def sysctls() -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        value = _read(Path("/proc/sys") / name.replace(".", "/"))
        out[name] = " ".join(value.split()) if value is not None else "unknown: not readable"
    return out


def packages() -> dict[str, str]:
    """Installed Debian package versions (``dpkg-query``); absent ones are left out."""
    if shutil.which("dpkg-query") is None:
        return {}
    p = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status} ${Version}\n", *PACKAGES],
        capture_output=True,
        text=True,
    )
    out = {}
    for line in p.stdout.splitlines():
        name, status, *version = line.split()
        if status == "installed" and version:
            out[name] = version[0]
    return out


def mininet_version() -> str:
    from .network import MininetMissing, mininet

    try:
        return mininet()[2]
    except MininetMissing as e:
        return f"unknown: {e}"


def describe(cpus: Iterable[int]) -> dict[str, object]:
    """The host's facts for ``run.json`` (``cpus``: the CPUs the run may use). Our stacks' version
    is the run's commit; libudt's is its Debian package's (``packages``)."""
    cpus = sorted(cpus)
    uname = os.uname()
    return {
        "kernel": f"{uname.sysname} {uname.release} {uname.version}",
        "machine": uname.machine,
        "cpu_model": cpu_model(),
        "cores_online": os.cpu_count(),
        "run_cpus": len(cpus),
        "governors": {g: cpu_list(c) for g, c in governors(cpus).items()},
        "clocksource": _read(Path("/sys/devices/system/clocksource/clocksource0/current_clocksource"))
        or "unknown: not readable",
        "sysctls": sysctls(),
        "tools": {name: _first_line(argv) for name, argv in TOOLS.items()} | {"mininet": mininet_version()},
        "packages": packages(),
        "python": platform.python_version(),
    }


__all__ = ["SYSCTLS", "describe", "governors", "sysctls", "packages"]
