"""udtconf — an implementation-independent conformance suite for UDT4.

The suite reaches a stack only through the adapter contract
(``docs/conformance/adapter-contract.md``) and through the bytes it puts on the wire.
Its codec (:mod:`udtconf.wire`) is written from ``docs/spec/UDT4.md``, independently of
the Rust implementation, so that the two check each other.
"""
