"""Host runtimes: how a stack's process is started "on" a topology host.

Experiments and stacks only call :meth:`HostRuntime.spawn` with a host name and an argv; the
runtime decides where the process lives. :class:`NamespaceRuntime` runs it in the host's
network namespace (``ip netns exec``). A container runtime would implement the same protocol
(e.g. ``docker run --network ns:/run/netns/<ns>`` with the stack's image) without any change
to topologies or experiments.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import IO, Protocol, Sequence

from .network import Network


class Process(Protocol):
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def stop(self, timeout: float = 3.0) -> int: ...


class HostRuntime(Protocol):
    name: str

    def spawn(self, host: str, argv: Sequence[str], *, stdout: Path | None = None,
              stderr: Path | None = None, env: dict[str, str] | None = None) -> Process: ...

    def stop_all(self) -> None: ...


class NsProcess:
    """A process group started in a namespace; :meth:`stop` sends SIGINT, then TERM, then KILL."""

    def __init__(self, popen: subprocess.Popen, argv: Sequence[str]):
        self.popen = popen
        self.argv = list(argv)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout)

    def stop(self, timeout: float = 3.0) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
        return self.popen.wait()


class NamespaceRuntime:
    """Runs processes in the topology hosts' network namespaces."""

    name = "netns-process"

    def __init__(self, net: Network):
        self.net = net
        self.procs: list[NsProcess] = []

    def spawn(self, host, argv, *, stdout=None, stderr=None, env=None) -> NsProcess:
        out: IO | int = open(stdout, "wb") if stdout else subprocess.DEVNULL
        err: IO | int = open(stderr, "wb") if stderr else subprocess.DEVNULL
        try:
            p = subprocess.Popen(["ip", "netns", "exec", self.net.ns(host), *argv], stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 env={**os.environ, **(env or {})})
        finally:
            for f in (out, err):
                if not isinstance(f, int):
                    f.close()
        proc = NsProcess(p, argv)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for p in self.procs:
            p.stop(timeout=2)
        self.procs.clear()
