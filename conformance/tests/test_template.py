"""The adapter template (conformance/template/) fits a stack outside this repository: it names
nothing of the tree, loads as a stack, and once its command line points at a real stack it
passes the suite from a copy anywhere on disk."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from udtharness.stacks import load

TEMPLATE = Path(__file__).resolve().parents[1] / "template"
UDT = Path(__file__).resolve().parents[2] / "impl" / "target" / "release" / "udt"


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
