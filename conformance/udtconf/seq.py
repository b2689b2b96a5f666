"""31-bit sequence-number arithmetic exactly as UDT 4.11 defines it (UDT4.md §4).

Every function takes raw values in ``[0, MAX]`` and uses 4.11's signed-difference shapes,
including their asymmetries (``seqlen`` is only meaningful when ``b`` is after ``a``).
"""

from __future__ import annotations

MAX = 0x7FFFFFFF
TH = 0x3FFFFFFF
MSG_MAX = 0x1FFFFFFF
MSG_TH = 0x0FFFFFFF


def seqcmp(a: int, b: int) -> int:
    """Positive if ``a`` is later than ``b`` (with wrap-around), 0 if equal."""
    return a - b if abs(a - b) < TH else b - a


def seqlen(a: int, b: int) -> int:
    """Count of numbers from ``a`` to ``b`` inclusive."""
    return b - a + 1 if a <= b else b - a + MAX + 2


def seqoff(a: int, b: int) -> int:
    """Signed distance from ``a`` to ``b``."""
    if abs(a - b) < TH:
        return b - a
    if a < b:
        return b - a - MAX - 1
    return b - a + MAX + 1


def incseq(a: int, n: int = 1) -> int:
    return a + n if MAX - a >= n else a - MAX + n - 1


def decseq(a: int) -> int:
    return MAX if a == 0 else a - 1


def seq_range(first: int, last: int) -> list[int]:
    """All numbers of the inclusive range ``[first, last]`` in wrap-aware order."""
    return [incseq(first, i) for i in range(seqlen(first, last))] if seqcmp(first, last) <= 0 else []
