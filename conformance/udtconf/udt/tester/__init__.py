"""Active tester: the suite's Python UDT4 peer (:mod:`udtconf.udt.peer`) plays either role against a
live stack and misbehaves on purpose (crafted NAKs and ACKs, malformed packets, wrong socket
IDs, replayed handshakes, a cookie-round flood, silence mid-transfer) or is hostile (message
drop requests on a stream, a flood of completed handshakes, absurd MSS and flow windows, an
error signal among several connections). The probes are written by what they probe, each module
with a registry of its own, gathered here into :data:`PROBES`:

* :mod:`.probe` — what every probe shares: what it is given, the stack as server or client, a
  transfer judged byte by byte, and the run under the probe's deadline (:func:`run_probe`);
* :mod:`.handshake` — connection setup (§6.1, §13): malformed packets at a listener, floods of
  first-round requests and of completed handshakes, a replayed request, absurd MSS and flight
  flag sizes on either side;
* :mod:`.demux` — one port shared by connections (§3.3): a wrong socket ID, three connections at
  once, an error signal on one of three;
* :mod:`.feedback` — the sender under crafted NAKs and ACKs (§5.3, §5.4, §8.6, §8.7);
* :mod:`.timers` — the EXP timer while the tester is silent (§9.4): keep-alives, retransmissions;
* :mod:`.msg_drop` — message drop requests on STREAM and DGRAM connections (§5.8).
"""

from __future__ import annotations

from ... import active
from . import demux, feedback, handshake, msg_drop, timers
from .handshake import ABSURD_HANDSHAKES
from .probe import DEADLINES, Probe, ProbeEnv, deadline_of, run_probe

# The order of ``udtconf run --list`` and docs/conformance/cases.md: the modules in the order of
# this docstring, each module's probes in the order they are written.
PROBES: active.Probes[ProbeEnv] = active.Probes(
    [*handshake.PROBES, *demux.PROBES, *feedback.PROBES, *timers.PROBES, *msg_drop.PROBES]
)

__all__ = ["ABSURD_HANDSHAKES", "DEADLINES", "PROBES", "Probe", "ProbeEnv", "deadline_of", "run_probe"]
