"""FRTP codec written from ``docs/spec/FRTP.md`` (independent of the Rust code), on top of the
SABUL codec (:mod:`udtconf.sabul.wire`): FRTP's DATA, ACK and ERR are SABUL's (§3.1, §3.2); what
is new is the 52-byte option block (§3.3) — SABUL's ten words, then the receiver's IPv4 address
on the data path (word 10, 0 = the control peer's address) and the fixed sending rate in bit/s
(words 11–12, unsigned 64-bit big-endian) — and the inter-packet time it fixes (§4).

    >>> b = FrtpOptionBlock(OptionBlock(7001), data_ip=ip_word("192.168.10.2"), rate_bps=500_000_000)
    >>> len(b.encode()), b.ipt()
    (52, 2.4e-05)
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, replace

from ..sabul.wire import DEFAULT_PKT_SIZE, OPTION_BLOCK_LEN, OptionBlock, SabulWireError, decode_option_block

FRTP_BLOCK_LEN = OPTION_BLOCK_LEN + 12  # 52: + data_ip + 64-bit rate (§3.3)
IP_UDP_HEADERS = 28  # §4: the IPT counts the IP-level size, pkt_size + 28
_TAIL = struct.Struct("!IQ")


class FrtpWireError(SabulWireError):
    """Bytes that are not valid FRTP; the message names the section of FRTP.md."""

    def __init__(self, message: str, section: str) -> None:
        ValueError.__init__(self, f"{message} (FRTP.md §{section})")
        self.message = message
        self.section = section

    def __reduce__(self) -> tuple[type[FrtpWireError], tuple[str, str]]:
        return (FrtpWireError, (self.message, self.section))


def ip_word(addr: str) -> int:
    """A dotted IPv4 address as word 10 (network byte order, §3.3)."""
    return int(ipaddress.IPv4Address(addr))


def ip_text(word: int) -> str:
    return str(ipaddress.IPv4Address(word & 0xFFFFFFFF))


def ipt_seconds(pkt_size: int, rate_bps: int) -> float:
    """§4 TC: IPT = (pkt_size + 28) · 8 / rate, once for the whole session."""
    return (pkt_size + IP_UDP_HEADERS) * 8 / rate_bps


@dataclass(frozen=True)
class FrtpOptionBlock:
    """The receiver's 52-byte block, echoed unchanged by a sender that accepts it (§2, §3.3)."""

    sabul: OptionBlock  # words 0–9, SABUL.md §3.4
    data_ip: int = 0  # word 10
    rate_bps: int = 0  # words 11–12

    @classmethod
    def build(cls, data_port: int, data_ip: str, rate_bps: int, pkt_size: int = DEFAULT_PKT_SIZE, **other: int):  # type: ignore[no-untyped-def]
        """A block with words 2–4 derived from ``pkt_size`` (SABUL.md §3.4)."""
        return cls(OptionBlock.for_packet_size(pkt_size, data_port, **other), ip_word(data_ip), rate_bps)

    @property
    def pkt_size(self) -> int:
        return self.sabul.pkt_size

    @property
    def data_port(self) -> int:
        return self.sabul.data_port

    def ipt(self) -> float:
        """The fixed inter-packet time this block asks for, seconds (§4)."""
        return ipt_seconds(self.sabul.pkt_size, self.rate_bps)

    def data_address(self, control_peer_ip: str) -> tuple[str, int]:
        """Where the sender sends DATA: (data_ip, data_port), data_ip 0 = the control peer (§2 step 5)."""
        return (ip_text(self.data_ip) if self.data_ip else control_peer_ip, self.sabul.data_port)

    def encode(self) -> bytes:
        """The 52 bytes, without validation (a probe may send an invalid block)."""
        return self.sabul.encode() + _TAIL.pack(self.data_ip & 0xFFFFFFFF, self.rate_bps & 0xFFFFFFFFFFFFFFFF)

    def problems(self) -> list[str]:
        """Why the block is invalid (§9 TC 10), empty when it is valid."""
        out = self.sabul.problems()
        ip = ipaddress.IPv4Address(self.data_ip & 0xFFFFFFFF)
        if ip.is_multicast or self.data_ip == 0xFFFFFFFF:
            out.append(f"data_ip {ip} is multicast or broadcast")
        if self.rate_bps == 0:
            out.append("rate_bps is 0")
        return out

    def validate(self) -> FrtpOptionBlock:
        bad = self.problems()
        if bad:
            raise FrtpWireError("invalid option block: " + "; ".join(bad), "3.3")
        return self

    def echo(self, sender_pkt_size: int) -> FrtpOptionBlock:
        """The sender's echo: SABUL's (words 2–4 possibly lowered), data_ip and rate unchanged."""
        return replace(self, sabul=self.sabul.echo(sender_pkt_size))

    def echo_problems(self, echo: FrtpOptionBlock) -> list[str]:
        """Why ``echo`` is not an acceptable echo of this block (§9 TC 10), empty when it is."""
        out = self.sabul.echo_problems(echo.sabul)
        if echo.data_ip != self.data_ip:
            out.append(f"echo changed data_ip: {ip_text(self.data_ip)} → {ip_text(echo.data_ip)}")
        if echo.rate_bps != self.rate_bps:
            out.append(f"echo changed rate_bps: {self.rate_bps} → {echo.rate_bps}")
        return out


def decode_frtp_block(buf: bytes, validate: bool = True) -> FrtpOptionBlock:
    """Exactly 52 bytes as an FRTP option block (validated by default, §3.3)."""
    if len(buf) != FRTP_BLOCK_LEN:
        raise FrtpWireError(f"option block of {len(buf)} bytes, not {FRTP_BLOCK_LEN}", "3.3")
    data_ip, rate_bps = _TAIL.unpack_from(buf, OPTION_BLOCK_LEN)
    block = FrtpOptionBlock(decode_option_block(bytes(buf[:OPTION_BLOCK_LEN]), validate=False), data_ip, rate_bps)
    return block.validate() if validate else block


__all__ = [
    "FRTP_BLOCK_LEN",
    "FrtpOptionBlock",
    "FrtpWireError",
    "decode_frtp_block",
    "ip_text",
    "ip_word",
    "ipt_seconds",
]
