"""The stack registry: meta.toml keys, the [bulk] table, registry() and discover()."""

from __future__ import annotations

from pathlib import Path

import pytest
from udtconf.stacks import REPO_ROOT, STACKS_DIR, Bulk, StackError, discover, load, registry

UDT_CLI_BULK = '[bulk]\ncontract = "udt-cli"\nbinary = "build/x-peer"\nbinary_env = "X_PEER"\nbuild = "make x"\n'
IPERF3_BULK = '[bulk]\ncontract = "iperf3"\ncongestion_control = "cubic"\n'


def _stack(root: Path, name: str, meta: str, entrypoint: bool = True) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "meta.toml").write_text(f'name = "{name}"\nversion = "0"\n{meta}')
    if entrypoint:
        ep = d / "entrypoint"
        ep.write_text("#!/bin/sh\nexit 127\n")
        ep.chmod(0o755)
    return d


def _tcp(root: Path, name: str = "tcp-x", bulk: str = IPERF3_BULK) -> Path:
    return _stack(root, name, f'protocol = "tcp"\ntestcases = []\n{bulk}', entrypoint=False)


def test_shipped_registry_names_every_stack_once() -> None:
    stacks = registry()
    assert list(stacks) == ["libudt", "tcp-bbr", "tcp-cubic", "udt-rs"]
    assert [s.name for s in discover()] == ["libudt", "udt-rs"]
    for name in ("udt-rs", "libudt"):
        s = stacks[name]
        assert s.protocol == "udt" and s.conformance and s.bulk and s.bulk.contract == "udt-cli"
        assert s.bulk.binary is not None and s.bulk.binary.is_absolute() and s.bulk.build
    for cc in ("cubic", "bbr"):
        s = stacks[f"tcp-{cc}"]
        assert s.protocol == "tcp" and not s.conformance and s.testcases == ()
        assert s.bulk == Bulk("iperf3", congestion_control=cc)


def test_udt_cli_binary_is_repo_relative_unless_its_variable_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _stack(tmp_path, "x", f'testcases = ["transfer"]\n{UDT_CLI_BULK}')
    monkeypatch.delenv("X_PEER", raising=False)
    assert load(d).bulk == Bulk("udt-cli", REPO_ROOT / "build/x-peer", "X_PEER", "make x")
    monkeypatch.setenv("X_PEER", str(tmp_path / "elsewhere"))
    bulk = load(d).bulk
    assert bulk is not None and bulk.binary == tmp_path / "elsewhere"


def test_bulk_binary_says_how_to_build_a_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_PEER", str(tmp_path / "not-built"))
    stack = load(_stack(tmp_path, "x", f'testcases = ["transfer"]\n{UDT_CLI_BULK}'))
    with pytest.raises(StackError, match=r"not built: .*not-built.*`make x`.*\$X_PEER"):
        stack.bulk_binary()
    binary = tmp_path / "not-built"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert stack.bulk_binary() == binary


def test_tcp_entry_needs_no_entrypoint(tmp_path: Path) -> None:
    s = load(_tcp(tmp_path))
    assert s.protocol == "tcp" and not s.conformance and s.bulk == Bulk("iperf3", congestion_control="cubic")
    with pytest.raises(StackError, match="no \\[bulk\\] binary"):
        s.bulk_binary()


@pytest.mark.parametrize(
    ("meta", "error"),
    [
        ('protocol = "quic"\ntestcases = []\n', "protocol 'quic' is not one of"),
        ('protocol = "tcp"\ntestcases = ["transfer"]\n', "a 'tcp' stack lists none"),
        ('testcases = "transfer"\n', "'testcases' must be a list of strings"),
        ('testcases = []\nbulk = "udt-cli"\n', "'bulk' must be a table"),
        ('testcases = []\n[bulk]\ncontract = "ftp"\nbinary = "x"\n', "contract 'ftp' is not one of"),
        ("testcases = []\n[bulk]\nbinary = 'x'\n", "[bulk] needs 'contract'"),
        ('testcases = []\n[bulk]\ncontract = "udt-cli"\n', "'udt-cli' needs 'binary'"),
        ('protocol = "tcp"\ntestcases = []\n[bulk]\ncontract = "iperf3"\n', "'iperf3' needs 'congestion_control'"),
        (
            'testcases = []\n[bulk]\ncontract = "iperf3"\ncongestion_control = "bbr"\n',
            "runs tcp, but protocol is 'udt'",
        ),
        (
            'testcases = []\n[bulk]\ncontract = "udt-cli"\nbinary = "x"\ncongestion_control = "bbr"\n',
            "only applies to contract 'iperf3'",
        ),
        ('testcases = []\n[bulk]\ncontract = "udt-cli"\nbinary = "x"\nbinray_env = "X"\n', "unknown key"),
        ('testcases = []\n[bulk]\ncontract = "udt-cli"\nbinary = 3\n', "'bulk.binary' must be a string"),
        ("testcases = [\n", "not valid TOML"),
    ],
)
def test_bad_meta_is_rejected_naming_the_file(tmp_path: Path, meta: str, error: str) -> None:
    d = _stack(tmp_path, "bad", meta, entrypoint=False)
    with pytest.raises(StackError, match="bad/meta.toml") as e:
        load(d)
    assert error in str(e.value)


def test_entrypoint_is_required_only_with_testcases(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="entrypoint missing"):
        load(_stack(tmp_path, "a", 'testcases = ["transfer"]\n', entrypoint=False))
    assert not load(_stack(tmp_path, "b", "testcases = []\n", entrypoint=False)).conformance


def test_registry_lists_all_and_discover_only_conformance_stacks(tmp_path: Path) -> None:
    _stack(tmp_path, "zeta", 'testcases = ["transfer"]\n')
    _stack(tmp_path, "alpha", 'testcases = ["handshake"]\n')
    _tcp(tmp_path, "tcp-x")
    (tmp_path / "not-a-stack").mkdir()
    assert list(registry(tmp_path)) == ["alpha", "tcp-x", "zeta"]
    assert [s.name for s in discover(None, tmp_path)] == ["alpha", "zeta"]
    assert [s.name for s in discover("zeta, alpha", tmp_path)] == ["zeta", "alpha"]
    with pytest.raises(StackError, match=r"\['tcp-x'\] have no conformance test cases"):
        discover("alpha,tcp-x", tmp_path)
    with pytest.raises(StackError, match=r"unknown stack\(s\) \['udt'\]; conformance stacks: \['alpha', 'zeta'\]"):
        discover("udt", tmp_path)


def test_shipped_stacks_dir_is_the_default() -> None:
    assert registry() == registry(STACKS_DIR)
