"""SABUL's interop cases (:class:`~udtconf.runner.InteropCase`), played by
:mod:`udtconf.sabul.interop`: the server is the sender (SABUL.md §2), the client the receiver.

==========  ===================================================================================
handshake   1 KiB: the control connection, the option block and its echo, the data, the end
mss         16 KiB with MSS given to both roles (server 1052, client 1280)
transfer    2 MiB bulk
loss        1 MiB through :class:`~udtconf.sabul.relay.SabulRelay`, which drops chosen data packets
empty       nothing to send: the session opens and ends
==========  ===================================================================================
"""

from __future__ import annotations

from ..runner import InteropCase, cases

CASES = cases(
    InteropCase("handshake", 1024),
    InteropCase("mss", 16 * 1024, server_mss=1052, client_mss=1280),
    InteropCase("transfer", 2 * 1024 * 1024),
    InteropCase("loss", 1024 * 1024, timeout=60.0, relay=True),
    InteropCase("empty", 0),
)
ALL_CASES = frozenset(CASES)

__all__ = ["ALL_CASES", "CASES"]
