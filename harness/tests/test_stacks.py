"""The stack registry: meta.toml keys, the [bulk] table, registry() and discover()."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from udtharness.stacks import (
    REPO_ROOT,
    STACKS_DIR,
    Bulk,
    StackError,
    build,
    discover,
    load,
    reference_stack,
    reference_stacks,
    registry,
    search_path,
    stop,
)

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
    stacks = registry(STACKS_DIR)
    assert list(stacks) == [
        "frtp",
        "frtp-py",
        "libudt",
        "sabul",
        "sabul-py",
        "tcp-bbr",
        "tcp-cubic",
        "tcp-reno",
        "udt-rs",
    ]
    assert [s.name for s in discover(None, STACKS_DIR)] == ["frtp", "frtp-py", "libudt", "sabul", "sabul-py", "udt-rs"]
    assert stacks["frtp"].bulk and stacks["frtp"].bulk.contract == "frtp-cli"
    assert stacks["sabul-py"].protocol == "sabul" and stacks["sabul-py"].bulk is None
    for name in ("frtp", "frtp-py"):
        assert stacks[name].protocol == "frtp" and stacks[name].testcases == ("handshake", "transfer", "loss", "empty")
    sabul = stacks["sabul"]
    assert sabul.protocol == "sabul" and sabul.bulk and sabul.bulk.contract == "sabul-cli" and sabul.bulk.build
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


def test_each_protocol_s_reference_stack_is_the_one_its_meta_marks() -> None:
    assert reference_stacks(registry(STACKS_DIR)) == {"udt": "libudt"}
    assert reference_stack("udt", registry(STACKS_DIR)) == "libudt"


def test_a_protocol_without_a_reference_stack_is_an_error_saying_what_to_mark(tmp_path: Path) -> None:
    _stack(tmp_path, "mine", 'testcases = ["transfer"]\n')
    _stack(tmp_path, "theirs", 'testcases = ["transfer"]\nreference = true\n')
    assert reference_stack("udt", registry(tmp_path)) == "theirs"
    with pytest.raises(StackError, match="no stack of protocol 'sabul' is marked reference = true"):
        reference_stack("sabul", registry(tmp_path))


def test_shipped_stacks_dir_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STACKS_DIR", raising=False)
    assert registry() == registry(STACKS_DIR)


# ----------------------------------------------------------------- stacks outside the tree


def test_requires_are_relative_to_the_stack_directory_with_repo_root_expanded(tmp_path: Path) -> None:
    d = _stack(tmp_path, "x", 'testcases = ["transfer"]\nrequires = ["bin/peer", "${REPO_ROOT}/build/y", "/abs/z"]\n')
    s = load(d)
    assert s.requires == (d / "bin/peer", REPO_ROOT / "build/y", Path("/abs/z"))
    assert s.missing() == [str(d / "bin/peer"), str(REPO_ROOT / "build/y"), "/abs/z"]
    (d / "bin").mkdir()
    (d / "bin/peer").write_text("")
    assert str(d / "bin/peer") not in s.missing()


def test_shipped_stacks_require_their_products_under_the_repo_and_say_how_to_build_them() -> None:
    stacks = registry(STACKS_DIR)
    assert stacks["libudt"].requires == (REPO_ROOT / "build/libudt-peer",)
    assert stacks["udt-rs"].requires == (REPO_ROOT / "impl/target/release/udt",)
    assert all('make -C "$REPO_ROOT"' in (stacks[n].build or "") for n in ("libudt", "udt-rs"))


def test_a_variable_other_than_repo_root_in_requires_is_an_error(tmp_path: Path) -> None:
    d = _stack(tmp_path, "x", 'testcases = ["transfer"]\nrequires = ["$HOME/peer"]\n')
    with pytest.raises(StackError, match=r"x/meta.toml: requires entry '\$HOME/peer': only \$\{REPO_ROOT\}"):
        load(d)


def test_stacks_dir_adds_stacks_before_the_shipped_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _stack(a, "mine", 'testcases = ["transfer"]\n')
    _stack(b, "theirs", 'testcases = ["handshake"]\n')
    monkeypatch.setenv("STACKS_DIR", f"{a}{os.pathsep}{b}")
    assert search_path() == [a, b, STACKS_DIR]
    assert {"mine", "theirs", "libudt", "udt-rs"} <= set(registry())
    assert [s.name for s in discover("mine,libudt")] == ["mine", "libudt"]
    assert registry()["mine"].path == a / "mine"


def test_stacks_dir_that_is_not_a_directory_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKS_DIR", str(tmp_path / "nope"))
    with pytest.raises(StackError, match=r"STACKS_DIR: .*nope is not a directory"):
        registry()


def test_bad_meta_in_stacks_dir_names_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stack(tmp_path, "broken", "testcases = [\n")
    monkeypatch.setenv("STACKS_DIR", str(tmp_path))
    with pytest.raises(StackError, match=f"{tmp_path}/broken/meta.toml: not valid TOML"):
        discover()


def test_a_name_defined_twice_is_an_error_naming_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stack(tmp_path, "libudt", 'testcases = ["transfer"]\n')
    monkeypatch.setenv("STACKS_DIR", str(tmp_path))
    with pytest.raises(StackError) as e:
        registry()
    assert f"two stacks named 'libudt': {tmp_path}/libudt/meta.toml and {STACKS_DIR}/libudt/meta.toml" in str(e.value)
    monkeypatch.delenv("STACKS_DIR")
    other = _stack(tmp_path / "elsewhere", "udt-rs", 'testcases = ["transfer"]\n')
    with pytest.raises(StackError, match="two stacks named 'udt-rs'"):
        registry(stacks=[other])


def test_a_stack_given_by_path_joins_the_registry(tmp_path: Path) -> None:
    d = _stack(tmp_path / "far" / "away", "tp", 'testcases = ["transfer"]\n')
    assert registry(stacks=[d])["tp"].path == d
    assert registry(stacks=[STACKS_DIR / "libudt"])["libudt"].path == STACKS_DIR / "libudt"  # no clash with itself
    with pytest.raises(StackError, match="no meta.toml"):
        registry(stacks=[tmp_path])
    with pytest.raises(StackError, match="not a directory"):
        registry(stacks=[tmp_path / "missing"])


def test_build_runs_in_the_stack_directory_with_repo_root_set(tmp_path: Path) -> None:
    d = _stack(tmp_path, "x", 'testcases = ["transfer"]\nrequires = ["out"]\nbuild = "echo \\"$REPO_ROOT\\" > out"\n')
    build(load(d), tmp_path / "logs/build-x.log")
    assert (d / "out").read_text().strip() == str(REPO_ROOT)
    assert "echo" in (tmp_path / "logs/build-x.log").read_text()


def test_failed_build_names_the_command_and_shows_the_log_tail(tmp_path: Path) -> None:
    d = _stack(tmp_path, "x", 'testcases = ["transfer"]\nbuild = "echo compiler says no; exit 3"\n')
    with pytest.raises(StackError) as e:
        build(load(d), tmp_path / "build-x.log")
    msg = str(e.value)
    assert "stack 'x': build failed (exit 3): `echo compiler says no; exit 3`" in msg
    assert "compiler says no" in msg and str(tmp_path / "build-x.log") in msg


def test_build_that_leaves_requires_missing_is_an_error(tmp_path: Path) -> None:
    d = _stack(tmp_path, "x", 'testcases = ["transfer"]\nrequires = ["peer"]\nbuild = "true"\n')
    with pytest.raises(StackError, match=r"stack 'x' is not built: .*peer missing \(its build `true` ran"):
        build(load(d), tmp_path / "build-x.log")
    d2 = _stack(tmp_path, "y", 'testcases = ["transfer"]\nrequires = ["peer"]\n')
    with pytest.raises(StackError, match="meta.toml has no 'build'"):
        build(load(d2), tmp_path / "build-y.log")


def test_stop_leaves_no_process_of_the_group_behind_even_a_stopped_orphan(tmp_path: Path) -> None:
    # An entrypoint that froze its child (as a deaf-server adapter does) and exited: the child
    # is stopped, so SIGTERM alone stays pending; stop() must still end it.
    d = tmp_path / "orphaner"
    d.mkdir()
    (d / "meta.toml").write_text('name = "orphaner"\nversion = "0"\ntestcases = ["transfer"]\n')
    (d / "entrypoint").write_text(
        '#!/usr/bin/env bash\nsleep 300 &\necho $! > "$LOGDIR/child.pid"\nkill -STOP $!\nexit 0\n'
    )
    (d / "entrypoint").chmod(0o755)
    p = load(d).start("server", "transfer", tmp_path / "logs")
    assert p.wait(timeout=10) == 0
    child = int((tmp_path / "logs/child.pid").read_text())
    assert running(child)
    stop(p)
    deadline = time.monotonic() + 5
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child)


def running(pid: int) -> bool:
    """Whether ``pid`` is alive: not gone and not a zombie (an orphan is reaped by init, not us)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
