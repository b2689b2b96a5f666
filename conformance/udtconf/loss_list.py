"""The loss-list word codec shared by UDT4's NAK (``docs/spec/UDT4.md`` §5.4) and SABUL's ERR
(``docs/spec/SABUL.md`` §3.3, which adopts the same rule).

A loss list is a sequence of 32-bit words: a word with bit 31 clear is one lost sequence number;
a word with bit 31 set starts a range (its low 31 bits) whose inclusive end is the next word.
:func:`encode` compresses the way UDT 4.11 does (a run of two or more, also across the 2^31
wrap, becomes a range); :func:`decode` accepts any mix — a fully uncompressed list included —
and raises :class:`LossListError` for what no encoder may produce. Each protocol's codec turns
that error into its own, naming its own spec section.

    >>> decode([0x00000003, 0x80000006, 0x0000000F])
    [(3, 3), (6, 15)]
    >>> count(decode(encode([100, 200, 201, 202, 203, 300])))
    6
"""

from __future__ import annotations

from collections.abc import Iterable

from .seq import MAX, incseq, seqcmp, seqlen

RANGE_FLAG = 0x80000000


class LossListError(ValueError):
    """A word sequence that is not a valid loss list, or numbers that cannot be encoded as one."""


def encode(lost: Iterable[int]) -> list[int]:
    """Compress lost sequence numbers, given in increasing (wrap-aware) order: a lone number →
    one word, a run of two or more → ``first | RANGE_FLAG, last``."""
    words: list[int] = []
    first = last = -1
    for s in lost:
        if not 0 <= s <= MAX:
            raise LossListError(f"lost sequence number {s:#x} outside 31 bits")
        if first >= 0 and s == incseq(last):
            last = s
            continue
        if first >= 0 and seqcmp(s, last) <= 0:
            raise LossListError(f"loss list not increasing at {s:#x}")
        words.extend(_run(first, last))
        first = last = s
    words.extend(_run(first, last))
    return words


def _run(first: int, last: int) -> list[int]:
    if first < 0:
        return []
    return [first] if first == last else [first | RANGE_FLAG, last]


def decode(words: Iterable[int]) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` ranges. Rejects an empty list, a range start as the last
    word, a range end with bit 31 set and a range whose start is after its end."""
    ws = list(words)
    if not ws:
        raise LossListError("empty loss list")
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(ws):
        w = ws[i]
        if not w & RANGE_FLAG:
            out.append((w, w))
            i += 1
            continue
        if i + 1 >= len(ws):
            raise LossListError(f"loss list ends with a range-start word {w:#010x}")
        first, last = w & MAX, ws[i + 1]
        if last & RANGE_FLAG:
            raise LossListError(f"range end {last:#010x} has bit 31 set")
        if seqcmp(first, last) > 0:
            raise LossListError(f"range start {first:#x} is after its end {last:#x}")
        out.append((first, last))
        i += 2
    return out


def count(ranges: Iterable[tuple[int, int]]) -> int:
    """How many sequence numbers decoded ranges cover (a lone number counts 1)."""
    return sum(seqlen(first, last) for first, last in ranges)


def numbers(ranges: Iterable[tuple[int, int]]) -> list[int]:
    """Every sequence number the ranges cover, in order (expands: use on bounded lists only)."""
    return [incseq(first, i) for first, last in ranges for i in range(seqlen(first, last))]
