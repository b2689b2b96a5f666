"""SABUL's rate control (``docs/spec/SABUL.md`` §7) and flow window (§8), as arithmetic with no
clock and no socket: the sender feeds it what happened, it answers with the inter-packet
interval, the window and whether to freeze.

* every DATA packet sent (new or retransmitted) → :meth:`RateControl.on_sent`;
* every ACK that acknowledges new packets → :meth:`RateControl.on_ack` (slow-start growth);
* every ERR → :meth:`RateControl.on_err` with its first number, its decoded count and the largest
  sequence number sent so far (decrease with the dec_count rule, freeze, end of slow start);
* every SYN → :meth:`RateControl.on_syn` (loss-rate EWMA and the increase).

Sequence numbers here are unwrapped (they only grow), so "later" is ``>``.

    >>> rc = RateControl(interval=12.0, slow_start=False)
    >>> rc.on_sent(833); rc.on_syn()
    True
    >>> round(rc.interval, 3)
    11.986
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

SYN_US = 10_000.0  # §7: the SYN period, also the freeze
ALPHA = 0.001  # §7: loss-rate threshold
HISTORY_WEIGHT = 0.1  # §7.2: weight of the history in the EWMA
DECREASE = 1.125  # §7.3
DEC_COUNT_RESET = 4  # §7.3
I_MIN, I_MAX = 10.0, 1000.0  # §7: interval limits, µs (applied after increases only)
DEFAULT_INTERVAL = 10.0  # §7.1
PACKET_BITS = 1500 * 8  # §7.1: rates are converted with a 1500-byte packet
MIN_INC = 1 / 1500  # §7.2: 1/MTU with the MTU fixed at 1500
DEFAULT_MAX_WINDOW = 25_600  # §3.4, §8: recv_flag_size


def interval_for_rate(mbps: float) -> float:
    """§7.1: the interval (µs) for an initial rate in Mb/s."""
    return PACKET_BITS / mbps


def increase_step(interval: float) -> float:
    """§7.2: packets to add per SYN at ``interval`` µs."""
    pps = SYN_US / interval
    return max(10.0 ** math.ceil(math.log10(pps)) / 1000.0, MIN_INC)


def increased(interval: float, i_min: float = I_MIN, i_max: float = I_MAX) -> float:
    """§7.2: the interval after one increase, clamped to [i_min, i_max] (§7.1: the application
    may set the limits; I_MIN, I_MAX by default)."""
    inc = increase_step(interval)
    return min(max(interval * SYN_US / (interval * inc + SYN_US), i_min), i_max)


class RateController(Protocol):
    """What the sender (:class:`udtconf.sabul.peer.SabulSender`) asks of its rate control:
    SABUL's is :class:`RateControl`; a profile without one returns its own from the sender's
    ``start_rate_control`` hook."""

    interval: float  # µs between packets (§7)
    window: int  # the flow window, packets (§8)
    max_window: int
    slow_start: bool

    def on_sent(self, packets: int = 1) -> None: ...

    def on_ack(self, newly_acked: int) -> None: ...

    def on_err(self, first: int, lost: int, largest_sent: int) -> None: ...

    def on_syn(self) -> bool: ...

    def take_freeze(self) -> bool: ...


@dataclass
class RateControl:
    """The sender's §7–§8 state. ``interval`` in µs; ``window`` in packets."""

    interval: float = DEFAULT_INTERVAL
    slow_start: bool = True
    i_min: float = I_MIN  # §7.1: the limits an increase clamps to, µs
    i_max: float = I_MAX
    max_window: int = DEFAULT_MAX_WINDOW
    history: float = 0.0  # H, the smoothed loss rate
    sent: int = 0  # DATA packets sent since the last SYN event
    lost: int = 0  # lost packets reported since the last SYN event
    last_dec_seq: int | None = None  # LastDecSeq
    err_count: int = 0
    dec_count: int = DEC_COUNT_RESET
    freeze: bool = False  # consumed by the sender's scheduler (take_freeze)
    window: int = 0  # set in __post_init__: 1 in slow start, else max_window
    increases: int = 0
    decreases: int = 0

    def __post_init__(self) -> None:
        self.window = 1 if self.slow_start else self.max_window

    def on_sent(self, packets: int = 1) -> None:
        self.sent += packets

    def on_ack(self, newly_acked: int) -> None:
        """§8: in slow start the window grows by the packets an ACK newly acknowledges."""
        if self.slow_start and newly_acked > 0:
            self.window += newly_acked
            if self.window >= self.max_window:
                self._end_slow_start()

    def on_err(self, first: int, lost: int, largest_sent: int) -> None:
        """§5.2, §7.3: decrease on ``first`` (condition 1 or 2), count the losses, and end
        slow start."""
        if self.last_dec_seq is None or first > self.last_dec_seq:
            self.interval *= DECREASE
            self.last_dec_seq = largest_sent
            self.freeze = True
            self.err_count = 1
            self.dec_count = DEC_COUNT_RESET
            self.decreases += 1
        else:
            self.err_count += 1
            if self.err_count >= 2**self.dec_count:
                self.dec_count += 1
                self.interval *= DECREASE
                self.decreases += 1
        self.lost += lost
        if self.slow_start:
            self._end_slow_start()

    def on_syn(self) -> bool:
        """§7.2: the SYN event; whether the rate increased."""
        if self.sent == 0:
            self.sent = self.lost = 0
            return False
        self.sent = max(self.sent, self.lost)
        self.history = HISTORY_WEIGHT * self.history + (1 - HISTORY_WEIGHT) * self.lost / self.sent
        self.sent = self.lost = 0
        if self.history > ALPHA or self.slow_start:
            return False
        self.interval = increased(self.interval, self.i_min, self.i_max)
        self.increases += 1
        return True

    def take_freeze(self) -> bool:
        """§7.4: whether the next gap is ``SYN + interval`` (then cleared)."""
        freeze, self.freeze = self.freeze, False
        return freeze

    def _end_slow_start(self) -> None:
        self.slow_start = False
        self.window = self.max_window
