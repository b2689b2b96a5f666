"""The active tester against every selected stack, in the role each probe needs.

``pass`` — behaved as the spec asks; ``tolerated``/``broken`` — the input is one where the spec
allows ignoring it or dropping the connection (4.11 drops it): recorded, not failed; ``fail`` —
crash, hang, corrupted or lost data, or a rule broken.

Each probe starts a fresh process of the stack with the TESTCASE it needs (``transfer``, or
``multiconnect`` for the probe with three connections; skipped when meta.toml does not list it)
and leaves ``probe.log`` and ``probe.pcap`` in its directory, which the report links.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_stack import script_stack
from udtconf.pcap import read_udp
from udtconf.stacks import Stack
from udtconf.tester import PROBES, Probe, run_probe
from verdicts import probe_verdict

pytestmark = [pytest.mark.slow, pytest.mark.active, pytest.mark.protocols("udt")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(stack: Stack, probe: Probe, results_dir: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    probe_verdict(stack, probe, run_probe, results_dir, record_property, spec="UDT4.md", plays=probe.role)


# ---------------------------------------------------------------------------------------------
# How the tester drives a stack (docs/conformance/adapter-contract.md, Active tester)

CRASHING_SERVER = r"""
import json, os, socket, sys
env = {k: os.environ.get(k) for k in ("ROLE", "TESTCASE", "CONNECTIONS", "CLIENT_ADDR", "CLIENT_PORT", "MSS")}
open(os.path.join(os.environ["LOGDIR"], f"env-{os.environ['TESTCASE']}.json"), "w").write(json.dumps(env))
if os.environ["TESTCASE"] not in ("transfer", "multiconnect"):
    raise SystemExit(127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((os.environ["SERVER_ADDR"], int(os.environ["SERVER_PORT"])))
s.recvfrom(65535)
print("thread 'main' panicked at src/listener.rs:42:9:\nindex out of bounds: the len is 3 but the index is 3",
      file=sys.stderr)
raise SystemExit(101)
"""


def _crashing_stack(tmp_path: Path) -> Stack:
    return script_stack(tmp_path, "crashy", CRASHING_SERVER, ["transfer", "multiconnect"])


def test_a_probe_runs_a_fresh_transfer_server_and_reports_its_crash(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/malformed-then-serve")
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    assert "crashy log: thread 'main' panicked at src/listener.rs:42:9: index out of bounds" in res.details
    env = json.loads((tmp_path / "probe/env-transfer.json").read_text())
    assert env == {
        "ROLE": "server",
        "TESTCASE": "transfer",
        "CONNECTIONS": None,
        "CLIENT_ADDR": None,
        "CLIENT_PORT": None,
        "MSS": None,
    }
    assert res.log is not None and res.verdict in res.log.read_text()
    assert res.pcap is not None and read_udp(res.pcap)  # what the tester sent, written by the tester


def test_the_many_connections_probe_asks_for_multiconnect(tmp_path: Path) -> None:
    probe = next(p for p in PROBES if p.id == "server/many-connections-one-port")
    assert probe.testcase == "multiconnect"
    res = run_probe(_crashing_stack(tmp_path), probe, tmp_path / "probe")
    assert res.failed
    env = json.loads((tmp_path / "probe/env-multiconnect.json").read_text())
    assert (env["TESTCASE"], env["CONNECTIONS"]) == ("multiconnect", "3")
