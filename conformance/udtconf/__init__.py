"""udtconf — an implementation-independent conformance suite for the UDT family (UDT4, SABUL, FRTP).

The suite reaches a stack only through the adapter contract
(``docs/conformance/adapter-contract.md``) and through the bytes it puts on the wire. Each
protocol is a subpackage written from its spec, independently of the Rust implementation, so
that the two check each other: :mod:`udtconf.udt` (``docs/spec/UDT4.md``), :mod:`udtconf.sabul`
(``docs/spec/SABUL.md``) and :mod:`udtconf.frtp` (``docs/spec/FRTP.md``, on SABUL's). The
modules at the top are what they share (the rule machinery, probes, a relay's thread, the
interop runner, the processes' diagnosis, reports, expectations, the gate) and the three that
wire the family together (:mod:`udtconf.family`, :mod:`udtconf.catalog`,
:mod:`udtconf.selection`).
"""

from pathlib import Path

# The suite's directory (conformance/): its tests, its expectations.toml, its pytest root.
CONFORMANCE_DIR = Path(__file__).resolve().parent.parent
