"""UDT4 in the conformance suite, written from ``docs/spec/UDT4.md`` (never from the Rust code),
so that the suite and the implementation check each other.

* :mod:`.wire` — the packet codec (§2–5): the header, every control type, the loss-list words;
* :mod:`.trace` — a capture's datagrams as per-connection records of decoded packets;
* :mod:`.checks` — the wire rules (``udt4/<section>/<name>``) judged on those records, and the
  packets that spoil an exchange;
* :mod:`.relay` — the relay of the ``loss`` and ``wrap`` cases: chosen drops, a bottleneck, the
  sequence space moved across the 2^31 wrap (§4);
* :mod:`.interop` — UDT4's interop run: a server and a client stack on loopback, captured;
* :mod:`.diagnosis` — what the capture of a failed run says about how far it got, and whose
  fault the stall is;
* :mod:`.recovery` — recovery from a lost retransmission (§8.4, §9.4), judged against the
  reference stack;
* :mod:`.peer` — the suite's Python UDT4 peer, deliberately simple;
* :mod:`.tester` — the active tester's probes, a module per kind: the peer misbehaving on purpose
  against a stack.
"""
