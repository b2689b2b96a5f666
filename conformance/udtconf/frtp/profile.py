"""FRTP's profile of SABUL's wire tools (:mod:`udtconf.sabul.profile`): the trace
(:func:`udtconf.sabul.trace.sessions`), the relay (:class:`udtconf.sabul.relay.SabulRelay`) and
the interop run (:func:`udtconf.sabul.interop.run`) under :data:`FRTP` read FRTP's block.

* the block and the echo are 52 bytes (``docs/spec/FRTP.md`` §3.3): SABUL's ten words, then
  ``data_ip`` (word 10) and ``rate_bps`` (words 11–12); DATA goes to (data_ip, data_port),
  data_ip 0 = the control peer (§2 step 5);
* a relay points words 0 *and* 10 at itself and puts the receiver's back into the echo;
* the interop run's client gets ``DATA_ADDR`` (:data:`FRTP_DATA_ADDR`, 127.0.0.2), the
  data-path address it announces, so DATA and control are told apart in the capture (control
  stays on 127.0.0.1); the ``loss`` case drops some DATA more than once
  (:data:`FRTP_LOSS_DROPS`), so that losses stay outstanding across the receiver's 20 ms ERR
  ticks (§5).

Importing :mod:`udtconf.frtp` registers :data:`FRTP` for the stacks of protocol ``frtp``
(:func:`udtconf.sabul.profile.register`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from ..sabul.profile import LOSS_DROPS, Endpoint, SabulProfile, register
from ..sabul.wire import OPTION_BLOCK_LEN
from .wire import FRTP_BLOCK_LEN, FrtpOptionBlock, decode_frtp_block, ip_word

# sequence number → transmissions dropped: SABUL's drops, and 20–21 and 99–101 lose their first
# retransmissions too, so the whole-list ERR every 20 ms must repeat them (§5)
FRTP_LOSS_DROPS = {n: 1 for n in LOSS_DROPS} | {20: 3, 21: 3, 99: 2, 100: 2, 101: 2}
FRTP_DATA_ADDR = "127.0.0.2"  # the receiver's data-path address (control: 127.0.0.1)
_DATA_IP = slice(OPTION_BLOCK_LEN, OPTION_BLOCK_LEN + 4)  # word 10 (§3.3)


class FrtpProfile(SabulProfile):
    """FRTP's 52-byte block (§3.3) in SABUL's tools."""

    protocol: ClassVar[str] = "frtp"
    head_len: ClassVar[int] = FRTP_BLOCK_LEN
    loss_drops: ClassVar[Iterable[int] | Mapping[int, int]] = FRTP_LOSS_DROPS
    client_env: ClassVar[Mapping[str, str]] = {"DATA_ADDR": FRTP_DATA_ADDR}

    def decode_block(self, raw: bytes) -> FrtpOptionBlock:
        return decode_frtp_block(raw, validate=False)

    def redirect(self, block: bytearray, to: Endpoint) -> None:
        """Word 0 (SABUL's) and word 10, ``data_ip`` (§2 step 5, §3.3)."""
        super().redirect(block, to)
        block[_DATA_IP] = ip_word(to[0]).to_bytes(4, "big")

    def restore(self, echo: bytearray, block: bytes) -> None:
        """Word 0 and word 10 as the receiver's block had them (data_ip 0 stays 0)."""
        super().restore(echo, block)
        echo[_DATA_IP] = block[_DATA_IP]


FRTP = register(FrtpProfile())

__all__ = ["FRTP", "FRTP_DATA_ADDR", "FRTP_LOSS_DROPS", "FrtpProfile"]
