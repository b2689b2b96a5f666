"""The suite's FRTP peer: the SABUL peer (:mod:`udtconf.sabul.peer`) under FRTP's profile,
written from ``docs/spec/FRTP.md`` (not from the Rust code). Same sans-IO call order as SABUL's,
driven by the same driver (:mod:`udtconf.sabul.driver`). What the profile changes, each through
a hook of SABUL's peer (its extension interface; nothing else of it is touched):

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
from typing import ClassVar

from ..sabul.peer import ProtocolError, ReceiverConfig, SabulReceiver, SabulSender, SenderConfig, split_by_words
from ..sabul.wire import DEFAULT_BUF_SIZE, Err
from ..seq import MAX
from .wire import FRTP_BLOCK_LEN, FrtpOptionBlock, decode_frtp_block, ip_word

ACK_INTERVAL = 0.100  # §5
ERR_INTERVAL = 0.020  # §5: the whole loss list
DEFAULT_MAX_RATE_BPS = 10_000_000_000  # what a sender honours unless configured (docs/cli.md frtp: 10000 Mbit/s)
BURST_SLACK = 0.001  # §9 TC 11: a late driver may catch up by at most 1 ms of packets
STACK = "frtp-py"


@dataclass
class FixedRate:
    """A :class:`~udtconf.sabul.rate.RateController` with nothing adaptive (§4, §7): one
    interval, one window."""

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
        return False  # no freeze (§4)


class FrtpSender(SabulSender):
    block_len = FRTP_BLOCK_LEN  # §3.3
    stack = STACK
    burst_slack = BURST_SLACK  # §9 TC 11
    restart_after_idle = True  # §9 TC 11: after idle, the next-but-one packet waits a full IPT

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
        self.frtp: FrtpOptionBlock | None = None  # the echo, once the block is accepted

    def accept_block(self, raw: bytes) -> FrtpOptionBlock:
        """The 52-byte block, validated (§3.3), and its echo; a rate above the sender's maximum is
        refused with :class:`ProtocolError` (the driver then resets the connection: §2 step 3,
        §9 TC 10)."""
        block = decode_frtp_block(raw)
        if block.rate_bps > self.max_rate_bps:
            raise ProtocolError(
                f"the receiver asks for {block.rate_bps} bit/s, above this sender's maximum {self.max_rate_bps} "
                "(FRTP.md §2 step 3): refused"
            )
        self.frtp = block.echo(self.config.pkt_size)
        return self.frtp

    def flow_window(self) -> int:
        """§4 step 3 TC: ``min(recv_flag_size, sending-buffer capacity in packets)``."""
        assert self.frtp is not None, "handle_block first"
        return min(self.frtp.sabul.recv_flag_size, max(1, self.buffer_bytes // self.frtp.sabul.payload_size))

    def start_rate_control(self, window: int) -> FixedRate:
        """§4: the fixed IPT of the negotiated rate for every packet, never adjusted; the whole
        window from the start (no slow start, §7)."""
        assert self.frtp is not None, "handle_block first"
        return FixedRate(interval=self.frtp.ipt() * 1e6, window=window, max_window=window)

    def data_dest(self, control_peer_ip: str) -> tuple[str, int]:
        """(data_ip, data_port) from the block; data_ip 0 = the control peer (§2 step 5)."""
        assert self.frtp is not None, "handle_block first"
        return self.frtp.data_address(control_peer_ip)


@dataclass
class FrtpReceiver(SabulReceiver):
    block_len: ClassVar[int] = FRTP_BLOCK_LEN  # §3.3
    stack: ClassVar[str] = STACK
    echo_rule: ClassVar[str] = "FRTP.md §9 TC 10"
    ack_interval: ClassVar[float] = ACK_INTERVAL  # §5: every 100 ms
    err_interval: ClassVar[float] = ERR_INTERVAL  # §5: every 20 ms
    syn_interval: ClassVar[float | None] = None  # §3.2: no SYN
    rtt_from_setup: ClassVar[bool] = False  # §5: no timer is RTT-gated

    data_ip: str = "0.0.0.0"
    rate_bps: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.frtp = FrtpOptionBlock(self.block, ip_word(self.data_ip), self.rate_bps)
        self.full_acks = 0

    def own_block(self) -> FrtpOptionBlock:
        """The 52-byte block: SABUL's words, the data address and the rate (§3.3)."""
        return self.frtp

    def decode_echo(self, raw: bytes) -> FrtpOptionBlock:
        return decode_frtp_block(raw, validate=False)

    def data_source_ok(self, src_ip: str, control_peer_ip: str) -> bool:
        return True  # §2 step 6: the circuit is dedicated

    def window_full(self) -> None:
        """§5, §9 TC 12: move the ACK point over what arrived in order, then ACK, always."""
        self.send_ack(force=True)
        self.full_acks += 1

    def periodic_errs(self, now: float) -> list[Err]:
        """§5: every 20 ms the whole loss list, if non-empty."""
        return self.whole_list_errs()

    def whole_list_errs(self) -> list[Err]:
        """The whole loss list as ERR messages of at most max_loss_length words each (§5)."""
        assert self.echo is not None
        groups = split_by_words(self.loss_list(), self.echo.max_loss_length)
        return [Err.from_losses([n & MAX for n in g]) for g in groups]


def make_receiver(
    rate_bps: int,
) -> Callable[[int, int, ReceiverConfig, str], SabulReceiver]:
    """The driver's ``make_receiver`` for an FRTP receiver asking for ``rate_bps``."""

    def make(data_port: int, ctrl_port: int, config: ReceiverConfig, data_ip: str) -> SabulReceiver:
        return FrtpReceiver(data_port, ctrl_port, config, data_ip=data_ip, rate_bps=rate_bps)

    return make


__all__ = ["FixedRate", "FrtpReceiver", "FrtpSender", "make_receiver"]
