"""The experiments: experiment files (``experiment``) run on the emulation, their results
written through the results layer. A run's shared state and repeats (``run``), the runner that
builds, calibrates and runs every part's lineups (``runner``), the part kinds (``bulk``,
``short_tcp``, ``sweep``) and what they share from a flow's settings to its result (``flows``),
the registry's stacks behind one interface (``stacks``), the seats a part needs (``seats``), its
stats streamed live (``live``) and judged by its bands (``bands``). The layer under the command
line (``udtbed.commands``).
"""
