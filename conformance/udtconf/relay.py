"""A relay's thread, whatever the protocol: what the suite's relays share. A relay sits between
a client and a server on loopback, passes their packets on, and drops chosen ones — UDT4's UDP
relay (:class:`udtconf.udt.relay.LossRelay`) and SABUL's relay of both its channels
(:class:`udtconf.sabul.relay.SabulRelay`) are built on :class:`Relay`.
"""

from __future__ import annotations

import threading
import time
from typing import Self


class Relay:
    """A relay's thread: entering starts it, it polls until :meth:`close` or the end of its
    ``lifetime`` (s), and closing frees its sockets. Each chosen packet is dropped the first
    ``drop_times`` times it passes; ``dropped`` lists the numbers dropped, ``forwarded`` counts
    the packets passed on."""

    def __init__(self, name: str, drop_times: int, lifetime: float) -> None:
        self.drop_times = drop_times
        self.lifetime = lifetime
        self.dropped: list[int] = []
        self.forwarded = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._free()

    def _run(self) -> None:
        deadline = time.monotonic() + self.lifetime
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._poll()

    def _poll(self) -> None:
        """One round: wait briefly for traffic and pass it on."""
        raise NotImplementedError

    def _free(self) -> None:
        raise NotImplementedError


__all__ = ["Relay"]
