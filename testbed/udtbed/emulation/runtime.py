"""Host runtimes: how a stack's process is started "on" a topology host.

Experiments and stacks only call :meth:`HostRuntime.spawn` with a host name and an argv; the
runtime decides where the process lives. :class:`NamespaceRuntime` runs it in the host's
network namespace as a process of the harness (:func:`udtharness.processes.start` with the
host's ``netns`` and the seat's ``cpus``, no caps: its own group, reaped with its resource use).
:class:`DockerRuntime` runs each process in a container
of its own (the ``udtbed-stacks`` image, ``docker/Dockerfile.stacks``): the container's
filesystem, PIDs and hostname, the topology host's network. Docker cannot start a container in
a named namespace, so the container starts with ``--network none`` and ``udtbed-exec`` (in the
image) joins the host's ``/run/netns`` file with ``nsenter`` before it runs the program.
Topologies and experiments are the same under either.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from udtharness import processes

from .. import REPO
from .cluster import RemoteProcess
from .cores import cpu_list
from .network import PREFIX, Network, owner_alive
from .network import cleanup as cleanup_namespaces


class Process(Protocol):
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def stop(self, timeout: float = 3.0) -> int: ...


class HostRuntime(Protocol):
    name: str

    def spawn(
        self,
        host: str,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        cpus: frozenset[int] | None = None,
    ) -> Process: ...

    def stop_all(self) -> None: ...


class NsProcess:
    """A process on a topology host (:func:`udtharness.processes.start`: its own process group);
    :meth:`stop` sends SIGINT, then TERM, then KILL to the group, ``timeout`` seconds apart
    (:data:`STOP_SIGNALS`, :func:`udtharness.processes.stop`)."""

    STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # SIGINT first: a sender's final stats, tcpdump's last packets

    def __init__(self, popen: processes.StackProcess, argv: Sequence[str]):
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
        # A process already reaped is left alone: its group id may be another's by now.
        if self.popen.poll() is None:
            processes.stop(self.popen, grace=timeout, signals=self.STOP_SIGNALS)
        return self.popen.wait()


class NamespaceRuntime:
    """Runs processes in the topology hosts' network namespaces."""

    name = "netns-process"

    def __init__(self, net: Network):
        self.net = net
        self.procs: list[NsProcess | RemoteProcess] = []

    def spawn(
        self,
        host: str,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        cpus: frozenset[int] | None = None,
    ) -> NsProcess:
        """``argv`` in ``host``'s namespace with the runner's environment and ``env``, stdin
        closed, ``stdout``/``stderr`` each written to its file (None: discarded), no memory or CPU
        cap. ``cpus``: the CPUs the process may run on (its seat, udtbed.emulation.cores); default: the runner's.
        On a cluster's server (udtbed.emulation.cluster) it runs there over SSH, with ``env`` only and the
        repository's paths as that server has them; its outputs stream back into the files."""
        server = self.net.server(host)
        if server is not None and self.net.cluster is not None:
            remote = self.net.cluster.spawn(
                server.name,
                [on_server(a, server.repo) for a in argv],
                ns=self.net.ns(host),
                stdout=stdout,
                stderr=stderr,
                env={k: on_server(v, server.repo) for k, v in (env or {}).items()},
                cpus=cpus,
            )
            self.procs.append(remote)
            return remote  # type: ignore[return-value]  # the same Process, over SSH
        p = processes.start(
            argv,
            {**os.environ, **(env or {})},
            limits=processes.UNCAPPED,
            stdout=stdout,
            stderr=stderr,
            netns=self.net.ns(host),
            cpus=cpus,
        )
        proc = NsProcess(p, argv)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for p in self.procs:
            p.stop(timeout=2)
        self.procs.clear()


def on_server(arg: str, repo: Path) -> str:
    """``arg`` with the head's repository path (and its Python) as a server's ``repo`` has it."""
    here = str(REPO)
    if repo == REPO or not str(arg).startswith(here):
        return str(arg)
    return str(repo) + str(arg)[len(here) :]


# --- containers ------------------------------------------------------------------------------

IMAGE = "udtbed-stacks"  # make testbed-image TESTBED_IMAGE=...; udtbed run --image ...
# Files the image copies in (name in the image -> file on the host); `make testbed-image` labels
# the image with each one's sha256 (org.udtbed.sha256.<name>) so that a stale image is refused.
IMAGE_FILES = {
    "udt": REPO / "impl/target/release/udt",
    "sabul": REPO / "impl/target/release/sabul",
    "libudt-peer": REPO / "build/libudt-peer",
    "udtbed-exec": REPO / "docker/udtbed-exec",
    "probe.py": REPO / "testbed/udtbed/emulation/probe.py",
}
_LABEL = "org.udtbed.sha256."
_names = itertools.count()  # container numbers, unique within this process (= run tag)
_KILLED = 128 + signal.SIGKILL  # status of a container that is gone (removed from outside)


def image_label_args() -> list[str]:
    """``docker build`` arguments that label the image with the sha256 of each of IMAGE_FILES
    (`make testbed-image` passes them)."""
    return [f"--label={_LABEL}{name}={_sha256(path)}" for name, path in IMAGE_FILES.items()]


class DockerError(RuntimeError):
    """Docker cannot run the testbed's containers; the message says what to do."""


def docker(*args: str, check: bool = True, timeout: float | None = 60) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["docker", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    if check and p.returncode != 0:
        raise DockerError(f"`docker {' '.join(args[:3])} ...` failed ({p.returncode}): {p.stderr.strip()}")
    return p


def _sha256(path: Path, _cache: dict[tuple[str, int, int], str] = {}) -> str:  # noqa: B006 - a cache on purpose
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _cache:
        with open(path, "rb") as f:
            _cache[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _cache[key]


def docker_unusable() -> str | None:
    """Why Docker cannot run containers here (with what to do), or None."""
    if shutil.which("docker") is None:
        return "docker is not installed: the docker runtime needs Docker Engine (Debian: apt-get install docker.io)"
    try:
        p = docker("version", "--format", "{{.Server.Version}}", check=False, timeout=20)
    except subprocess.TimeoutExpired:
        return "the Docker daemon does not answer (20 s): check `docker info`"
    if p.returncode != 0:
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "no answer"
        return f"the Docker daemon is not reachable ({last}): start it (systemctl start docker)"
    return None


@dataclass(frozen=True)
class StacksImage:
    """The stacks' image, checked usable: Docker answers, the image exists and was built from
    the binaries and scripts the host has now."""

    name: str
    id: str
    labels: dict[str, str]

    @classmethod
    def resolve(cls, name: str = IMAGE) -> StacksImage:
        if why := docker_unusable():
            raise DockerError(f"{why}, or use --runtime netns")
        p = docker("image", "inspect", "--format", "{{json .}}", name, check=False)
        if p.returncode != 0:
            raise DockerError(
                f"image {name} does not exist: build it with `make testbed-image` (docker/Dockerfile.stacks)"
            )
        info = json.loads(p.stdout)
        image = cls(name, info["Id"], (info.get("Config") or {}).get("Labels") or {})
        for file, path in IMAGE_FILES.items():
            if path.exists():
                image.check_file(file, path)
        return image

    def check_file(self, file: str, path: Path) -> None:
        want = self.labels.get(_LABEL + file)
        if want is None:
            raise DockerError(
                f"image {self.name} has no {file} (label {_LABEL}{file}): rebuild it with `make testbed-image`"
            )
        if want != _sha256(path):
            raise DockerError(
                f"image {self.name} holds another {file} than {path}: rebuild it with `make testbed-image`"
            )

    def program(self, argv0: str) -> str:
        """The image's path for a host program: the project's binaries by name, this Python as
        the image's python3 (``-m udtbed.emulation.probe``), anything else (iperf3, ping) from the PATH."""
        if argv0 == sys.executable:
            return "python3"
        path = Path(argv0)
        if not path.is_absolute():
            return argv0
        if path.name not in IMAGE_FILES:
            raise DockerError(
                f"{argv0} is not in image {self.name} (it has {', '.join(IMAGE_FILES)} "
                "and Debian's iperf3, python3, ping)"
            )
        self.check_file(path.name, path)
        return f"/usr/local/bin/{path.name}"


class DockerProcess:
    """A process in a container ``udtb-<tag>-c<n>-<host>``; :meth:`stop` sends SIGINT, then TERM,
    then KILL (``docker kill --signal``) and removes the container. Exit statuses are the
    container's (128+N after signal N)."""

    def __init__(self, name: str, argv: Sequence[str]):
        self.name = name
        self.argv = list(argv)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = _exit_codes([self.name]).get(self.name)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                p = docker("wait", self.name, check=False, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(self.argv, timeout or 0) from None
            self.returncode = int(p.stdout) if p.returncode == 0 and p.stdout.strip().isdigit() else _KILLED
        return self.returncode

    def stop(self, timeout: float = 3.0) -> int:
        _stop([self], timeout)
        return self.returncode if self.returncode is not None else _KILLED


def _exit_codes(names: list[str]) -> dict[str, int]:
    """Exit status of each of ``names`` that is no longer running (gone counts as killed)."""
    p = docker("inspect", "--format", "{{.Name}} {{.State.Running}} {{.State.ExitCode}}", *names, check=False)
    found: dict[str, int | None] = {}
    for line in p.stdout.splitlines():
        name, running, code = line.split()
        found[name.lstrip("/")] = None if running == "true" else int(code)
    out: dict[str, int] = {}
    for n in names:
        status = found.get(n, _KILLED)
        if status is not None:
            out[n] = status
    return out


def _stop(procs: list[DockerProcess], timeout: float) -> None:
    """Stop ``procs`` together (one docker call per step, not per container), then remove them."""

    def running() -> list[DockerProcess]:
        pending = [p for p in procs if p.returncode is None]
        codes = _exit_codes([p.name for p in pending]) if pending else {}
        for p in pending:
            p.returncode = codes.get(p.name)
        return [p for p in pending if p.returncode is None]

    left = running()
    for sig in ("INT", "TERM", "KILL"):
        if not left:
            break
        docker("kill", "--signal", sig, *[p.name for p in left], check=False)
        deadline = time.monotonic() + timeout
        while (left := running()) and time.monotonic() < deadline:
            time.sleep(0.1)
    remove_containers([p.name for p in procs])


class DockerRuntime:
    """Runs each process in its own container on the topology host's network namespace.

    Files: the network's work directory (where experiments put stats and logs) and the
    directories of ``stdout``/``stderr`` are bind-mounted at the same paths; a process writes
    nowhere else on the host. ``env`` is the container's environment beyond the image's (the
    runner's own environment is not passed in). ``cpuset`` pins the containers
    (``--cpuset-cpus``); a process's own ``cpus`` (its seat, udtbed.emulation.cores) replace it."""

    name = "docker"

    def __init__(self, net: Network, image: StacksImage, cpuset: str | None = None):
        self.net, self.image, self.cpuset = net, image, cpuset
        self.procs: list[DockerProcess] = []

    def spawn(
        self,
        host: str,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        cpus: frozenset[int] | None = None,
    ) -> DockerProcess:
        ns = self.net.ns(host)
        proc = DockerProcess(f"{PREFIX}{self.net.tag}-c{next(_names)}-{host}", argv)
        dirs = {self.net.workdir.resolve()} | {Path(f).resolve().parent for f in (stdout, stderr) if f}
        cmd = [
            "run",
            "--detach",
            "--name",
            proc.name,
            "--hostname",
            host,
            "--label",
            f"org.udtbed.run={self.net.tag}",
            "--label",
            f"org.udtbed.host={host}",
            "--network",
            "none",
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "NET_ADMIN",
            "--cap-add",
            "NET_RAW",
            "--mount",
            f"type=bind,src=/run/netns/{ns},dst=/run/netns/{ns},readonly",
        ]
        for d in sorted(dirs):
            cmd += ["--mount", f"type=bind,src={d},dst={d}"]
        for k, v in (env or {}).items():
            cmd += ["--env", f"{k}={v}"]
        if cpus or self.cpuset:
            cmd += ["--cpuset-cpus", cpu_list(cpus) if cpus else str(self.cpuset)]
        cmd += [
            self.image.id,
            "udtbed-exec",
            f"/run/netns/{ns}",
            str(stdout or "/dev/null"),
            str(stderr or "/dev/null"),
            self.image.program(argv[0]),
            *argv[1:],
        ]
        self.procs.append(proc)  # before the container exists: stop_all removes it even if `run` is interrupted
        docker(*cmd)
        return proc

    def stop_all(self) -> None:
        _stop(self.procs, timeout=2)
        self.procs.clear()


def list_containers(prefix: str = PREFIX) -> list[str]:
    """Names of the containers (running or not) whose name starts with ``prefix``; none where
    Docker is not installed or not running."""
    if shutil.which("docker") is None:
        return []
    try:
        p = docker("ps", "--all", "--format", "{{.Names}}", "--filter", f"name=^{prefix}", check=False, timeout=20)
    except subprocess.TimeoutExpired:
        return []
    return sorted(n for n in p.stdout.split() if n.startswith(prefix))


def remove_containers(names: list[str]) -> None:
    if names:
        docker("rm", "--force", *names, check=False)


def cleanup_containers(prefix: str = PREFIX, live: bool = True) -> list[str]:
    """Remove (``docker rm -f``) every container with ``prefix``; returns their names. With
    ``live=False`` the containers of runs still alive are left alone."""
    gone = [c for c in list_containers(prefix) if live or not owner_alive(c)]
    remove_containers(gone)
    return gone


def cleanup_run(prefix: str = PREFIX, live: bool = True) -> tuple[list[str], list[str]]:
    """Remove the containers, then the namespaces (with their processes) named with ``prefix``:
    a container's processes live in a namespace. Returns (containers, namespaces) removed;
    ``live=False`` leaves those of runs still alive alone."""
    return cleanup_containers(prefix, live), cleanup_namespaces(prefix, live)
