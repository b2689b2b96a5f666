"""FRTP's interop run: SABUL's (:func:`udtconf.sabul.interop.run`, the same cases but ``mss``)
under FRTP's profile (:data:`udtconf.frtp.profile.FRTP`: the 52-byte block through the relay and
in the trace, the client's data address, the ``loss`` case's drops)."""

from __future__ import annotations

from pathlib import Path

from udtharness.stacks import Stack

from ..sabul import interop as sabul
from ..sabul.interop import SabulRunResult
from .profile import FRTP


def run(server: Stack, client: Stack, case: str, logdir: Path, *, capture: bool) -> SabulRunResult:
    """One FRTP run (a :class:`~udtconf.runner.ProtocolRun`)."""
    return sabul.run(server, client, case, logdir, capture=capture, profile=FRTP)


__all__ = ["run"]
