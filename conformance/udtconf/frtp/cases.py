"""FRTP's interop cases: SABUL's (:mod:`udtconf.sabul.cases`, played by SABUL's run under
FRTP's profile, :mod:`udtconf.frtp.interop`) but ``mss``: FRTP fixes the packet size with the
rate the receiver asks for (FRTP.md §1-2).
"""

from __future__ import annotations

from ..runner import InteropCase
from ..sabul.cases import CASES as SABUL_CASES

CASES: dict[str, InteropCase] = {n: c for n, c in SABUL_CASES.items() if n != "mss"}
ALL_CASES = frozenset(CASES)
TRANSFER_CASES = frozenset({"transfer", "loss"})  # the cases that carry data worth judging

__all__ = ["ALL_CASES", "CASES", "TRANSFER_CASES"]
