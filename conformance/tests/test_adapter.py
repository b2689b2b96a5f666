"""The adapter contract itself: metadata and the compliance pre-check (unknown case → 127)."""

from __future__ import annotations

from pathlib import Path

import pytest
from udtharness.stacks import Stack


def test_meta(stack: Stack) -> None:
    assert stack.version
    unknown = set(stack.testcases) - set(stack.protocol_testcases)
    assert not unknown, f"{stack.name}: meta.toml lists test cases {unknown} that {stack.protocol} does not define"


def test_unknown_testcase_exits_127(stack: Stack, tmp_path: Path) -> None:
    ok, why = stack.compliance_check(tmp_path)
    assert ok, f"{stack.name}: {why}"


def _fake_stack(root: Path, name: str, script: str) -> Path:
    d = root / name
    d.mkdir()
    (d / "meta.toml").write_text(f'name = "{name}"\nversion = "0"\ntestcases = ["transfer"]\n')
    ep = d / "entrypoint"
    ep.write_text("#!/usr/bin/env bash\n" + script + "\n")
    ep.chmod(0o755)
    return d


def test_compliance_check_rejects_a_stack_that_accepts_anything(tmp_path: Path) -> None:
    from udtharness.stacks import load

    bad = load(_fake_stack(tmp_path, "yes-man", "exit 0"))
    ok, why = bad.compliance_check(tmp_path / "logs")
    assert not ok and "expected 127" in why
    good = load(_fake_stack(tmp_path, "strict", '[ "$TESTCASE" = transfer ] || exit 127'))
    assert good.compliance_check(tmp_path / "logs2")[0]


def test_meta_name_must_match_directory(tmp_path: Path) -> None:
    from udtharness.stacks import StackError, load

    d = _fake_stack(tmp_path, "a", "exit 127")
    (d / "meta.toml").write_text('name = "b"\nversion = "0"\ntestcases = []\n')
    with pytest.raises(StackError):
        load(d)
