"""The adapter template (conformance/template/) fits a stack outside this repository: it names
nothing of the tree, loads as a stack, and once its command line points at a real stack it
passes the suite from a copy anywhere on disk. It and the adapter contract say what the suite
does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from udtconf.diagnosis import log_crash
from udtharness.stacks import load

TEMPLATE = Path(__file__).resolve().parents[1] / "template"
UDT = Path(__file__).resolve().parents[2] / "impl" / "target" / "release" / "udt"
CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "conformance" / "adapter-contract.md"


def test_the_template_names_nothing_of_this_tree() -> None:
    for f in ("meta.toml", "entrypoint"):
        text = (TEMPLATE / f).read_text()
        assert "REPO_ROOT" not in text and "[bulk]" not in text and "impl/target" not in text, f


def test_a_copy_loads_as_a_stack_and_says_what_is_not_built(tmp_path: Path) -> None:
    d = shutil.copytree(TEMPLATE, tmp_path / "mystack")
    s = load(d)
    assert (s.name, s.protocol) == ("mystack", "udt")
    p = subprocess.run(
        [str(d / "entrypoint")], env={"TESTCASE": "handshake", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert p.returncode == 3 and "bin/mystack-cli is not built" in p.stderr, p.stderr
    unknown = subprocess.run([str(d / "entrypoint")], env={"TESTCASE": "no-such-case", "PATH": "/usr/bin:/bin"})
    assert unknown.returncode == 127


def _command_line(d: Path, tmp_path: Path, **env: str) -> str:
    """The command line a copy of the template runs for ``env``, from a CLI that prints it."""
    cli = d / "bin" / "mystack-cli"
    cli.parent.mkdir(exist_ok=True)
    cli.write_text('#!/usr/bin/env bash\necho "$@"\n')
    cli.chmod(0o755)
    base = {"PATH": "/usr/bin:/bin", "SERVER_ADDR": "127.0.0.1", "SERVER_PORT": "9000", "LOGDIR": str(tmp_path)}
    p = subprocess.run([str(d / "entrypoint")], env=base | env, capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_the_template_forces_mss_1500_where_the_suite_sets_none(tmp_path: Path) -> None:
    # issue 41: the contract said "Unset: the stack's default (1500)"; one stack's default was the
    # interface MTU (65 535 on the loopback), so the template and the contract now force 1500
    d = shutil.copytree(TEMPLATE, tmp_path / "mystack")
    sent = _command_line(d, tmp_path, ROLE="client", TESTCASE="transfer", INPUT="/in")
    assert sent == "send --connect 127.0.0.1:9000 --input /in --mss 1500"
    assert "--mss 1052" in _command_line(d, tmp_path, ROLE="server", TESTCASE="mss", OUTPUT="/out", MSS="1052")
    assert "Unset: **set 1500**" in CONTRACT.read_text()


def test_the_template_and_the_contract_set_client_addr_in_rendezvous_only() -> None:
    # issue 41: the contract said rendezvous only (what udtconf.udt.interop does), the template
    # "and a client's own port where set"
    text = (TEMPLATE / "entrypoint").read_text()
    assert "own port" not in text and "CLIENT_ADDR/CLIENT_PORT (rendezvous only" in text
    assert "| `CLIENT_ADDR`, `CLIENT_PORT` | both | **rendezvous only**" in CONTRACT.read_text()


def test_the_contract_names_javas_uncaught_exception_as_a_crash_line(tmp_path: Path) -> None:
    # issue 41: the crash regex matched Java's "Exception in thread", the contract did not say so
    log = tmp_path / "server.log"
    log.write_text('Exception in thread "main" java.lang.IllegalStateException: no cookie\n\tat udt.Listener.run\n')
    assert log_crash(log) == 'Exception in thread "main" java.lang.IllegalStateException: no cookie'
    assert "Java `Exception in thread`" in CONTRACT.read_text()


def test_the_contract_names_both_readiness_tables_and_the_deadline() -> None:
    # issue 41: it named /proc/net/udp alone and no deadline; udtharness.ports reads udp6 too
    # (a stack bound to [::]) and the runner waits 5 s
    text = " ".join(CONTRACT.read_text().split())
    assert "It reads `/proc/net/udp` and `/proc/net/udp6`" in text and "It waits at most **5 s**" in text


@pytest.mark.slow
@pytest.mark.skipif(not UDT.exists(), reason="udt not built (make build)")
def test_a_copy_wired_to_a_real_stack_passes_from_outside_the_tree(tmp_path: Path) -> None:
    d = shutil.copytree(TEMPLATE, tmp_path / "mystack")
    # "Your" CLI: udt-rs's, behind the template's command names.
    cli = d / "bin" / "mystack-cli"
    cli.parent.mkdir()
    cli.write_text(
        "#!/usr/bin/env bash\n"
        'cmd=$1; shift; [ "$cmd" = receive ] && cmd=recv\n'
        'args=(); for a in "$@"; do [ "$a" = --message-mode ] && a=--dgram; args+=("$a"); done\n'
        f'UDT_OFFLOAD=0 exec {UDT} "$cmd" "${{args[@]}}"\n'
    )
    cli.chmod(0o755)
    (d / "meta.toml").write_text((d / "meta.toml").read_text().replace('build = "make', 'build = ""\n# build = "make'))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "udtconf", "run", "--stack", str(d), "--against", "libudt"]
    argv += ["--cases", "handshake,transfer", "--probes", "none", "--out", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "server mystack" in p.stdout and "client libudt" in p.stdout
