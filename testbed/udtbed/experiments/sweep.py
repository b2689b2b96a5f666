"""A sweep part: the part's bulk flows once per value of one of their options (``sweep = {
option, values }``: a fixed rate or a buffer), every flow's option set to it, on the same
network; each value a point of the stack's result (:class:`~udtbed.results.results.SweepPoint`), plotted
rather than judged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..emulation.network import Network
from ..emulation.topology import Topology
from ..results.results import StackResult, SweepPoint
from . import bulk
from .experiment import Experiment, Part
from .run import Lineup, Run


def run_part(
    run: Run, exp: Experiment, part: Part, net: Network, lineup: Lineup, work: Path, topo: Topology
) -> StackResult:
    """The part once per value of its sweep, every flow's option set to it, on the same network."""
    assert part.sweep is not None
    sw = part.sweep
    res = StackResult(stack=lineup.name, protocol=lineup.protocol)
    for value in sw.values:
        flows = [replace(f, options=f.options.with_option(sw.option, value)) for f in part.flows]
        run.log(f"     {sw.option} = {value:g} (x scale {run.scale:g})")
        tag = f"{lineup.name}-{sw.option}-{value:g}"
        one = bulk.run_part(run, exp, part, net, lineup, work, topo, flows, sw.seconds, tag, {sw.option: f"{value:g}"})
        res.sweep.append(SweepPoint(value, one.flows, one.host))
        if one.capture and res.capture is None:
            res.capture = one.capture
    return res
