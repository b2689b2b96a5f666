"""Selection: stacks under test and their partners, cases, and the shard split."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from udtconf.selection import Selection, SelectionError, Shard, from_env, key_unit
from udtconf.udt.checks import rules_for
from udtharness.stacks import STACKS_DIR, TESTCASES, Stack, StackError


def _stack(root: Path, name: str, cases: str = '["handshake", "transfer"]') -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "meta.toml").write_text(f'name = "{name}"\nversion = "0"\ntestcases = {cases}\n')
    ep = d / "entrypoint"
    ep.write_text("#!/bin/sh\nexit 127\n")
    ep.chmod(0o755)
    return d


def names(cells: list[tuple[Stack, Stack, str]]) -> set[tuple[str, str, str]]:
    return {(s.name, c.name, k) for s, c, k in cells}


def test_plain_matrix_is_every_pair_of_the_selected_stacks() -> None:
    sel = from_env({"STACKS": "libudt,udt-rs", "CASES": "handshake"})
    assert sel.under_test == () and [s.name for s in sel.probe_stacks()] == ["libudt", "udt-rs"]
    pairs = {("libudt", "libudt"), ("libudt", "udt-rs"), ("udt-rs", "libudt"), ("udt-rs", "udt-rs")}
    assert names(sel.cells()) == {(s, c, "handshake") for s, c in pairs}
    assert from_env({}).cases == TESTCASES


def test_a_stack_under_test_runs_only_the_cells_that_involve_it(tmp_path: Path) -> None:
    tp = _stack(tmp_path, "tp")
    sel = from_env({"UDTC_STACK": str(tp), "CASES": "handshake,transfer"})  # default partners: the references
    assert [s.name for s in sel.stacks] == ["tp", "libudt", "udt-rs"]
    pairs = {(x, y) for x, y in [("tp", "tp"), ("tp", "libudt"), ("libudt", "tp"), ("tp", "udt-rs"), ("udt-rs", "tp")]}
    assert names(sel.cells()) == {(s, c, k) for s, c in pairs for k in ("handshake", "transfer")}
    assert [s.name for s in sel.probe_stacks()] == ["tp"], "the references' probes are not the third party's"
    alone = from_env({"UDTC_STACK": str(tp), "UDTC_AGAINST": "none", "CASES": "transfer"})
    assert names(alone.cells()) == {("tp", "tp", "transfer")}
    two = from_env({"UDTC_STACK": os.pathsep.join([str(tp), str(_stack(tmp_path, "tq"))]), "UDTC_AGAINST": "none"})
    assert {(s, c) for s, c, _ in names(two.cells())} == {("tp", "tp"), ("tp", "tq"), ("tq", "tp"), ("tq", "tq")}


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"CASES": "handshake,wrapp"}, r"unknown test case\(s\) \['wrapp'\]"),
        ({"UDTC_SHARD": "2"}, "write i/N"),
        ({"UDTC_SHARD": "0/3"}, "needs 1 <= i <= N"),
        ({"UDTC_AGAINST": "libudt"}, "set UDTC_STACK"),
        ({"UDTC_STACK": "TP", "STACKS": "libudt"}, "name their partners in UDTC_AGAINST"),
        ({"UDTC_STACK": "TP", "UDTC_AGAINST": "libudt,quic"}, r"unknown stack\(s\) \['quic'\]"),
        ({"UDTC_STACK": "TP", "UDTC_AGAINST": "tcp-bbr"}, "have no conformance test cases"),
        ({"UDTC_STACK": "NOWHERE"}, "not a directory"),
    ],
)
def test_selection_errors_say_what_to_change(tmp_path: Path, env: dict[str, str], error: str) -> None:
    tp = _stack(tmp_path, "tp")
    env = {k: v.replace("TP", str(tp)).replace("NOWHERE", str(tmp_path / "nowhere")) for k, v in env.items()}
    with pytest.raises((SelectionError, StackError), match=error):
        from_env(env)


def test_stacks_dir_comes_from_the_given_environment(tmp_path: Path) -> None:
    _stack(tmp_path, "theirs")
    sel = from_env({"STACKS_DIR": str(tmp_path), "STACKS": "theirs,libudt"})
    assert [s.name for s in sel.stacks] == ["theirs", "libudt"]
    assert sel.stacks[0].path == tmp_path / "theirs"


def _keys(sel: Selection) -> set[str]:
    """Every test key the suite would run for the selection (as conftest.py builds them)."""
    keys = set()
    for s, c, case in sel.cells():
        keys |= {f"interop/{s.name}/{c.name}/{case}", f"codec/{s.name}/{c.name}/{case}"}
        keys |= {f"wire/{s.name}/{c.name}/{case}/{r.id}" for r in rules_for(case)}
    for s in sel.probe_stacks():
        keys |= {f"active/{s.name}/client/nak-duplicates", f"adapter/{s.name}/meta"}
    return keys


@pytest.mark.parametrize("n", [1, 2, 3, 5, 40])
def test_shards_partition_the_selection_and_keep_a_cell_together(tmp_path: Path, n: int) -> None:
    tp = _stack(tmp_path, "tp", '["handshake", "transfer", "loss", "close"]')
    env = {"UDTC_STACK": str(tp), "CASES": "handshake,transfer,loss,close"}
    whole = _keys(from_env(env))
    shards = [_keys(from_env({**env, "UDTC_SHARD": f"{i}/{n}"})) for i in range(1, n + 1)]
    assert set().union(*shards) == whole, "the union of the shards is the whole selection"
    assert sum(len(s) for s in shards) == len(whole), "no key in two shards"
    for keys in shards:
        units = {key_unit(k) for k in keys}
        others = set().union(*(s for s in shards if s is not keys))
        assert not units & {key_unit(k) for k in others}, "a cell's interop, codec and wire tests share a shard"
    if n <= len({key_unit(k) for k in whole}):
        assert all(shards), "round-robin leaves no shard empty while there are units for it"


def test_needed_stacks_are_the_ones_this_shard_runs(tmp_path: Path) -> None:
    tp = _stack(tmp_path, "tp")
    env = {"UDTC_STACK": str(tp), "UDTC_AGAINST": "libudt,udt-rs", "CASES": "handshake"}
    assert [s.name for s in from_env(env).needed_stacks()] == ["tp", "libudt", "udt-rs"]
    needed = [{s.name for s in from_env({**env, "UDTC_SHARD": f"{i}/6"}).needed_stacks()} for i in range(1, 7)]
    assert any(len(n) < 3 for n in needed), "a shard builds only the stacks its cells use"


def test_shard_places_a_unit_outside_the_matrix_by_its_name() -> None:
    units = ["cell/a/a/handshake", "stack/a"]
    owners = [i for i in (1, 2, 3) if Shard(i, 3).owns("test/tests/test_wire.py::test_x", units)]
    assert len(owners) == 1
    assert [i for i in (1, 2) if Shard(i, 2).owns("stack/a", units)] == [2]
    assert str(Shard.parse(" 2/4 ")) == "2/4"


def test_registry_stack_given_by_path_is_the_same_stack() -> None:
    sel = from_env({"UDTC_STACK": str(STACKS_DIR / "libudt"), "UDTC_AGAINST": "none", "CASES": "handshake"})
    assert sel.under_test == ("libudt",) and names(sel.cells()) == {("libudt", "libudt", "handshake")}


def _sabul_stack(root: Path, name: str) -> Path:
    d = _stack(root, name, '["handshake", "mss", "transfer", "loss", "empty"]')
    (d / "meta.toml").write_text((d / "meta.toml").read_text() + 'protocol = "sabul"\n')
    return d


def test_stacks_pair_only_within_their_protocol_and_run_its_cases() -> None:
    sel = from_env({"STACKS": "libudt,sabul-py,udt-rs"})
    protocols = {(s.protocol, c.protocol) for s, c, _ in sel.all_cells()}
    assert protocols == {("udt", "udt"), ("sabul", "sabul")}
    sabul = {(s, c, k) for s, c, k in names(sel.all_cells()) if "sabul-py" in (s, c)}
    assert sabul == {("sabul-py", "sabul-py", k) for k in ("handshake", "mss", "transfer", "loss", "empty")}
    udt_cases = {k for s, c, k in names(sel.all_cells()) if s != "sabul-py"}
    assert udt_cases == set(TESTCASES) - {"empty"}, "UDT pairs run the UDT cases, as before"
    only_empty = from_env({"STACKS": "libudt,sabul-py", "CASES": "empty"})
    assert names(only_empty.cells()) == {("sabul-py", "sabul-py", "empty")}


def test_a_sabul_stack_under_test_gets_sabul_partners(tmp_path: Path) -> None:
    mine = _sabul_stack(tmp_path, "sabul-mine")
    sel = from_env({"UDTC_STACK": str(mine), "CASES": "transfer"})
    assert [s.name for s in sel.stacks] == ["sabul-mine", "sabul", "sabul-py"]
    assert names(sel.cells()) == {
        ("sabul-mine", "sabul-mine", "transfer"),
        ("sabul-mine", "sabul", "transfer"),
        ("sabul", "sabul-mine", "transfer"),
        ("sabul-mine", "sabul-py", "transfer"),
        ("sabul-py", "sabul-mine", "transfer"),
    }
    # a UDT partner named explicitly pairs with nothing of a SABUL stack
    mixed = from_env({"UDTC_STACK": str(mine), "UDTC_AGAINST": "libudt", "CASES": "transfer"})
    assert names(mixed.cells()) == {("sabul-mine", "sabul-mine", "transfer")}
    tp = _stack(tmp_path, "tp")
    both = from_env({"UDTC_STACK": os.pathsep.join([str(tp), str(mine)]), "CASES": "handshake"})
    assert [s.name for s in both.stacks] == ["tp", "sabul-mine", "libudt", "udt-rs", "sabul", "sabul-py"]


def test_a_udt_run_lists_only_udt_cases(tmp_path: Path) -> None:
    tp = _stack(tmp_path, "tp")
    sel = from_env({"UDTC_STACK": str(tp)})
    assert "empty" not in sel.cases and "handshake" in sel.cases, "SABUL's empty case is not a UDT case"
    assert from_env({"STACKS": "libudt,udt-rs"}).cases == tuple(c for c in TESTCASES if c != "empty")


def test_probes_none_or_a_list_of_ids_and_globs_narrow_the_probes(tmp_path: Path) -> None:
    tp = _stack(tmp_path, "tp")
    every = from_env({"UDTC_STACK": str(tp)})
    assert every.probes is None and every.probe_selected("client/nak-duplicates")
    none = from_env({"UDTC_STACK": str(tp), "UDTC_PROBES": "none"})
    assert none.probes == () and not none.probe_selected("server/malformed-then-serve")
    some = from_env({"UDTC_STACK": str(tp), "UDTC_PROBES": "server/*,client/nak-duplicates"})
    assert some.probe_selected("server/malformed-then-serve") and some.probe_selected("client/nak-duplicates")
    assert not some.probe_selected("client/early-nak")
    with pytest.raises(SelectionError, match=r"no probe of udt matches \['server/malformed'\]"):
        from_env({"UDTC_STACK": str(tp), "UDTC_PROBES": "server/malformed"})
    with pytest.raises(SelectionError, match="sender/zero-rate is a probe of frtp, not of udt"):
        from_env({"UDTC_STACK": str(tp), "UDTC_PROBES": "sender/zero-rate"})  # an FRTP probe for a UDT stack
