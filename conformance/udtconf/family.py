"""The family wired together: which interop run plays a pair of each protocol.

The runner (:mod:`udtconf.runner`) knows no protocol, and no protocol's subpackage knows another's
but the one it builds on (FRTP's, SABUL's). Each provides its run — UDT4's
:data:`udtconf.udt.interop.run`, SABUL's :func:`udtconf.sabul.interop.run` and FRTP's
:func:`udtconf.frtp.interop.run` (SABUL's run under FRTP's profile) — and :data:`RUNS` names the
run of a pair by its server's protocol.
``InteropRunner(RUNS, results_dir)`` is the suite's runner.
"""

from __future__ import annotations

from collections.abc import Mapping

from .frtp import interop as frtp
from .runner import ProtocolRun
from .sabul import interop as sabul
from .udt import interop as udt

RUNS: Mapping[str, ProtocolRun] = {"udt": udt.run, "sabul": sabul.run, "frtp": frtp.run}
