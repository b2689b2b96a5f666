"""UDT4's interop cases (:class:`~udtconf.runner.InteropCase`), played by
:mod:`udtconf.udt.interop`. The data always flows client → server.

==============  =================================================================================
handshake       1 KiB, STREAM: connection set-up, a one-packet message, close
mss             16 KiB, STREAM with MSS negotiation (server MSS=1052, client MSS=1280: the
                connection uses 1052, so payloads are cut at 1008 bytes, UDT4.md §6.1)
transfer        2 MiB STREAM bulk
dgram           1 MiB in DGRAM (message) mode
rendezvous      256 KiB, both sides bind and connect to each other (UDT_RENDEZVOUS, §6.3)
loss            1 MiB STREAM through :class:`~udtconf.udt.relay.LossRelay`, which drops chosen packets
                (single, a run of 2, a long run, a run of 3) and forms a 3000 packet/s drop-tail
                bottleneck (64-packet queue)
wrap            1 MiB STREAM through the relay, which moves the sequence space so that the server
                sees the 2^31 wrap 100 packets in (UDT4.md §4), with three drops around it
close           64 KiB then a graceful close: both roles must exit 0 and a Shutdown is on the wire
multiconnect    3 clients at once to one server port (OUTPUT is a directory, one file per connection)
==============  =================================================================================
"""

from __future__ import annotations

from ..runner import InteropCase, cases

CASES = cases(
    InteropCase("handshake", 1024),
    InteropCase("mss", 16 * 1024, server_mss=1052, client_mss=1280),
    InteropCase("transfer", 2 * 1024 * 1024),
    InteropCase("dgram", 1024 * 1024),
    InteropCase("rendezvous", 256 * 1024, timeout=45.0, rendezvous=True),
    InteropCase("loss", 1024 * 1024, timeout=60.0, relay=True),
    InteropCase("wrap", 1024 * 1024, relay=True),
    InteropCase("close", 64 * 1024),
    InteropCase("multiconnect", 128 * 1024, clients=3),
)
ALL_CASES = frozenset(CASES)
LISTENER_CASES = frozenset(n for n, c in CASES.items() if not c.rendezvous)  # a server that listens

__all__ = ["ALL_CASES", "CASES", "LISTENER_CASES"]
