"""The suite's FRTP peer over real loopback sockets (udtconf.sabul.driver under the FRTP profile,
udtconf.frtp.cli): DATA on the announced data address (127.0.0.2) while control stays on
127.0.0.1, byte-exact at the asked-for rate, and a rate above the sender's maximum refused on
both sides with the set-up exit status."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable

import pytest
from udtconf.frtp.peer import FrtpSender, make_receiver
from udtconf.sabul import driver
from udtconf.sabul.driver import EXIT_SETUP, SessionError
from udtconf.sabul.peer import ReceiverConfig, SenderConfig

QUIET = io.StringIO()
RATE = 40_000_000


class _RecordingSender(FrtpSender):
    """FRTP's sender, telling ``on_dest`` where its ``data_dest`` hook sends DATA."""

    def __init__(
        self,
        read: Callable[[int], bytes],
        cfg: SenderConfig | None,
        max_rate: int,
        on_dest: Callable[[tuple[str, int]], None],
    ) -> None:
        super().__init__(read, cfg, max_rate)
        self._on_dest = on_dest

    def data_dest(self, control_peer_ip: str) -> tuple[str, int]:
        dest = super().data_dest(control_peer_ip)
        self._on_dest(dest)
        return dest


class Serving:
    def __init__(self, data: bytes, max_rate: int) -> None:
        self.ready = threading.Event()
        self.address: tuple[str, int] = ("", 0)
        self.result: driver.SendResult | None = None
        self.error: SessionError | None = None
        self.dest: tuple[str, int] | None = None
        self._thread = threading.Thread(target=self._run, args=(data, max_rate), daemon=True)
        self._thread.start()
        assert self.ready.wait(5)

    def _listening(self, addr: tuple[str, int]) -> None:
        self.address = addr
        self.ready.set()

    def _make(self, read: Callable[[int], bytes], cfg: SenderConfig | None, max_rate: int) -> FrtpSender:
        return _RecordingSender(read, cfg, max_rate, on_dest=self._sending_to)

    def _sending_to(self, dest: tuple[str, int]) -> None:
        self.dest = dest

    def _run(self, data: bytes, max_rate: int) -> None:
        try:
            self.result = driver.send(
                ("127.0.0.1", 0),
                io.BytesIO(data),
                SenderConfig(slow_start=False),
                log=QUIET,
                on_listening=self._listening,
                make_sender=lambda read, cfg: self._make(read, cfg, max_rate),
            )
        except SessionError as e:
            self.error = e

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()


def test_data_goes_to_the_data_address_at_the_asked_for_rate() -> None:
    data = os.urandom(700 * 1468 + 3)  # ≈ 0.2 s at 40 Mbit/s
    s = Serving(data, RATE)
    out = io.BytesIO()
    t0 = time.monotonic()
    res = driver.receive(
        s.address, out, ReceiverConfig(), log=QUIET, data_ip="127.0.0.2", make_receiver=make_receiver(RATE)
    )
    seconds = time.monotonic() - t0
    s.join()
    assert out.getvalue() == data and res.bytes == len(data) and s.error is None
    assert s.dest is not None and s.dest[0] == "127.0.0.2"
    assert seconds >= 700 * 1500 * 8 / RATE * 0.9  # not faster than the rate
    assert res.receiver.stats.syns_sent == 0


def test_a_rate_above_the_senders_maximum_fails_both_sides_at_set_up() -> None:
    s = Serving(b"x" * 10_000, RATE)
    with pytest.raises(SessionError) as e:
        driver.receive(
            s.address,
            io.BytesIO(),
            ReceiverConfig(),
            log=QUIET,
            data_ip="127.0.0.2",
            make_receiver=make_receiver(RATE + 1),
        )
    s.join()
    assert e.value.code == EXIT_SETUP
    assert s.error is not None and s.error.code == EXIT_SETUP and "above this sender's maximum" in str(s.error)


def test_the_receiver_cannot_take_data_on_an_address_it_does_not_have() -> None:
    s = Serving(b"x", RATE)
    with pytest.raises(SessionError) as e:
        driver.receive(s.address, io.BytesIO(), log=QUIET, data_ip="192.0.2.1", make_receiver=make_receiver(RATE))
    assert e.value.code == driver.EXIT_IO
    s.join()  # the receiver connected, then reset: the sender's set-up failed
    assert s.error is not None and s.error.code == EXIT_SETUP
