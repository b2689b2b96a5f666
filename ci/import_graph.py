#!/usr/bin/env python3
"""The import contract of the Python side (``make check``): one harness, its users apart.

``udtharness`` (harness/) is the machinery every user of the stacks builds on: the registry,
processes, captures, pcap, ports, test data, progress, metrics. Its users are the conformance
suite (``udtconf``, conformance/), the testbed (``udtbed``, testbed/), the interop tests
(impl/interop) and the benches (impl/bench). The harness imports none of its users, and the
users do not import each other: what two of them need is the harness's. One exception is named
here: a bench may drive the suite's own Python peers as clients (``udtconf.peer``), as it would
drive any stack. Every Python file of each area is read (its ``import`` statements, wherever they
are in the file); a forbidden import is printed with its file and line, and the exit status is 1.

    python3 ci/import_graph.py [REPO]
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

USERS = ("udtconf", "udtbed")


@dataclass(frozen=True)
class Area:
    """Python files under ``dirs`` that may not import the top-level packages ``forbidden``,
    except the modules in ``allowed`` (exact dotted names)."""

    name: str
    dirs: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()


AREAS = (
    Area("the harness", ("harness",), USERS),
    Area("the conformance suite", ("conformance",), ("udtbed",)),
    Area("the testbed", ("testbed", "topologies"), ("udtconf",)),
    Area("the interop tests", ("impl/interop",), USERS),
    Area("the benches", ("impl/bench",), USERS, allowed=("udtconf.peer",)),
    Area("the dashboards", ("dashboards",), USERS),
)


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of everything ``path`` imports absolutely: ``import a.b`` gives
    ``a.b``, ``from a.b import c, d`` gives ``a.b.c`` and ``a.b.d``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def violations(repo: Path) -> list[str]:
    out = []
    for area in AREAS:
        for d in area.dirs:
            for path in sorted((repo / d).rglob("*.py")):
                if any(part in {".venv", "target", "__pycache__", "build"} for part in path.parts):
                    continue
                seen = set()
                for line, name in imports(path):
                    top = name.split(".")[0]
                    if top not in area.forbidden or (line, top) in seen:
                        continue
                    if any(name == a or name.startswith(a + ".") for a in area.allowed):
                        continue
                    seen.add((line, top))
                    out.append(
                        f"{path.relative_to(repo)}:{line}: {area.name} imports {name} "
                        f"(what {area.name} and {top} both need belongs in udtharness)"
                    )
    return out


def main(argv: list[str]) -> int:
    repo = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1])
    found = violations(repo)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print(f"import contract: {len(found)} forbidden import(s) (ci/import_graph.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
