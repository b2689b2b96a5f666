"""docs/conformance/cases.md is generated from the rule and probe registries and kept in sync."""

from __future__ import annotations

from udtconf import catalog
from udtconf.sabul import checks as sabul
from udtconf.udt.checks import RULES
from udtharness.stacks import REPO_ROOT


def test_cases_doc_is_current() -> None:
    doc = REPO_ROOT / "docs" / "conformance" / "cases.md"
    assert doc.read_text() == catalog.render(), (
        "regenerate: cd conformance && python -m udtconf.catalog > ../docs/conformance/cases.md"
    )


def test_rule_ids_are_unique_and_cite_their_section() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.id.startswith("udt4/") and r.grade in ("MUST", "SHOULD") and r.requirement


def test_sabul_rules_are_in_the_catalogue_keyed_sabul() -> None:
    doc = catalog.render()
    for r in sabul.RULES:
        assert r.id.startswith("sabul/") and f"| `{r.id}` | {r.section} | {r.grade} | {r.side} |" in doc
