"""Stacks behind the adapter contract (docs/conformance/adapter-contract.md).

A stack is a directory ``conformance/stacks/<name>/`` with ``meta.toml`` and an executable
``entrypoint``. The suite never calls a stack's binary directly: it sets ``ROLE``,
``TESTCASE``, addresses and file paths in the environment and reads the exit code
(0 = pass, 127 = test case not supported, anything else = failure).
"""

from __future__ import annotations

import os
import subprocess
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

EXIT_OK = 0
EXIT_UNSUPPORTED = 127

CONFORMANCE_DIR = Path(__file__).resolve().parent.parent
STACKS_DIR = CONFORMANCE_DIR / "stacks"
REPO_ROOT = CONFORMANCE_DIR.parent

TESTCASES = ("handshake", "transfer", "dgram", "rendezvous", "loss", "multiconnect", "close")


class StackError(RuntimeError):
    """A stack directory does not follow the adapter contract."""


@dataclass(frozen=True)
class Stack:
    name: str
    path: Path
    version: str
    description: str
    testcases: tuple[str, ...]
    requires: tuple[str, ...] = ()
    reference: bool = False
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def entrypoint(self) -> Path:
        return self.path / "entrypoint"

    def missing(self) -> list[str]:
        """Required build products that are not there (the stack is then skipped, not failed)."""
        return [r for r in self.requires if not (REPO_ROOT / r).exists()]

    @property
    def available(self) -> bool:
        return not self.missing()

    def supports(self, testcase: str) -> bool:
        return testcase in self.testcases

    def env(self, role: str, testcase: str, **values: str | int | Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"ROLE": role, "TESTCASE": testcase, "REPO_ROOT": str(REPO_ROOT)})
        env.update({k: str(v) for k, v in values.items()})
        return env

    def start(self, role: str, testcase: str, logdir: Path, **values: str | int | Path) -> subprocess.Popen[bytes]:
        """Start the entrypoint; its stdout/stderr go to ``logdir/<role>.log``."""
        logdir.mkdir(parents=True, exist_ok=True)
        log = open(logdir / f"{role}.log", "ab")
        try:
            return subprocess.Popen(
                [str(self.entrypoint)],
                env=self.env(role, testcase, LOGDIR=logdir, **values),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: killable as a whole
            )
        finally:
            log.close()

    def compliance_check(self, logdir: Path, timeout: float = 10.0) -> tuple[bool, str]:
        """Run an unknown test case in both roles; the contract demands exit code 127."""
        case = f"udtc-unknown-{uuid.uuid4().hex[:8]}"
        for role in ("server", "client"):
            p = self.start(
                role,
                case,
                logdir,
                SERVER_ADDR="127.0.0.1",
                SERVER_PORT=9,
                CLIENT_ADDR="127.0.0.1",
                INPUT=os.devnull,
                OUTPUT=logdir / "unused",
            )
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stop(p)
                return False, f"{role} role did not exit within {timeout} s for unknown TESTCASE {case}"
            if rc != EXIT_UNSUPPORTED:
                return False, f"{role} role exited {rc} for unknown TESTCASE {case}, expected 127"
        return True, "unknown TESTCASE → 127 in both roles"


def stop(p: subprocess.Popen[bytes], grace: float = 2.0) -> int | None:
    """Terminate a started entrypoint and everything it spawned (its process group)."""
    if p.poll() is not None:
        return p.returncode
    for sig in (15, 9):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            return p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return p.poll()


def load(path: Path) -> Stack:
    meta_path = path / "meta.toml"
    if not meta_path.is_file():
        raise StackError(f"{path}: no meta.toml")
    with open(meta_path, "rb") as f:
        meta = tomllib.load(f)
    for key in ("name", "version", "testcases"):
        if key not in meta:
            raise StackError(f"{meta_path}: missing key '{key}'")
    if meta["name"] != path.name:
        raise StackError(f"{meta_path}: name '{meta['name']}' differs from the directory name '{path.name}'")
    ep = path / "entrypoint"
    if not (ep.is_file() and os.access(ep, os.X_OK)):
        raise StackError(f"{path}: entrypoint missing or not executable")
    return Stack(
        name=meta["name"],
        path=path,
        version=str(meta["version"]),
        description=meta.get("description", ""),
        testcases=tuple(meta["testcases"]),
        requires=tuple(meta.get("requires", ())),
        reference=bool(meta.get("reference", False)),
        meta=meta,
    )


def discover(selected: str | None = None, root: Path = STACKS_DIR) -> list[Stack]:
    """All stacks under ``root`` (sorted), or the comma-separated ``selected`` names."""
    names = sorted(p.name for p in root.iterdir() if (p / "meta.toml").is_file())
    if selected:
        wanted = [s.strip() for s in selected.split(",") if s.strip()]
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise StackError(f"unknown stack(s) {unknown}; known: {names}")
        names = wanted
    return [load(root / n) for n in names]
