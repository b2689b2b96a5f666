"""UDT testbed: emulated WAN topologies, experiments, reports (issue 3), laid out as its layers.

``emulation`` builds what the stacks run on: topology files, the network of namespaces and
emulated links, servers over SSH, processes and containers in it, calibration, captures and the
host's watch. ``simulation`` beside it runs the papers' NS-2 figures in the deterministic
simulator. ``results`` holds what a run produced as types and reads it back: the report, the
index of runs, comparisons and the gate. ``experiments`` runs the experiment files on the
emulation and writes those results. ``commands`` is the command line, one module per subcommand.
Each layer imports only those below it (``ci/import_graph.py`` holds it), and the entry point
(``__main__``), which builds its parser from the commands' table, is on top of them all.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository the testbed runs from (stacks, topologies, binaries)
