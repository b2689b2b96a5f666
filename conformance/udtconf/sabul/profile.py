"""SABUL's tools under a profile: the extension point for a protocol built on SABUL.

A protocol that keeps SABUL's channels, frames and roles (``docs/spec/SABUL.md`` §2, §3) but
sends a longer option block — SABUL's ten words first, then words of its own — plugs in here
with a :class:`SabulProfile` subclass. SABUL's trace (:func:`udtconf.sabul.trace.sessions`),
relay (:class:`udtconf.sabul.relay.SabulRelay`) and interop run (:func:`udtconf.sabul.interop.run`)
take a profile and know nothing else of the protocol: SABUL's own, :data:`SABUL`, is the
default. What a profile says, one hook each:

* :attr:`SabulProfile.head_len` — the block's length in bytes (the echo has the same);
* :meth:`SabulProfile.decode_block` — the block or echo, unvalidated, as a :class:`~.wire.Block`
  (its SABUL words, its validity, its echo rules, the data address it announces);
* :meth:`SabulProfile.redirect` / :meth:`SabulProfile.restore` — how a relay points the block's
  data address at itself and puts the receiver's back into the echo;
* :attr:`SabulProfile.loss_drops` / :attr:`SabulProfile.client_env` — the interop run's ``loss``
  drops and the client's extra adapter environment.

:func:`register` puts a profile in the registry under its :attr:`~SabulProfile.protocol` (a
protocol's package registers its own when it is imported); :func:`profile_for` finds it, as the
interop run does for a stack's protocol.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import ClassVar

from .wire import OPTION_BLOCK_LEN, Block, decode_option_block

Endpoint = tuple[str, int]
_W = struct.Struct("!I")

# The interop run's ``loss`` case (udtconf.sabul.interop): DATA 5, 20–21, 40–59, 99–101, 300 and
# the last packet of 1 MiB (714: only EXP recovers a tail loss), each dropped once.
LOSS_DROPS = [5, 20, 21, *range(40, 60), 99, 100, 101, 300, 714]


class SabulProfile:
    """SABUL's own profile (SABUL.md §2, §3.4): the 40-byte block, whose word 0 is the data
    port and whose data address is the control peer's IP. A protocol built on SABUL subclasses
    it and overrides what its block changes."""

    protocol: ClassVar[str] = "sabul"  # the stacks' protocol name the registry knows it by
    head_len: ClassVar[int] = OPTION_BLOCK_LEN  # the block, and the echo (§3.4)
    # sequence number → transmissions the loss case's relay drops (a plain list: once each)
    loss_drops: ClassVar[Iterable[int] | Mapping[int, int]] = LOSS_DROPS
    client_env: ClassVar[Mapping[str, str]] = {}  # more adapter environment for the client

    def decode_block(self, raw: bytes) -> Block:
        """A block or echo of :attr:`head_len` bytes, unvalidated (a capture or a relay judges
        or passes on what it got)."""
        return decode_option_block(raw, validate=False)

    def redirect(self, block: bytearray, to: Endpoint) -> None:
        """Rewrites the receiver's block in place so that DATA goes to ``to`` (a relay's data
        socket): word 0, ``data_port`` (§3.4; the IP is the control peer's, §2 step 6)."""
        _W.pack_into(block, 0, to[1])

    def restore(self, echo: bytearray, block: bytes) -> None:
        """Rewrites the echo in place so that it carries the data address of the receiver's own
        ``block`` again (what :meth:`redirect` changed): word 0."""
        echo[0:4] = block[0:4]


SABUL = SabulProfile()
_REGISTRY: dict[str, SabulProfile] = {SABUL.protocol: SABUL}


def register(profile: SabulProfile) -> SabulProfile:
    """Puts ``profile`` in the registry under its protocol name (replacing one of that name)."""
    _REGISTRY[profile.protocol] = profile
    return profile


def profile_for(protocol: str) -> SabulProfile:
    """The profile registered for ``protocol``; LookupError if its package has not registered one."""
    try:
        return _REGISTRY[protocol]
    except KeyError:
        raise LookupError(
            f"no SABUL profile registered for protocol {protocol!r} (import its package first; "
            f"registered: {', '.join(sorted(_REGISTRY))})"
        ) from None


__all__ = ["LOSS_DROPS", "SABUL", "Endpoint", "SabulProfile", "profile_for", "register"]
