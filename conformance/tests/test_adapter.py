"""The adapter contract itself: metadata and the compliance pre-check (unknown case → 127)."""

from __future__ import annotations

from pathlib import Path

import pytest

from udtconf.stacks import TESTCASES, Stack


def test_meta(stack: Stack) -> None:
    assert stack.version
    unknown = set(stack.testcases) - set(TESTCASES)
    assert not unknown, f"{stack.name}: meta.toml lists unknown test cases {unknown}"


def test_unknown_testcase_exits_127(stack: Stack, tmp_path: Path) -> None:
    ok, why = stack.compliance_check(tmp_path)
    assert ok, f"{stack.name}: {why}"
