#!/usr/bin/env python3
"""The Python side's tree in docs/architecture.md stays true to the repository (``make check``).

The tree is the first code block of the section "The Python side": a top-level line names a
directory (``testbed/udtbed/``), the indented lines under it name its modules and subpackages
(``hostwatch.py, hostinfo.py, cores.py``, ``udt/, sabul/, frtp/``), each followed by what it
is. Every name must exist under its directory, and the packages listed in full
(:data:`COMPLETE`) must have every module and subpackage named: one added or removed without the
tree changing fails here, with the names to add or drop (the testbed's tree names its layers, its
subpackages). The module table of the testbed's runner (:data:`RUNNER_TABLE`) has a row for each
of its modules, named by its path in the package (``emulation.network``, ``__main__``), and none
for a module that is gone.

    python3 ci/architecture_tree.py [REPO]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The packages whose tree lists every module and subpackage (the others are summarised in a line or two).
COMPLETE = ("harness/udtharness/", "testbed/udtbed/")
SECTION = "## The Python side"
# The tables of the runner's modules, one row per module of testbed/udtbed/ and its subpackages.
RUNNER_TABLE = "docs/testbed/runner.md"
RUNNER = "testbed/udtbed"
# The column where the descriptions start: a line blank up to it continues a description.
DESCRIPTION_COLUMN = 27


def tree(doc: str) -> list[str]:
    """The lines of the first code block after :data:`SECTION`."""
    rest = doc[doc.index(SECTION) :]
    start = rest.index("```\n") + 4
    return rest[start : rest.index("```", start)].splitlines()


def named(lines: list[str]) -> dict[str, list[str]]:
    """Directory -> the module and subpackage names listed under it, in order."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in lines:
        if not line.strip() or not line[: DESCRIPTION_COLUMN - 1].strip():
            continue  # a blank line, or a description's continuation
        name_field = re.split(r"\s{2,}", line.strip())[0]
        if not line.startswith(" "):
            current = name_field
            out.setdefault(current, [])
            continue
        out.setdefault(current, []).extend(re.findall(r"[\w.-]+\.py|[\w-]+/", name_field))
    return out


def runner_modules(package: Path) -> set[str]:
    """The modules of ``package`` by their dotted path in it (``emulation.network``, ``__main__``),
    its subpackages' included; no ``__init__``."""
    return {
        ".".join(p.relative_to(package).with_suffix("").parts)
        for p in package.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def check(repo: Path) -> list[str]:
    """What the tree gets wrong (empty: nothing)."""
    doc = (repo / "docs/architecture.md").read_text()
    problems: list[str] = []
    listing = named(tree(doc))
    for directory, names in listing.items():
        if not (repo / directory).exists():
            problems.append(f"docs/architecture.md names {directory}, which does not exist")
            continue
        for n in names:
            if not (repo / directory / n).exists():
                problems.append(f"docs/architecture.md names {directory}{n}, which does not exist")
    for package in COMPLETE:
        root = repo / package
        modules = {p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
        modules |= {f"{d.name}/" for d in root.iterdir() if (d / "__init__.py").exists()}
        missing = sorted(modules - set(listing.get(package, [])))
        if missing:
            problems.append(f"docs/architecture.md's tree lists {package} in full but not: {', '.join(missing)}")
    table = (repo / RUNNER_TABLE).read_text()
    rows = re.findall(r"(?m)^\| `([\w.]+)` \|", table)
    modules = runner_modules(repo / RUNNER)
    for name in sorted(modules - set(rows)):
        problems.append(f"{RUNNER_TABLE} has no row for the module {name}")
    for name in sorted(set(rows) - modules):
        problems.append(f"{RUNNER_TABLE} has a row for {name}, which is not a module of {RUNNER}/")
    for name in sorted({r for r in rows if rows.count(r) > 1}):
        problems.append(f"{RUNNER_TABLE} has more than one row for {name}")
    return problems


def main() -> int:
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(repo)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
