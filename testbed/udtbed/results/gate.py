"""The performance gate for an implementation change (``make gate BASE=<git ref>``): the base
commit's udt-rs against this checkout's, on the same machine, in turns, then compared row by row.

1. The base commit is checked out in a worktree of its own (``build/gate/<sha>``, kept for the
   next gate against it) and its ``udt`` binary built there (``cargo build --release -p
   udt-cli``: the stack under test; the runner, the emulator and the bands are this checkout's,
   so that only the stack differs).
2. The part(s) run ``repeat`` times for each build, the builds taking turns (base, head, base,
   head ...), each a ``udtbed run`` with ``UDT_BIN`` set to that build's binary, into
   ``build/gate/runs/<base|head>/``.
3. :func:`udtbed.results.compare.compare_runs` over the base's runs and the head's: a row regresses when
   the head moved it the wrong way beyond the threshold with a Holm-corrected Welch p below
   alpha. The gate exits 1 then, 0 otherwise: noise does not block, a real regression does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from . import compare
from .. import REPO

GATE_DIR = REPO / "build" / "gate"
HEAD_BIN = REPO / "impl" / "target" / "release" / "udt"


class GateError(RuntimeError):
    """The gate could not run; the message says why and what to do."""


def _git(*args: str) -> str:
    p = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise GateError(f"git {' '.join(args)} failed: {p.stderr.strip()}")
    return p.stdout.strip()


def base_binary(ref: str, log: Callable[[str], None] = print) -> tuple[str, Path]:
    """The base commit's sha and its ``udt`` binary, built in its own worktree (once per sha)."""
    sha = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    tree = GATE_DIR / sha[:12]
    binary = tree / "impl" / "target" / "release" / "udt"
    if binary.exists():
        log(f"gate: base {ref} = {sha[:12]}, built before ({binary})")
        return sha, binary
    if not tree.exists():
        GATE_DIR.mkdir(parents=True, exist_ok=True)
        _git("worktree", "add", "--detach", str(tree), sha)
    log(f"gate: building base {ref} = {sha[:12]} in {tree} (cargo build --release -p udt-cli)")
    p = subprocess.run(["cargo", "build", "--release", "-p", "udt-cli"], cwd=tree / "impl")
    if p.returncode != 0 or not binary.exists():
        raise GateError(f"the base commit {sha[:12]} does not build (cargo exit {p.returncode}); see above")
    return sha, binary


def run_turns(
    base_bin: Path,
    head_bin: Path,
    repeat: int,
    run_args: list[str],
    log: Callable[[str], None] = print,
) -> tuple[list[Path], list[Path]]:
    """Each build's runs, taking turns; returns (base run dirs, head run dirs)."""
    out: dict[str, list[Path]] = {"base": [], "head": []}
    for r in range(repeat):
        for label, binary in (("base", base_bin), ("head", head_bin)):
            results = GATE_DIR / "runs" / label
            results.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, "-m", "udtbed", "run", *run_args, "--stacks", "udt-rs"]
            argv += ["--influx", "none", "--simulate", "none", "--report", "none", "--results", str(results)]
            log(f"gate: {label} run {r + 1} of {repeat}")
            p = subprocess.run(argv, env=os.environ | {"UDT_BIN": str(binary)}, cwd=REPO / "testbed")
            if p.returncode != 0:
                raise GateError(f"the {label} build's run {r + 1} failed (exit {p.returncode}); see above")
            out[label].append((results / "latest").resolve())
    return out["base"], out["head"]


def gate(
    ref: str,
    repeat: int,
    run_args: list[str],
    alpha: float = compare.ALPHA,
    threshold: float = compare.THRESHOLD,
    log: Callable[[str], None] = print,
    head_bin: Path | None = None,
) -> list[compare.Row]:
    """The rows of the head against ``ref`` (udtbed.results.compare); raises :class:`GateError`.
    ``head_bin``: the head's ``udt`` (default this checkout's release build), e.g. a build made
    elsewhere, or a wrapper that slows it on purpose to check that the gate catches it."""
    if repeat < 2:
        raise GateError("the gate needs at least 2 runs a build to tell a change from noise (--repeat 2 or more)")
    head = head_bin or HEAD_BIN
    if not head.exists():
        raise GateError(f"{head} is missing: run `make build` first" if head_bin is None else f"{head}: no such file")
    _, base_bin = base_binary(ref, log)
    base_runs, head_runs = run_turns(base_bin, head, repeat, run_args, log)
    return compare.compare_runs(base_runs, head_runs, [("udt-rs", "udt-rs")], alpha, threshold)


__all__ = ["GATE_DIR", "GateError", "base_binary", "gate", "run_turns"]
