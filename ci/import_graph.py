#!/usr/bin/env python3
"""The import contract of the Python side (``make check``): one harness, its users apart, and
inside the conformance suite one subpackage per protocol over what they share.

``udtharness`` (harness/) is the machinery every user of the stacks builds on: the registry,
processes, captures, pcap, ports, test data, progress, metrics. Its users are the conformance
suite (``udtconf``, conformance/), the testbed (``udtbed``, testbed/), the interop tests
(impl/interop) and the benches (impl/bench). The harness imports none of its users, and the
users do not import each other: what two of them need is the harness's. One exception is named
here: a bench may drive the suite's own Python UDT4 peer as clients (``udtconf.udt.peer``), as it
would drive any stack.

The suite is the protocol family's shape: ``udtconf.udt`` (UDT4.md), ``udtconf.sabul``
(SABUL.md) and ``udtconf.frtp`` (FRTP.md) are sibling subpackages over the shared modules at
``udtconf``'s root. No protocol's subpackage imports another's, except FRTP's, which is SABUL's
peer, rules and run under a profile and may import ``udtconf.sabul``. The shared modules import
no protocol's subpackage; the three that wire the family together are exempt (:data:`WIRING`).

The testbed is laid out as its layers (:data:`UDTBED_LAYERS`), lowest first: ``udtbed.emulation``
and ``udtbed.simulation`` side by side, then ``udtbed.results``, then ``udtbed.experiments``, then
``udtbed.commands`` (the subcommands, one module each), and the entry point (``udtbed.__main__``)
above them all. A layer imports only the layers below it (and ``udtbed`` itself, the package's
root): never a sibling of its own level, one above it, or the entry point. The entry point builds
its parser from the commands' table and imports no other layer. A subpackage no level names, or a
module at udtbed's root beside ``__init__.py`` and ``__main__.py``, fails as well: it would be
outside the layers.

Every Python file of each area is read (its ``import`` statements, wherever they are in the
file; a relative import as the absolute name it resolves to); a forbidden import is printed with
its file and line, and the exit status is 1.

    python3 ci/import_graph.py [REPO]
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

USERS = ("udtconf", "udtbed")
PROTOCOLS = ("udtconf.udt", "udtconf.sabul", "udtconf.frtp")
HARNESS_HINT = "what {area} and {target} both need belongs in udtharness"
SHARED_HINT = "what {area} and {target} both need belongs in udtconf's shared modules"

# The shared modules that wire the family together, and so import every protocol's subpackage:
WIRING = (
    "conformance/udtconf/family.py",  # the interop run of each protocol (the runner's table)
    "conformance/udtconf/catalog.py",  # the catalogue of every protocol's rules and probes
    "conformance/udtconf/selection.py",  # UDTC_PROBES names probes of every protocol's tester
)

# udtbed's layers, lowest first; the subpackages of one level are siblings that import neither
# each other. Each may import those of the levels before it, none after it, and never the entry
# point (udtbed.__main__), which is on top of them all and imports only the last, the commands.
UDTBED_LAYERS = (("emulation", "simulation"), ("results",), ("experiments",), ("commands",))
LAYER_HINT = (
    "{area} may import only the layers below it (UDTBED_LAYERS in ci/import_graph.py): move what it needs "
    "from {target} down, or have the layer above pass it in as data"
)


@dataclass(frozen=True)
class Area:
    """Python files under ``dirs`` (only those directly in them where not ``recursive``; none of
    ``exempt``) that may not import the modules under ``forbidden`` (dotted names: a package
    forbids itself and every module in it), except the modules in ``allowed``. ``hint`` says where
    what a forbidden import wanted belongs (``{area}``: this area, ``{target}``: what it imported)."""

    name: str
    dirs: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    recursive: bool = True
    exempt: tuple[str, ...] = ()
    hint: str = HARNESS_HINT


def layer_areas(layers: tuple[tuple[str, ...], ...] = UDTBED_LAYERS) -> tuple[Area, ...]:
    """One :class:`Area` per subpackage of udtbed, forbidding its siblings, every layer above it
    and the entry point; udtbed's root (``__init__.py``), below every layer; and the entry point
    (``__main__.py``), which may import the top layer (the commands' table) and no other."""
    every = tuple(f"udtbed.{n}" for names in layers for n in names)
    below_top = tuple(f"udtbed.{n}" for names in layers[:-1] for n in names)
    out = [
        Area(
            "udtbed's root",
            ("testbed/udtbed",),
            (*every, "udtbed.__main__"),
            recursive=False,
            exempt=("testbed/udtbed/__main__.py",),
            hint="udtbed's root is below every layer: {target} may import what it holds, never the reverse",
        ),
        Area(
            "udtbed's entry point",
            ("testbed/udtbed",),
            below_top,
            recursive=False,
            exempt=("testbed/udtbed/__init__.py",),
            hint="the entry point builds its parser from the commands' table: what it wants of {target} "
            "belongs in a module of the top layer",
        ),
    ]
    for level, names in enumerate(layers):
        above = [f"udtbed.{n}" for later in layers[level + 1 :] for n in later]
        for name in names:
            siblings = [f"udtbed.{n}" for n in names if n != name]
            out.append(
                Area(
                    f"udtbed's {name} layer",
                    (f"testbed/udtbed/{name}",),
                    (*siblings, *above, "udtbed.__main__"),
                    hint=LAYER_HINT,
                )
            )
    return tuple(out)


AREAS = (
    Area("the harness", ("harness",), USERS),
    Area("the conformance suite", ("conformance",), ("udtbed",)),
    Area("the testbed", ("testbed", "topologies"), ("udtconf",)),
    Area("the interop tests", ("impl/interop",), USERS),
    Area("the benches", ("impl/bench",), USERS, allowed=("udtconf.udt.peer",)),
    Area("the dashboards", ("dashboards",), USERS),
    Area("UDT4's subpackage", ("conformance/udtconf/udt",), ("udtconf.sabul", "udtconf.frtp"), hint=SHARED_HINT),
    Area("SABUL's subpackage", ("conformance/udtconf/sabul",), ("udtconf.udt", "udtconf.frtp"), hint=SHARED_HINT),
    Area("FRTP's subpackage", ("conformance/udtconf/frtp",), ("udtconf.udt",), hint=SHARED_HINT),
    Area(
        "a shared module of udtconf",
        ("conformance/udtconf",),
        PROTOCOLS,
        recursive=False,
        exempt=WIRING,
        hint="only the family's wiring, WIRING in ci/import_graph.py, may import {target}",
    ),
    *layer_areas(),
)


def module_name(path: Path) -> str:
    """The dotted name ``path`` is imported under: the packages (directories with an
    ``__init__.py``) it lies in, and its stem unless it is a package's ``__init__.py``."""
    parts = [] if path.name == "__init__.py" else [path.stem]
    d = path.parent
    while (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of everything ``path`` imports: ``import a.b`` gives ``a.b``,
    ``from a.b import c, d`` gives ``a.b.c`` and ``a.b.d``, and a relative import the same, from
    the package ``path`` lies in (``from ..frtp import wire`` in ``udtconf/sabul/`` gives
    ``udtconf.frtp.wire``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = module_name(path)
    package = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = [node.module or ""]
            elif node.level <= len(package) and package != [""]:
                base = package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
            else:
                continue  # beyond the top-level package: Python itself refuses it
            found += [(node.lineno, ".".join([*base, a.name])) for a in node.names]
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(repo: Path) -> list[str]:
    out = []
    for area in AREAS:
        for d in area.dirs:
            paths = (repo / d).rglob("*.py") if area.recursive else (repo / d).glob("*.py")
            for path in sorted(paths):
                if any(part in {".venv", "target", "__pycache__", "build"} for part in path.parts):
                    continue
                if str(path.relative_to(repo)) in area.exempt:
                    continue
                seen = set()
                for line, name in imports(path):
                    prefix = next((f for f in area.forbidden if _under(name, f)), None)
                    if prefix is None or (line, prefix) in seen:
                        continue
                    if any(_under(name, a) for a in area.allowed):
                        continue
                    seen.add((line, prefix))
                    out.append(
                        f"{path.relative_to(repo)}:{line}: {area.name} imports {name} "
                        f"({area.hint.format(area=area.name, target=prefix)})"
                    )
    return out


def unlayered(repo: Path, layers: tuple[tuple[str, ...], ...] = UDTBED_LAYERS) -> list[str]:
    """udtbed's modules that no layer holds: a subpackage :data:`UDTBED_LAYERS` does not name, or a
    module at the root beside ``__init__.py`` and ``__main__.py`` (the layers would not see it)."""
    root = repo / "testbed/udtbed"
    if not root.is_dir():
        return []
    named = {n for names in layers for n in names}
    out = [
        f"testbed/udtbed/{d.name}/: a subpackage of udtbed that no layer names (add it to UDTBED_LAYERS "
        "in ci/import_graph.py, at the level its imports allow)"
        for d in sorted(root.iterdir())
        if (d / "__init__.py").exists() and d.name not in named
    ]
    out += [
        f"testbed/udtbed/{f.name}: a module at udtbed's root, outside its layers (move it into the layer it belongs to)"
        for f in sorted(root.glob("*.py"))
        if f.name not in ("__init__.py", "__main__.py")
    ]
    return out


def main(argv: list[str]) -> int:
    repo = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1])
    found = violations(repo) + unlayered(repo)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print(f"import contract: {len(found)} forbidden import(s) (ci/import_graph.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
