#!/usr/bin/env python3
"""Every relative link of the repository's Markdown leads somewhere (``make check``).

Each ``*.md`` file git tracks, or would (``git ls-files``: a new file not ignored too), is read
outside its fenced code blocks and inline code spans; every inline link or image
``[text](target)`` whose target is not a URL (``http:``, ``https:``, ``mailto:``, ...) must
name a file or directory of the same listing, relative to the file (or to the repository root
when it starts with ``/``): a link to an ignored build output or results directory would be
broken in a fresh clone. A ``#anchor`` on a Markdown target, or on its own for the same file,
must be one of the target's headings as GitHub names them: the heading's text lower-cased,
punctuation other than ``-`` and ``_`` dropped, each space a ``-``, and ``-1``, ``-2``, ...
after a repeated one; an explicit ``<a name=...>`` or ``id=`` counts too. Each broken link is
printed as ``file:line: broken link (target): why`` and the exit status is 1.

    python3 ci/doc_links.py [REPO]
"""

from __future__ import annotations

import posixpath
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

# [text](target) or ![alt](target), the target up to a space (a title may follow) or ')';
# <target> in angle brackets may hold spaces.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)[^)]*\)")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # http:, https:, mailto:, ftp:, ...
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_ANCHOR = re.compile(r"""<[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""")


def fenced(lines: list[str]) -> list[bool]:
    """Which lines belong to a fenced code block, its fences included."""
    out: list[bool] = []
    fence = ""
    for line in lines:
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            out.append(True)
        else:
            fence = m.group(1) if m else ""
            out.append(bool(m))
    return out


def code_free(lines: list[str]) -> list[str]:
    """The lines with fenced code blocks blanked and inline code spans removed."""
    return ["" if f else INLINE_CODE.sub("", line) for line, f in zip(lines, fenced(lines), strict=True)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before the suffix of a repeated one)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "").strip().lower()
    kept = (c for c in text if c in " -_" or c.isalnum() or unicodedata.category(c).startswith("M"))
    return "".join(kept).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors a Markdown file has: its headings' slugs and its explicit HTML anchors."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: set[str] = set()
    seen: dict[str, int] = {}
    previous = ""
    for line, in_code in zip(lines, fenced(lines), strict=True):
        heading = None
        if in_code:
            line = ""
        elif m := ATX.match(line):
            heading = m.group(2) or ""
        elif previous and SETEXT.match(line):
            heading = previous
        if heading is not None:
            base = slug(heading)
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
            line = ""  # a heading is not the text of a setext heading below it
        found.update(a.lower() for a in HTML_ANCHOR.findall(INLINE_CODE.sub("", line)))
        previous = line.strip()
    return frozenset(found)


@dataclass(frozen=True)
class Tree:
    """The repository as git sees it: the files it tracks or would, and their directories."""

    root: Path
    files: frozenset[str]
    dirs: frozenset[str]

    @classmethod
    def of(cls, root: Path) -> Tree:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # a file deleted in the working tree but not yet in the index is gone
        files = frozenset(f for f in listed.split("\0") if f and (root / f).is_file())
        dirs = frozenset(str(PurePosixPath(f).parents[i]) for f in files for i in range(len(PurePosixPath(f).parents)))
        return cls(root, files, dirs)

    def has(self, relative: str) -> bool:
        return relative in self.files or relative in self.dirs


def broken(tree: Tree, name: str) -> list[str]:
    """What is wrong with the relative links of one Markdown file (empty: nothing)."""
    problems: list[str] = []
    doc = tree.root / name
    for number, line in enumerate(code_free(doc.read_text(encoding="utf-8").splitlines()), start=1):
        for m in LINK.finditer(line):
            target = m.group(1).strip("<>")
            if not target or URL.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            path_part = unquote(path_part)
            if not path_part:
                dest = name
            elif path_part.startswith("/"):
                dest = posixpath.normpath(path_part.lstrip("/") or ".")
            else:
                dest = posixpath.normpath(posixpath.join(posixpath.dirname(name), path_part))
            if not tree.has(dest):
                why = (
                    "not in git (ignored, or outside the repository)" if (tree.root / dest).exists() else "no such file"
                )
                problems.append(f"{name}:{number}: broken link ({target}): {why}")
            elif anchor and dest.endswith(".md") and unquote(anchor).lower() not in anchors(tree.root / dest):
                where = "this file" if dest == name else dest
                problems.append(f"{name}:{number}: broken link ({target}): no heading #{anchor} in {where}")
    return problems


def check(repo: Path) -> list[str]:
    """The broken links of every Markdown file git tracks, or would (new, not ignored)."""
    tree = Tree.of(repo)
    problems: list[str] = []
    for name in sorted(f for f in tree.files if f.endswith(".md")):
        problems.extend(broken(tree, name))
    return problems


def main() -> int:
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(repo)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
