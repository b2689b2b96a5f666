"""The `udt` and `sabul` command lines (docs/cli.md) as the interop tests and the benchmark run
them: the argv of `recv` and `send`, and the JSON lines that `--stats` writes.

Every stack with `[bulk] contract = "udt-cli"` in its meta.toml (the stack registry,
conformance/stacks/) has this command line, so a transfer is two such processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def recv_argv(binary: Path, listen: str, output: Path | str, *extra: str, stats: Path | None = None) -> list[str]:
    """``recv --listen ADDR:PORT --output PATH [--stats FILE] [extra...]``."""
    return [str(binary), "recv", "--listen", listen, "--output", str(output), *_stats(stats), *extra]


def send_argv(binary: Path, connect: str, input_path: Path, *extra: str, stats: Path | None = None) -> list[str]:
    """``send --connect ADDR:PORT --input PATH [--stats FILE] [extra...]``."""
    return [str(binary), "send", "--connect", connect, "--input", str(input_path), *_stats(stats), *extra]


def sabul_send_argv(cmd: list[str], listen: str, input_path: Path, *extra: str, stats: Path | None = None) -> list[str]:
    """``sabul send --listen ADDR:PORT --input PATH [--stats FILE] [extra...]`` (docs/cli.md,
    `sabul`: the sender listens); ``cmd`` is the binary or the Python peer's command."""
    return [*cmd, "send", "--listen", listen, "--input", str(input_path), *_stats(stats), *extra]


def sabul_recv_argv(
    cmd: list[str], connect: str, output: Path | str, *extra: str, stats: Path | None = None
) -> list[str]:
    """``sabul recv --connect ADDR:PORT --output PATH [--stats FILE] [extra...]``."""
    return [*cmd, "recv", "--connect", connect, "--output", str(output), *_stats(stats), *extra]


def _stats(path: Path | None) -> list[str]:
    return ["--stats", str(path)] if path is not None else []


def read_stats(path: Path) -> list[dict[str, Any]]:  # JSON objects: the values' types vary by key
    """The lines of a ``--stats`` file (the last one has ``"summary": true``); [] if there is none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
