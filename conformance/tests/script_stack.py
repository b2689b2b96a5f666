"""A stack that is one Python script, for the tests that show how the suite treats a stack that
misbehaves (crashes, trusts its peer): the adapter contract's meta.toml and entrypoint around it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from udtharness.stacks import Stack, load


def script_stack(tmp_path: Path, name: str, script: str, testcases: list[str], protocol: str | None = None) -> Stack:
    d = tmp_path / name
    d.mkdir()
    proto = f'protocol = "{protocol}"\n' if protocol else ""
    (d / "meta.toml").write_text(f'name = "{name}"\n{proto}version = "0"\ntestcases = {json.dumps(testcases)}\n')
    (d / f"{name}.py").write_text(script)
    (d / "entrypoint").write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$(dirname "$0")/{name}.py"\n')
    (d / "entrypoint").chmod(0o755)
    return load(d)
