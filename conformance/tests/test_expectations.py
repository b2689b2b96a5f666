"""Expectations files: `required` globs, scoped waivers, per-stack files, and their load errors."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from udtconf.expectations import ExpectationsError, for_stacks, key_case, key_stacks, load
from udtconf.frtp import checks as frtp
from udtconf.sabul import checks as sabul
from udtconf.udt.checks import RULES
from udtharness.stacks import STACKS_DIR
from udtharness.stacks import load as load_stack

WAIVER = """
[[waiver]]
match = "wire/*/*/*/udt4/9.2/full-ack-every-syn"
stacks = ["libudt"]
kind = "flaky"
reason = "timing on 2 cores"
since = 2026-11-22
"""


def _file(tmp_path: Path, text: str, name: str = "expectations.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_shipped_file_loads_and_every_waiver_is_scoped_and_dated() -> None:
    exp = load()
    assert exp.waivers
    for w in exp.waivers:
        assert w.stacks and w.reason and w.since <= datetime.date.today()
        assert w.stacks <= {"libudt", "udt-rs"}, "the shipped file waives only what was seen on our stacks"
    found = exp.waiver_for("active/libudt/client/early-nak")
    assert found is not None and found.kind == "finding" and found.since == datetime.date(2026, 11, 22)


def test_required_is_every_must_rule_and_no_should_rule() -> None:
    exp = load()
    # (grade, id) of each protocol's rules: UDT's and SABUL's read different captures
    graded = [(r.grade, r.id) for r in RULES] + [(r.grade, r.id) for r in [*sabul.RULES, *frtp.RULES]]
    for grade, rule_id in graded:
        key = f"wire/a/b/transfer/{rule_id}"
        assert exp.is_required(key) == (grade == "MUST"), f"{grade} {rule_id}"
    assert exp.is_required("wire/a/b/close/udt4/5.6/shutdown-on-close")
    assert not exp.is_required("wire/a/b/close/udt4/2/info-less-padding")
    assert exp.is_required("active/tp/server/malformed-then-serve")
    assert exp.is_required("interop/a/b/multiconnect") and exp.is_required("adapter/a/meta")


def test_keys_name_their_stacks_and_case() -> None:
    assert key_stacks("wire/a/b/loss/udt4/8.2/nak-on-gap") == {"a", "b"}
    assert key_stacks("interop/a/a/transfer") == {"a"}
    assert key_stacks("active/a/client/nak-duplicates") == {"a"}
    assert key_case("wire/a/b/loss/udt4/8.2/nak-on-gap") == "loss"
    assert key_case("active/a/client/nak-duplicates") == "client/nak-duplicates"
    assert key_case("adapter/a/meta") == "meta"


def test_a_libudt_waiver_does_not_cover_a_third_party_blamed_for_the_same_rule(tmp_path: Path) -> None:
    exp = load(_file(tmp_path, WAIVER))
    key = "wire/tp/libudt/loss/udt4/9.2/full-ack-every-syn"
    assert exp.waiver_for(key, blamed=["libudt"]) is not None  # libudt's own stall, as observed
    assert exp.waiver_for(key, blamed=["tp"]) is None  # the case: a third party's stalled ACKs
    assert exp.waiver_for(key, blamed=["tp", "libudt"]) is None
    # without a blamed party (an interop cell, a codec test) every stack of the key must be listed
    assert exp.waiver_for(key) is None
    assert exp.waiver_for("wire/libudt/libudt/loss/udt4/9.2/full-ack-every-syn") is not None


def test_cases_narrow_a_waiver(tmp_path: Path) -> None:
    exp = load(_file(tmp_path, WAIVER + 'cases = ["loss"]\n'))
    assert exp.waiver_for("wire/libudt/libudt/loss/udt4/9.2/full-ack-every-syn") is not None
    assert exp.waiver_for("wire/libudt/libudt/transfer/udt4/9.2/full-ack-every-syn") is None


def test_a_stacks_own_file_applies_only_to_tests_involving_it(tmp_path: Path) -> None:
    d = tmp_path / "tp"
    d.mkdir()
    (d / "meta.toml").write_text('name = "tp"\nversion = "0"\ntestcases = []\n')
    _file(d, 'required = ["wire/*/*/*/udt4/9.2/*"]\n' + WAIVER.replace('"libudt"', '"tp", "libudt"'))
    suite = _file(tmp_path, 'required = ["interop/*"]\n' + WAIVER.replace("9.2/full-ack-every-syn", "2/*"))
    exp = for_stacks([load_stack(d), load_stack(STACKS_DIR / "libudt")], suite)
    assert exp.is_required("wire/tp/libudt/loss/udt4/9.2/full-ack-every-syn")
    assert not exp.is_required("wire/udt-rs/libudt/loss/udt4/9.2/full-ack-every-syn")
    assert exp.waiver_for("wire/tp/libudt/loss/udt4/9.2/full-ack-every-syn", blamed=["tp"]) is not None
    # its waiver names libudt too, but outside cells with tp it does not apply
    assert exp.waiver_for("wire/libudt/libudt/loss/udt4/9.2/full-ack-every-syn", blamed=["libudt"]) is None
    # the suite's own file still applies everywhere
    assert exp.is_required("interop/udt-rs/libudt/transfer")
    assert exp.waiver_for("wire/libudt/libudt/loss/udt4/2/decodable") is not None


@pytest.mark.parametrize(
    ("drop", "error"),
    [
        ("since", r"\[\[waiver\]\] #1 \(match = 'wire/\*/\*/\*/udt4/9.2/full-ack-every-syn'\): missing \['since'\]"),
        ("stacks", r".*#1 .*missing \['stacks'\]"),
        ("reason", r".*#1 .*missing \['reason'\]"),
    ],
)
def test_a_waiver_without_stacks_reason_or_date_is_an_error_naming_file_and_entry(
    tmp_path: Path, drop: str, error: str
) -> None:
    text = "\n".join(line for line in WAIVER.splitlines() if not line.startswith(drop))
    p = _file(tmp_path, text)
    with pytest.raises(ExpectationsError, match=f"{p}: {error}"):
        load(p)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (WAIVER.replace("2026-11-22", '"last week"'), "'since' must be a date"),
        (WAIVER.replace('"flaky"', '"meh"'), "kind 'meh' is not one of"),
        (WAIVER.replace('["libudt"]', "[]"), "'stacks' must name at least one stack"),
        (WAIVER + "owner = 'me'\n", r"unknown key\(s\) \['owner'\]"),
        ('[[known]]\nmatch = "x"\n', r"\[\[known\]\] entries are now \[\[waiver\]\]"),
        ("required = 'x'\n", "'required' must be a list"),
        ("required = [\n", "not valid TOML"),
    ],
)
def test_bad_expectations_are_rejected_naming_the_file(tmp_path: Path, text: str, error: str) -> None:
    p = _file(tmp_path, text)
    with pytest.raises(ExpectationsError, match=str(p)) as e:
        load(p)
    assert e.match(error)


def test_since_may_be_a_toml_date_or_an_iso_string(tmp_path: Path) -> None:
    (w,) = load(_file(tmp_path, WAIVER.replace("2026-11-22", '"2026-01-02"'))).waivers
    assert w.since == datetime.date(2026, 1, 2)
    assert w.describe() == "waived flaky on libudt since 2026-01-02: timing on 2 cores"
