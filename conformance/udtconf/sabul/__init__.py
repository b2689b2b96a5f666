"""SABUL in the conformance suite, written from ``docs/spec/SABUL.md`` (never from the Rust code).

* :mod:`.wire` — the codec of both channels: DATA over UDP, the option block and its echo, and
  the ACK / ERR / SYN frames of the TCP control stream, with an incremental stream reader;
* :mod:`.rate` — the sender's rate control (§7) and flow window (§8) as pure arithmetic;
* :mod:`.peer` — a small, independent SABUL sender and receiver (sans-IO state machines) with a
  socket driver, so that the SABUL matrix has a second stack besides the Rust one;
* :mod:`.cli` — ``python -m udtconf.sabul send|recv``, the ``sabul`` command line of docs/cli.md.
"""
