"""The emulation: what the stacks run on, and nothing of what is run on it. Topology files
(``topology``) built as namespaces joined by udt-linkem or netem links (``network``), on this
machine or across servers over SSH (``cluster``, ``lab``), or in a stock kernel under QEMU or UML
(``vm``); processes and containers in those namespaces (``runtime``); the paths' RTT and rate
measured by small traffic tools (``calibrate``, ``probe``); captures, the machine's watch and
facts (``capture``, ``hostwatch``, ``hostinfo``); a run's CPUs, seats and pins (``cores``); the
backends side by side (``backend_compare``). The lowest layer of udtbed: it imports none of the
others, and what it needs of an experiment (a part's seats) is handed to it as data.
"""
