"""A third party's stack, as they would run it: an adapter in a directory outside the repository,
built by its own ``build`` command, run through ``python -m udtconf run --stack PATH``.

Two adapters wrap our ``udt`` binary: ``tp-good`` follows the contract; ``tp-liar``'s client
sends everything and then exits 1. The run must exit 0 for the first and 1 for the second, its
results must hold exactly the cells that involve the stack under test (never libudt × libudt),
and every failure must be pinned on ``tp-liar``, none on libudt. A third, ``tp-rude``, is a
Python stack built on the active tester's endpoint that never sends an ACK2: a wire-level
culprit that the rule must name, not the libudt peer whose ACKs go unanswered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from udtharness.stacks import REPO_ROOT, registry

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


def run_suite(stack: Path, out: Path) -> tuple[int, dict[str, dict[str, Any]], dict[str, Any]]:
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
    assert hs["status"] == "failed" and "client tp-liar exit 1" in str(hs["message"])
    assert "server libudt exit" not in str(hs["message"])
    # fail-fast: the pair's transfer is not run after its handshake failed
    tr = entries["interop/libudt/tp-liar/transfer"]
    assert tr["status"] == "skipped"
    assert "handshake failed for server libudt × client tp-liar" in str(tr["message"])
    gating = [str(o["key"]) for o in gate["gating"]]
    assert gating and all("tp-liar" in k for k in gating)
    assert "interop/tp-liar/tp-liar/handshake" in gating and "interop/libudt/tp-liar/handshake" in gating
    # the probes that drive tp-liar as a client fail on tp-liar, never on libudt
    assert any(k.startswith("active/tp-liar/client/") for k in gating)


PY_ENTRYPOINT = """#!{python}
# A UDT4 endpoint on the suite's Python UDT4 peer (udtconf.udt.peer) that never sends ACK2 (UDT4.md §8.6).
import os, sys
sys.path.insert(0, os.path.join(os.environ.get("REPO_ROOT", "."), "conformance"))
from udtconf.udt.peer import ListenerSession, Wire, connect
from udtconf.udt.wire import Ack2

if os.environ.get("TESTCASE") != "handshake":
    sys.exit(127)
server = (os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"]))
if os.environ["ROLE"] == "server":
    listener = ListenerSession(Wire(server))
    listener.accept(timeout=20)
    listener.run(20, until=lambda: listener.shutdown_seen)
    open(os.environ["OUTPUT"], "wb").write(listener.stream())
    sys.exit(0 if listener.shutdown_seen else 1)
wire = Wire()
session = connect(wire, server)
send = wire.send
wire.send = lambda pkt, to: None if isinstance(pkt, Ack2) else send(pkt, to)
ok = session.send_stream(open(os.environ["INPUT"], "rb").read(), timeout=20)
session.pump(0.5)  # answer nothing, but see the ACKs that keep coming
session.shutdown()
sys.exit(0 if ok else 1)
"""


def test_a_wire_level_culprit_is_named_not_the_peer_it_shortchanges(tmp_path: Path, reference_built: None) -> None:
    d = tmp_path / "adapters" / "tp-rude"
    d.mkdir(parents=True)
    (d / "peer.py").write_text(PY_ENTRYPOINT.replace("{python}", sys.executable))
    (d / "meta.toml").write_text(
        'name = "tp-rude"\nversion = "0"\ntestcases = ["handshake"]\nrequires = ["entrypoint"]\n'
        'build = "cp peer.py entrypoint && chmod +x entrypoint"\n'
    )
    (d / "entrypoint").write_text("#!/bin/sh\nexit 127\n")  # replaced by the build
    (d / "entrypoint").chmod(0o755)

    def run(fail_on: str) -> tuple[int, dict[str, Any]]:
        out = tmp_path / f"out-{fail_on}"
        argv = [sys.executable, "-m", "udtconf", "run", "--stack", str(d), "--against", "libudt"]
        argv += ["--cases", "handshake", "--fail-on", fail_on, "--out", str(out)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        print(p.stdout[-6000:], p.stderr[-3000:])
        return p.returncode, json.loads((out / "results.json").read_text())

    rc, doc = run("all")
    entries = {e["key"]: e for e in doc["entries"]}
    if not any(k.startswith("wire/") and e["status"] != "skipped" for k, e in entries.items()):
        pytest.skip("no capture (needs root for dumpcap/tcpdump)")

    assert rc == 1
    assert entries["interop/libudt/tp-rude/handshake"]["status"] == "passed", "the data itself arrives"
    ack2 = entries["wire/libudt/tp-rude/handshake/udt4/8.6/ack2-for-every-ack"]
    assert ack2["status"] == "failed"
    assert ack2["violations"] and all(v.startswith("[tp-rude as client]") for v in ack2["violations"])
    gating = {o["key"] for o in doc["gate"]["gating"]}
    assert "wire/libudt/tp-rude/handshake/udt4/8.6/ack2-for-every-ack" in gating
    for key in gating:
        assert not any(str(v).startswith("[libudt as") for v in entries[key]["violations"]), key
    # a SHOULD rule: reported, but not gating under the default gate
    rc, doc = run("must")
    assert rc == 0
    reported = {o["key"] for o in doc["gate"]["reported"]}
    assert "wire/libudt/tp-rude/handshake/udt4/8.6/ack2-for-every-ack" in reported
