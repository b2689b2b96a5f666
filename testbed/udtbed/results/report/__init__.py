"""Self-contained HTML report of a run directory (plots inline as base64 PNG, matplotlib).

It answers "did it reproduce?" first: a summary table with every paper result of the run, its
tolerance band at the run's scale and each stack's figure with ✓ / ✕ and its reading (PASS, FAIL
or 4.11 deviation, beside the reference stack's figure in the same run: udtbed.experiments.bands), each row
linking down to its part. The parts follow: calibration, the host-timing flags, one plot with
every stack and the paper's figure as a reference line, and the table of flows and metrics. When the run has
simulated figures (``udtbed.simulation.sim``'s JSON and PNG in ``<run dir>/sim``), the summary gives each
scenario's claims reproduced and a last section shows them beside the emulated ones.

Split by what it draws: ``summary`` (the headline and the bands' table), ``parts`` (each part's
sections), ``plots`` (the matplotlib figures), ``simulated`` (the simulated figures and the NS-2
check), over ``markup`` (what they share); ``page`` puts the page together and writes it.
"""

from .markup import anchor
from .page import render, write_report
from .simulated import SimFile, load_sims, ns2_checks, sim_section, sim_summary

__all__ = ["SimFile", "anchor", "load_sims", "ns2_checks", "render", "sim_section", "sim_summary", "write_report"]
