"""A third party's stack, as they would run it: an adapter in a directory outside the repository,
built by its own ``build`` command, run through ``python -m udtconf run --stack PATH``.

Two adapters wrap our ``udt`` binary: ``tp-good`` follows the contract; ``tp-liar``'s client
sends everything and then exits 1. The run must exit 0 for the first and 1 for the second, its
results must hold exactly the cells that involve the stack under test (never libudt × libudt),
and every failure must be pinned on ``tp-liar``, none on libudt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from udtconf.stacks import REPO_ROOT, registry

pytestmark = [pytest.mark.slow, pytest.mark.interop]

UDT = REPO_ROOT / "impl/target/release/udt"

BUILD_SH = """#!/bin/sh
# The adapter's build: a helper next to the entrypoint that runs the stack's binary.
set -e
mkdir -p bin
printf '#!/bin/sh\\nexec "%s" "$@"\\n' "$REPO_ROOT/impl/target/release/udt" > bin/peer
chmod +x bin/peer
echo "built $(pwd)/bin/peer"
"""

ENTRYPOINT = """#!/usr/bin/env bash
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${TESTCASE:-}" in handshake|transfer) ;; *) exit 127 ;; esac
peer="$here/bin/peer"
[ -x "$peer" ] || { echo "not built: $peer" >&2; exit 3; }
export UDT_OFFLOAD=0
case "$ROLE" in
  server) exec "$peer" recv --listen "$SERVER_ADDR:$SERVER_PORT" --output "$OUTPUT" ;;
  client) CLIENT ;;
esac
"""


def make_adapter(root: Path, name: str, client: str) -> Path:
    d = root / "adapters" / name
    d.mkdir(parents=True)
    (d / "meta.toml").write_text(
        f'name = "{name}"\nversion = "0.0.1"\ntestcases = ["handshake", "transfer"]\n'
        'requires = ["bin/peer", "${REPO_ROOT}/impl/target/release/udt"]\nbuild = "sh build.sh"\n'
    )
    (d / "build.sh").write_text(BUILD_SH)
    ep = d / "entrypoint"
    ep.write_text(ENTRYPOINT.replace("CLIENT", client))
    ep.chmod(0o755)
    return d


def run_suite(stack: Path, out: Path) -> tuple[int, dict[str, dict[str, object]], dict[str, object]]:
    argv = [sys.executable, "-m", "udtconf", "run", "--stack", str(stack), "--against", "libudt"]
    argv += ["--cases", "handshake,transfer", "--out", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=stack.parent)
    print(p.stdout[-6000:], p.stderr[-3000:])
    doc = json.loads((out / "results.json").read_text())
    return p.returncode, {e["key"]: e for e in doc["entries"]}, doc["gate"]


def cells(name: str) -> set[str]:
    pairs = [(name, name), (name, "libudt"), ("libudt", name)]
    return {f"interop/{s}/{c}/{case}" for s, c in pairs for case in ("handshake", "transfer")}


@pytest.fixture
def reference_built() -> None:
    if not os.access(UDT, os.X_OK):
        pytest.skip(f"{UDT} not built (make build-udt): the adapters wrap it")
    missing = registry()["libudt"].missing()
    if missing:
        pytest.skip(f"libudt not built: {missing} (make build/libudt-peer)")


def test_passing_stack_outside_the_tree_exits_0_with_only_its_cells(tmp_path: Path, reference_built: None) -> None:
    stack = make_adapter(
        tmp_path, "tp-good", 'exec "$peer" send --connect "$SERVER_ADDR:$SERVER_PORT" --input "$INPUT"'
    )
    assert not stack.resolve().is_relative_to(REPO_ROOT)
    rc, entries, gate = run_suite(stack, tmp_path / "out")

    assert rc == 0, gate
    assert (stack / "bin/peer").is_file(), "the adapter's own build command made its helper"
    assert "built" in (tmp_path / "out/build-tp-good.log").read_text()
    assert {k for k in entries if k.startswith("interop/")} == cells("tp-good")
    assert all(entries[k]["status"] == "passed" for k in cells("tp-good"))
    assert not [k for k in entries if "libudt/libudt" in k], "the reference against itself is not run"
    assert {k.split("/")[1] for k in entries if k.startswith(("active/", "adapter/"))} == {"tp-good"}
    assert gate["mode"] == "must" and gate["passed"] and not gate["gating"]
    page = (tmp_path / "out/matrix.html").read_text()
    assert "<th>tp-good</th>" in page and "Gate: must" in page


def test_failing_stack_exits_1_and_is_blamed_not_libudt(tmp_path: Path, reference_built: None) -> None:
    client = '"$peer" send --connect "$SERVER_ADDR:$SERVER_PORT" --input "$INPUT"; exit 1'
    stack = make_adapter(tmp_path, "tp-liar", client)
    rc, entries, gate = run_suite(stack, tmp_path / "out")

    assert rc == 1
    assert {k for k in entries if k.startswith("interop/")} == cells("tp-liar")
    # tp-liar as server with libudt's client is fine; every cell with tp-liar's client fails on it.
    assert entries["interop/tp-liar/libudt/transfer"]["status"] == "passed"
    hs = entries["interop/libudt/tp-liar/handshake"]
    assert hs["status"] == "failed" and "client tp-liar#0 exit 1" in str(hs["message"])
    assert "server libudt exit" not in str(hs["message"])
    # fail-fast: the pair's transfer is not run after its handshake failed
    tr = entries["interop/libudt/tp-liar/transfer"]
    assert tr["status"] == "skipped"
    assert "handshake failed for server libudt × client tp-liar" in str(tr["message"])
    gating = [str(o["key"]) for o in gate["gating"]]  # type: ignore[union-attr]
    assert gating and all("tp-liar" in k for k in gating)
    assert "interop/tp-liar/tp-liar/handshake" in gating and "interop/libudt/tp-liar/handshake" in gating
    # the probes that drive tp-liar as a client fail on tp-liar, never on libudt
    assert any(k.startswith("active/tp-liar/client/") for k in gating)
