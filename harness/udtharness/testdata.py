"""Input files for transfers and the digests that compare them with the output.

Seeded inputs (the conformance runs) are the same bytes in every run, so a capture can be
compared across runs; unseeded ones (the interop tests' 1 GiB) come from ``os.urandom`` in
chunks, which is fast and needs no memory for the whole file.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

_CHUNK = 8 << 20


def random_file(path: Path, size: int, seed: str | None = None) -> Path:
    """Writes ``size`` random bytes to ``path``: ``random.Random(seed)`` if seeded, else os.urandom."""
    if seed is not None:
        path.write_bytes(random.Random(seed).randbytes(size))
        return path
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, _CHUNK)
            f.write(os.urandom(n))
            left -= n
    return path


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
