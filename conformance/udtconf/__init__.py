"""udtconf — an implementation-independent conformance suite for the UDT family (UDT4, SABUL, FRTP).

The suite reaches a stack only through the adapter contract
(``docs/conformance/adapter-contract.md``) and through the bytes it puts on the wire.
Its codec (:mod:`udtconf.wire`) is written from ``docs/spec/UDT4.md``, independently of
the Rust implementation, so that the two check each other.
"""

from pathlib import Path

# The suite's directory (conformance/): its tests, its expectations.toml, its pytest root.
CONFORMANCE_DIR = Path(__file__).resolve().parent.parent
