"""The suite's FRTP peer: the SABUL peer (:mod:`udtconf.sabul.peer`) under FRTP's profile,
written from ``docs/spec/FRTP.md`` (not from the Rust code). Same sans-IO call order as SABUL's,
driven by the same driver (:mod:`udtconf.sabul.driver`). What the profile changes:

* set-up (§2, §3.3): the 52-byte block carries the data-path IPv4 address and the rate; the
  sender echoes it unchanged, or aborts (a reset, no echo) when the rate is above its maximum;
* sender (§4): a fixed inter-packet time ``(pkt_size + 28) · 8 / rate`` for every packet,
  retransmissions included, never adjusted (no rate control, SYN ignored, no freeze); window =
  ``min(recv_flag_size, buffer capacity in packets)``, no slow start; after idle the schedule
  restarts (TC 11); DATA goes to the announced data address;
* receiver (§5): no SYN; the whole loss list as ERR every 20 ms (split past max_loss_length
  words); an ACK every 100 ms when it advanced, and always when a packet falls beyond the
  resequencing window; DATA taken from any source on the data socket (§2 step 6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..sabul.peer import ProtocolError, ReceiverConfig, SabulReceiver, SabulSender, SenderConfig, split_by_words
from ..sabul.wire import DEFAULT_BUF_SIZE, Ack, Err, SabulWireError
from ..seq import MAX
from .wire import FRTP_BLOCK_LEN, FrtpOptionBlock, decode_frtp_block, ip_word

ACK_INTERVAL = 0.100  # §5
ERR_INTERVAL = 0.020  # §5: the whole loss list
DEFAULT_MAX_RATE_BPS = 10_000_000_000  # what a sender honours unless configured (docs/cli.md frtp: 10000 Mbit/s)
BURST_SLACK = 0.001  # §9 TC 11: a late driver may catch up by at most 1 ms of packets
STACK = "frtp-py"


@dataclass
class FixedRate:
    """RateControl's interface with nothing adaptive (§4, §7): one interval, one window."""

    interval: float  # µs
    window: int
    max_window: int = 0
    slow_start: bool = False

    def on_sent(self, packets: int = 1) -> None:
        pass

    def on_ack(self, newly_acked: int) -> None:
        pass

    def on_err(self, first: int, lost: int, largest_sent: int) -> None:
        pass  # no rate decrease on ERR (§4)

    def on_syn(self) -> bool:
        return False  # a type-4 frame is ignored (§3.2 TC)

    def take_freeze(self) -> bool:
        return False


class FrtpSender(SabulSender):
    block_len = FRTP_BLOCK_LEN
    stack = STACK
    burst_slack = BURST_SLACK
    restart_after_idle = True

    def __init__(
        self,
        read: Callable[[int], bytes],
        config: SenderConfig | None = None,
        max_rate_bps: int = DEFAULT_MAX_RATE_BPS,
        buffer_bytes: int = DEFAULT_BUF_SIZE,
    ) -> None:
        super().__init__(read, config or SenderConfig(slow_start=False))
        self.max_rate_bps = max_rate_bps
        self.buffer_bytes = buffer_bytes
        self.frtp: FrtpOptionBlock | None = None

    def handle_block(self, raw: bytes, now: float) -> bytes:
        """Validates the 52-byte block and returns the echo, or raises :class:`ProtocolError`
        (the driver then resets the connection: §9 TC 10) for a bad block or a rate above the
        sender's maximum."""
        try:
            block = decode_frtp_block(raw)
        except SabulWireError as e:
            raise ProtocolError(f"option block rejected: {e}") from e
        if block.rate_bps > self.max_rate_bps:
            raise ProtocolError(
                f"the receiver asks for {block.rate_bps} bit/s, above this sender's maximum {self.max_rate_bps} "
                "(FRTP.md §2 step 3): refused"
            )
        echo = block.echo(self.config.pkt_size)
        self.frtp = echo
        self.block = echo.sabul
        window = min(echo.sabul.recv_flag_size, max(1, self.buffer_bytes // echo.sabul.payload_size))
        if self.config.max_window:
            window = min(window, self.config.max_window)
        self.rc = FixedRate(interval=echo.ipt() * 1e6, window=window, max_window=window)  # type: ignore[assignment]
        self._next_send = now
        self._idle = True  # the schedule starts at the first packet (§9 TC 11)
        self._exp_deadline = now + 1.0
        return echo.encode()

    def data_dest(self, control_peer_ip: str) -> tuple[str, int]:
        """(data_ip, data_port) from the block; data_ip 0 = the control peer (§2 step 5)."""
        assert self.frtp is not None, "handle_block first"
        return self.frtp.data_address(control_peer_ip)


@dataclass
class FrtpReceiver(SabulReceiver):
    block_len = FRTP_BLOCK_LEN
    stack = STACK

    data_ip: str = "0.0.0.0"
    rate_bps: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.frtp = FrtpOptionBlock(self.block, ip_word(self.data_ip), self.rate_bps)
        self.full_acks = 0

    echo_rule = "FRTP.md §9 TC 10"

    def _own_block(self) -> FrtpOptionBlock:
        return self.frtp

    def _decode_echo(self, raw: bytes) -> FrtpOptionBlock:
        return decode_frtp_block(raw, validate=False)

    def _start(self, echo: FrtpOptionBlock, now: float) -> None:
        self.echo = echo.sabul
        self._next_ack = now + ACK_INTERVAL
        self._next_err = now + ERR_INTERVAL
        self._next_syn = float("inf")  # no SYN (§3.2)

    def data_source_ok(self, src_ip: str, control_peer_ip: str) -> bool:
        return True  # §2 step 6: the circuit is dedicated

    def _window_full(self) -> None:
        """§5, §9 TC 12: move the ACK point over what arrived in order, then ACK, always."""
        a = self._ack_number()
        self.last_ack = max(self.last_ack, a)
        self._ctrl.append(Ack(self.last_ack & MAX).encode())
        self.stats.acks_sent += 1
        self.full_acks += 1

    def handle_timeout(self, now: float) -> None:
        if self.closed:
            return
        if now >= self._next_ack:
            self._ack()  # only if the ACK point advanced (§9 TC 7)
            self._next_ack = now + ACK_INTERVAL
        if now >= self._next_err:
            for err in self.whole_list_errs():
                self._ctrl.append(err.encode())
                self.stats.naks_sent += 1
            self._next_err = now + ERR_INTERVAL

    def whole_list_errs(self) -> list[Err]:
        """The whole loss list as ERR messages of at most max_loss_length words each (§5)."""
        assert self.echo is not None
        groups = split_by_words(sorted(self._loss), self.echo.max_loss_length)
        return [Err.from_losses([n & MAX for n in g]) for g in groups]


def make_receiver(
    rate_bps: int,
) -> Callable[[int, int, ReceiverConfig, str], SabulReceiver]:
    """The driver's ``make_receiver`` for an FRTP receiver asking for ``rate_bps``."""

    def make(data_port: int, ctrl_port: int, config: ReceiverConfig, data_ip: str) -> SabulReceiver:
        return FrtpReceiver(data_port, ctrl_port, config, data_ip=data_ip, rate_bps=rate_bps)

    return make


__all__ = ["FixedRate", "FrtpReceiver", "FrtpSender", "make_receiver"]
