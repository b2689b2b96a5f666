"""udtharness — the harness every user of the UDT family's stacks builds on.

The conformance suite (``udtconf``), the testbed (``udtbed``), the interop tests
(``impl/interop``) and the benches (``impl/bench``) run stacks, start and stop processes,
capture packets and read them back; this package holds that machinery once, and depends on
none of its users (``make check`` enforces it: ``ci/import_graph.py``).

- :mod:`~udtharness.stacks`: the registry of stacks (``stacks/*/meta.toml``), the adapter
  contract's constants, building and starting a stack.
- :mod:`~udtharness.processes`: every process a run starts, under memory and CPU caps, and its
  teardown on Ctrl-C.
- :mod:`~udtharness.netns`: network namespaces named by owner, a sender and a receiver joined
  by a veth pair or through ``udt-linkem``, and the sweep of those whose run is gone.
- :mod:`~udtharness.cli`: the family's command lines and the one stats-line schema.
- :mod:`~udtharness.capture`, :mod:`~udtharness.pcap`: live captures (dumpcap/tcpdump) and the
  pcap/pcapng reader and writer.
- :mod:`~udtharness.ports`, :mod:`~udtharness.testdata`: free ports, seeded test files.
- :mod:`~udtharness.progress`: one progress view for long runs.
- :mod:`~udtharness.metrics`: goodput series, Jain's index, stability, time to a share.
- :mod:`~udtharness.uncertainty`: a repeated figure's 95 % interval and a band judged on it
  (met, missed, inconclusive); needs the ``stats`` extra (scipy).
"""
