"""The family's command lines (docs/cli.md) as everyone who runs them builds them, and the one
schema of the JSON lines they write with ``--stats``.

Every stack with a ``[bulk]`` table in its meta.toml (the registry, :mod:`udtharness.stacks`)
follows one of three contracts: ``udt-cli`` (``recv --listen``, ``send --connect``: the receiver
listens), ``sabul-cli`` and ``frtp-cli`` (``send --listen``, ``recv --connect``: the sender
listens, SABUL.md §2, FRTP.md §2). The argv builders here give each contract's required part; a
caller appends its own options (``extra``). The interop tests, the benches and the testbed build
their command lines through them.

The stats lines (docs/cli.md, "Stats JSON lines") have the keys :data:`STATS_KEYS` in that order,
some stacks add :data:`OPTIONAL_STATS_KEYS`, and the last line of each connection adds
:data:`SUMMARY_KEYS`. ``impl/udt-cli/src/stats.rs`` writes them for our stacks, the libudt peer
and the suite's Python peers write the same; ``harness/tests/test_cli.py`` checks the Rust
writer and the manual against this list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The keys of every stats line, in the order the stacks write them, with their JSON types.
STATS_KEYS: dict[str, type | tuple[type, ...]] = {
    "stack": str,
    "role": str,
    "t": (int, float),
    "bytes": int,
    "mbps": (int, float),
    "rtt_ms": (int, float),
    "flow_window": int,
    "cwnd": (int, float),
    "period_us": (int, float),
    "losses": int,
    "retrans": int,
    "pkts_sent": int,
    "pkts_recv": int,
    "acks_sent": int,
    "acks_recv": int,
    "naks_sent": int,
    "naks_recv": int,
}
# Written only where a stack has the figure: UDT senders' capacity estimate, our udt's count of
# oversized packets dropped, FRTP's measured inter-packet time, the connection's number under
# `recv --connections N`.
OPTIONAL_STATS_KEYS: dict[str, type | tuple[type, ...]] = {
    "bandwidth_pps": int,
    "oversize_drops": int,
    "ipt_us": (int, float),
    "conn": int,
}
# The summary line (one per connection, the last): the same keys and these.
SUMMARY_KEYS: dict[str, type | tuple[type, ...]] = {"summary": bool, "seconds": (int, float)}


def stats_problems(line: Mapping[str, object], summary: bool | None = None) -> list[str]:
    """What in one parsed stats line breaks the schema (missing keys, a value of the wrong
    type); [] for a good line. ``summary``: whether it must be (True) or must not be (False) a
    summary line; None takes the line's word for it."""
    is_summary = bool(line.get("summary")) if summary is None else summary
    want = STATS_KEYS | (SUMMARY_KEYS if is_summary else {})
    problems = []
    missing = [k for k in want if k not in line]
    if missing:
        problems.append(f"missing keys {missing}")
    for key, types in (want | OPTIONAL_STATS_KEYS).items():
        value = line.get(key)
        # bool is an int to Python, never a count in JSON
        if key in line and (not isinstance(value, types) or (isinstance(value, bool) and types is not bool)):
            problems.append(f"{key}={value!r} is not {getattr(types, '__name__', types)}")
    if summary is False and line.get("summary"):
        problems.append("a summary line where a periodic one belongs")
    return problems


def stats_json(line: str) -> dict[str, Any] | None:
    """A periodic stats line as a dict; None for anything else (the summary line, iperf3's
    text, a line still being written)."""
    if not line.startswith("{"):
        return None
    try:
        d = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(d, dict) or d.get("summary") or not isinstance(d.get("t"), int | float):
        return None
    return d


def read_stats(path: Path) -> list[dict[str, Any]]:  # JSON objects: the values' types vary by key
    """The lines of a ``--stats`` file (the last one of each connection has ``"summary": true``);
    [] if there is none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stats_args(path: Path | str | None, interval_ms: int | None = None) -> list[str]:
    """``--stats PATH [--stats-interval MS]``, or nothing without a path."""
    if path is None:
        return []
    return ["--stats", str(path), *(["--stats-interval", str(interval_ms)] if interval_ms is not None else [])]


def recv_argv(
    binary: Path | str,
    listen: str,
    output: Path | str,
    *extra: str,
    stats: Path | None = None,
    interval_ms: int | None = None,
) -> list[str]:
    """``udt-cli``: ``recv --listen ADDR:PORT --output PATH [--stats FILE] [extra...]``."""
    return [str(binary), "recv", "--listen", listen, "--output", str(output), *stats_args(stats, interval_ms), *extra]


def send_argv(
    binary: Path | str,
    connect: str,
    input_path: Path | str,
    *extra: str,
    stats: Path | None = None,
    interval_ms: int | None = None,
) -> list[str]:
    """``udt-cli``: ``send --connect ADDR:PORT --input PATH [--stats FILE] [extra...]``."""
    return [
        str(binary),
        "send",
        "--connect",
        connect,
        "--input",
        str(input_path),
        *stats_args(stats, interval_ms),
        *extra,
    ]


def sabul_send_argv(
    cmd: list[str],
    listen: str,
    input_path: Path | str,
    *extra: str,
    stats: Path | None = None,
    interval_ms: int | None = None,
) -> list[str]:
    """``sabul-cli`` and ``frtp-cli``: ``send --listen ADDR:PORT --input PATH [--stats FILE]
    [extra...]`` (the sender listens); ``cmd`` is the binary or a Python peer's command."""
    return [*cmd, "send", "--listen", listen, "--input", str(input_path), *stats_args(stats, interval_ms), *extra]


def sabul_recv_argv(
    cmd: list[str],
    connect: str,
    output: Path | str,
    *extra: str,
    stats: Path | None = None,
    interval_ms: int | None = None,
) -> list[str]:
    """``sabul-cli`` and ``frtp-cli``: ``recv --connect ADDR:PORT --output PATH [--stats FILE]
    [extra...]`` (FRTP's receiver adds ``--data-bind`` and ``--rate`` in ``extra``)."""
    return [*cmd, "recv", "--connect", connect, "--output", str(output), *stats_args(stats, interval_ms), *extra]
