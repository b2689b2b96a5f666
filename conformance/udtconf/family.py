"""The family wired together: which interop run plays a pair of each protocol.

The runner (:mod:`udtconf.runner`) knows no protocol, and no protocol's module knows another's;
each provides its run — UDT4's :data:`udtconf.interop.run`, SABUL's :func:`udtconf.sabul.interop.run`,
which FRTP shares under its profile — and :data:`RUNS` names the run of a pair by its server's
protocol. ``InteropRunner(RUNS, results_dir)`` is the suite's runner.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import interop as udt
from .runner import ProtocolRun
from .sabul import interop as sabul

RUNS: Mapping[str, ProtocolRun] = {"udt": udt.run, "sabul": sabul.run, "frtp": sabul.run}
