"""The command-line contract and the one stats-line schema (udtharness.cli), checked against
the Rust writer (impl/udt-cli/src/stats.rs) and the manual (docs/cli.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from udtharness.cli import (
    OPTIONAL_STATS_KEYS,
    STATS_KEYS,
    SUMMARY_KEYS,
    recv_argv,
    sabul_recv_argv,
    sabul_send_argv,
    send_argv,
    stats_json,
    stats_problems,
)

REPO = Path(__file__).resolve().parents[2]


def _rust_line_keys() -> list[str]:
    """The keys of `stats::line`'s format string and of the summary's, in the order written."""
    src = (REPO / "impl/udt-cli/src/stats.rs").read_text()
    body = src[src.index("pub fn line(") : src.index("#[cfg(test)]")]
    return re.findall(r'\\"([a-z_]+)\\":', body)


def _manual_keys() -> set[str]:
    """The keys the stats table of docs/cli.md names (first column), and those of the prose
    after it (the summary's and `conn`)."""
    text = (REPO / "docs/cli.md").read_text()
    section = text[text.index("## Stats JSON lines") :]
    section = section[: section.index("\n## ", 3)]
    keys = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            keys |= set(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
        elif not row.startswith(("|", "{", " ")):
            keys |= set(re.findall(r'`"([a-z_]+)"', row))
    return keys


def test_the_rust_writer_writes_every_shared_key_in_the_schema_s_order() -> None:
    keys = _rust_line_keys()
    assert keys[: len(STATS_KEYS)] == list(STATS_KEYS)
    assert set(keys[len(STATS_KEYS) :]) <= set(OPTIONAL_STATS_KEYS) | set(SUMMARY_KEYS)
    assert set(SUMMARY_KEYS) <= set(keys)


def test_the_manual_documents_exactly_the_schema_s_keys() -> None:
    assert _manual_keys() == set(STATS_KEYS) | set(OPTIONAL_STATS_KEYS) | set(SUMMARY_KEYS)


def _line(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {k: 0 for k in STATS_KEYS} | {"stack": "udt-rs", "role": "recv", "t": 1.0}
    return base | changes


def test_a_good_line_has_no_problems_and_a_bad_one_names_each() -> None:
    assert stats_problems(_line()) == []
    assert stats_problems(_line(summary=True, seconds=2.5)) == []
    bad = _line(bytes=1.5, losses=True)
    del bad["naks_recv"]
    problems = stats_problems(bad)
    assert problems[0] == "missing keys ['naks_recv']"
    assert any(p.startswith("bytes=1.5") for p in problems) and any(p.startswith("losses=True") for p in problems)
    assert stats_problems(_line(), summary=True) == ["missing keys ['summary', 'seconds']"]
    assert stats_problems(_line(summary=True, seconds=1), summary=False) == [
        "a summary line where a periodic one belongs"
    ]


def test_stats_json_takes_periodic_lines_only() -> None:
    assert stats_json(json.dumps(_line())) == _line()
    assert stats_json(json.dumps(_line(summary=True))) is None
    assert stats_json('{"t": 1.0, "by') is None  # a line still being written
    assert stats_json("[  5] 0.00-1.00 sec 11.2 MBytes 94.1 Mbits/sec") is None


def test_each_contract_puts_the_listener_on_its_own_side() -> None:
    assert recv_argv("/bin/udt", "0.0.0.0:7000", "/dev/null", "--mss", "1500", stats=Path("s"), interval_ms=200) == [
        "/bin/udt", "recv", "--listen", "0.0.0.0:7000", "--output", "/dev/null",
        "--stats", "s", "--stats-interval", "200", "--mss", "1500",
    ]  # fmt: skip
    assert send_argv("/bin/udt", "10.0.0.2:7000", "/dev/zero") == [
        "/bin/udt", "send", "--connect", "10.0.0.2:7000", "--input", "/dev/zero",
    ]  # fmt: skip
    assert sabul_send_argv(["sabul"], "10.0.0.1:7000", "in", stats=Path("s"))[1:4] == [
        "send",
        "--listen",
        "10.0.0.1:7000",
    ]
    assert sabul_recv_argv(["python", "-m", "x"], "10.0.0.1:7000", "out")[3:5] == ["recv", "--connect"]
