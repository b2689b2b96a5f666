import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from udtbed.emulation import network, runtime
from udtbed.results.results import PartResult, StackResult
from udtharness import netns


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root (network namespaces)")
        for item in items:
            if "needs_root" in item.keywords:
                item.add_marker(skip)
    if any("needs_docker" in item.keywords for item in items) and (why := runtime.docker_unusable()):
        skip = pytest.mark.skip(reason=f"needs Docker: {why}")
        for item in items:
            if "needs_docker" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_leftover_namespaces(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every root test must leave none of its namespaces (nor containers) behind."""
    yield
    if "needs_docker" in request.keywords and os.geteuid() == 0:
        boxes = runtime.cleanup_containers(f"{network.PREFIX}{os.getpid()}-")
        assert not boxes, f"containers left behind: {boxes}"
    if "needs_root" in request.keywords and os.geteuid() == 0:
        mine = netns.list_namespaces(f"{network.PREFIX}{os.getpid()}-")
        network.cleanup(f"{network.PREFIX}{os.getpid()}-")
        assert not mine, f"namespaces left behind: {mine}"


def have_linkem() -> bool:
    return network.LINKEM.exists() and shutil.which("ip") is not None


def root_links() -> set[str]:
    """Names of the veths and bridges in the root namespace (a topology must add none)."""
    out = set()
    for kind in ("veth", "bridge"):
        p = subprocess.run(["ip", "-o", "link", "show", "type", kind], capture_output=True, text=True, check=True)
        out |= {line.split(":")[1].strip().split("@")[0] for line in p.stdout.splitlines()}
    return out


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped: it names a run that is over."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert not os.path.exists(f"/proc/{gone.pid}")
    return gone.pid


def interruptible() -> None:
    """``preexec_fn`` of a run that a test interrupts: SIGINT back at its default, so that Python
    installs its KeyboardInterrupt handler even when the tests were started in the background by
    a non-interactive shell (which ignores SIGINT for them, and children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def udtbed_run_argv(results: Path, *args: str) -> list[str]:
    """`python -m udtbed run` as make testbed calls it, without InfluxDB and without the simulated
    figures (a test that wants them passes ``--simulate`` again), writing to ``results``."""
    argv = [sys.executable, "-m", "udtbed", "run", "--influx", "none", "--simulate", "none"]
    return [*argv, "--results", str(results), *args]


def part_of_repeats(runs: list[dict[str, StackResult]]) -> PartResult:
    """A part with nothing but results: ``runs`` is one {stack: StackResult} per repeat, the first first."""
    return PartResult(
        label="p",
        topology="t",
        topology_file="t.toml",
        topology_paper="",
        links={},
        calibration=[],
        calibration_ok=True,
        paper={},
        stacks=runs[0],
        more_repeats=runs[1:],
    )
