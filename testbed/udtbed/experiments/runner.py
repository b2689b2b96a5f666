"""How an experiment runs: build → calibrate → each stack in turn, for every part.

The experiment comes from its data file (:mod:`udtbed.experiments.experiment`). Every part is built and
calibrated once; then for every stack under test (:func:`lineups`: those of the protocols a part
takes; a baseline part runs once) the part runs as its kind says: bulk flows
(:mod:`udtbed.experiments.bulk`), a sweep of one of their options (:mod:`udtbed.experiments.sweep`), or short TCP flows
beside each count of bulk flows (:mod:`udtbed.experiments.short_tcp`), all on the run's shared state
(:mod:`udtbed.experiments.run`) and the flows' lifecycle (:mod:`udtbed.experiments.flows`). Every stack's result gets
the verdict of every band (:mod:`udtbed.experiments.bands`). Paper numbers are Mb/s at the papers' rates;
the results show them × scale. :func:`plan` lists a run's steps before anything is built (its
parts, their runs and repeats: ``udtbed run --dry-run``); the run follows the same order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from udtharness.stacks import reference_stacks

from ..emulation import cores
from ..emulation.calibrate import as_json, calibrate
from ..emulation.network import Network
from ..emulation.topology import load as load_topology
from ..results.results import ExperimentResult, PartResult, StackResult
from . import bulk, short_tcp, sweep
from .bands import against_reference, judge_all
from .experiment import Experiment, FlowOptions, Part
from .live import write_calibration
from .run import CALIBRATION_S, START_JITTER_S, Lineup, Repeats, Run, stack_seconds
from .stacks import BulkStack, all_stacks


class CalibrationError(RuntimeError):
    pass


class PartSkipped(RuntimeError):
    """A part cannot run with this run's stacks; the message says why."""


def lineups(part: Part, stacks: list[BulkStack], registry: Mapping[str, BulkStack] | None = None) -> list[Lineup]:
    """The runs of ``part``: one per stack under test whose protocol it takes, each with the
    flows that name a stack on that one; a baseline part (every flow names its stack) once.
    :class:`PartSkipped` when a named stack is not available or no stack under test fits."""
    named = {f.stack for f in part.flows if f.stack}
    pinned: dict[str, BulkStack] = {}
    if named:
        registry = all_stacks() if registry is None else registry
        for name in sorted(named):
            ok, why = registry[name].available()
            if not ok:
                raise PartSkipped(f"its flows need stack {name}, which is not available ({why})")
            pinned[name] = registry[name]
    if part.baseline:
        stacks_in_order = list(dict.fromkeys(pinned[f.stack] for f in part.flows if f.stack))
        protocols = {s.protocol for s in stacks_in_order}
        return [
            Lineup(
                "+".join(s.name for s in stacks_in_order),
                protocols.pop() if len(protocols) == 1 else "mixed",
                {f.name: pinned[f.stack] for f in part.flows if f.stack},
            )
        ]
    # The settings the part's flows of the stack under test need (a fixed rate, buffers): a
    # stack without an option for one of them does not run the part.
    own = [f for f in part.flows if not f.stack]
    needs = {x for f in own for x in f.options.settings()}
    if part.short_tcp:
        needs |= part.short_tcp.bulk.settings()
    if part.sweep:
        needs.add(FlowOptions().with_option(part.sweep.option, 1).settings().pop())
    # ... and what every one of them must have for a stack to run it (FRTP: a rate).
    given = set.intersection(*(f.options.settings() for f in own)) if own else set()
    if part.sweep:
        given |= FlowOptions().with_option(part.sweep.option, 1).settings()
    nets: set[str] | None = None
    if any(s.control_net for s in stacks):  # such a stack needs its control net in the topology
        nets = {link.net for link in load_topology(part.topology).links}

    def fits(s: BulkStack) -> bool:
        has_net = s.control_net is None or (nets is not None and s.control_net in nets)
        takes = all(s.takes(x) for x in needs) and s.required <= given
        return part.runs(s.protocol) and has_net and takes

    out = [
        Lineup(s.name, s.protocol, {f.name: pinned[f.stack] if f.stack else s for f in part.flows}, s)
        for s in stacks
        if fits(s)
    ]
    if not out:
        want = ", ".join(part.protocols or ())
        raise PartSkipped(f"it runs {want} stacks under test, and the run has none of them")
    return out


def part_runs(part: Part, stacks: list[BulkStack]) -> int:
    """How many times ``part`` runs with ``stacks`` (0: it is skipped), for the progress."""
    try:
        return len(lineups(part, stacks))
    except PartSkipped:
        return 0


@dataclass(frozen=True)
class Step:
    """One step of a run's plan: a part's build and calibration (``lineup`` None), or one run of
    the part by a lineup in one repeat (0: the first), with its planned wall time."""

    experiment: str
    part: str
    lineup: str | None
    repeat: int
    seconds: float


def due(part: Part, runs: list[Lineup], repeats: Repeats) -> list[tuple[int, list[Lineup]]]:
    """Per repeat, the runs of ``part`` in it, in turns (A B A B ...): every run in the first, in
    the later ones those that ``repeats`` repeats (none: the repeat is left out)."""
    return [(k, now) for k in range(repeats.n) if (now := [x for x in runs if k < repeats.of(part, x)])]


def plan(experiments: list[Experiment], stacks: list[BulkStack], duration: float, repeats: Repeats) -> list[Step]:
    """The steps a run of ``experiments`` with ``stacks`` takes, in order (a part that none of
    them runs is left out): what ``udtbed run --dry-run`` prints and the progress counts."""
    out: list[Step] = []
    for e in experiments:
        for p in e.parts:
            try:
                runs = lineups(p, stacks)
            except PartSkipped:
                continue
            out.append(Step(e.name, p.label, None, 0, CALIBRATION_S))
            for k, now in due(p, runs, repeats):
                # A repeat after the first waits up to START_JITTER_S before its flows start.
                seconds = stack_seconds(p, duration) + (START_JITTER_S / 2 if k else 0.0)
                out.extend(Step(e.name, p.label, x.name, k, seconds) for x in now)
    return out


def planned_seconds(run: Run, experiments: list[Experiment], stacks: list[BulkStack]) -> float:
    return sum(s.seconds for s in plan(experiments, stacks, run.duration, run.repeats))


def run_experiment(run: Run, exp: Experiment, stacks: list[BulkStack]) -> ExperimentResult:
    result = ExperimentResult(
        experiment=exp.name,
        title=exp.title,
        figure=exp.figure,
        note=exp.note,
        scale=run.scale,
        duration_s=run.duration,
        warmup_s=run.warmup,
        backend=run.backend,
    )
    for part in exp.parts:
        try:
            runs = lineups(part, stacks)
        except PartSkipped as e:
            run.log(f"== {exp.name} / {part.label}: skipped: {e}")
            continue
        result.parts.append(_run_part(run, exp, part, runs))
    return result


def _run_part(run: Run, exp: Experiment, part: Part, runs: list[Lineup]) -> PartResult:
    topo = load_topology(part.topology)
    run.progress.step(f"{exp.name} / {part.label}: build, calibrate", CALIBRATION_S)
    run.log(f"== {exp.name} / {part.label}: building {topo.name} (scale {run.scale}, {run.backend})")
    work = run.raw / exp.name / part.label
    work.mkdir(parents=True, exist_ok=True)
    refs = reference_stacks()
    cc = run.core_check(part, topo)
    if not cc.ok:
        msg = f"{exp.name} / {part.label}: {cc.shortfall()}"
        if run.on_cores_fail == "refuse":
            raise cores.CoresError(msg)
        run.log(f"  WARNING: {msg}; flagged, running anyway")
    link_cpus = cc.pins.links() if cc.pins else {}
    with (
        run.pinned(cc.pins),
        Network(
            topo, scale=run.scale, backend=run.backend, workdir=work, link_cpus=link_cpus, cluster=run.cluster
        ) as net,
    ):
        if part.short_tcp:
            pairs = [(part.short_tcp.src, part.short_tcp.dst)]
        else:
            pairs = [(f.src, f.dst) for f in part.flows]
        cals = calibrate(net, pairs, run.rtt_tol_ms, run.rate_tol, log=run.log)
        write_calibration(run.influx, {"run": run.run_id, "experiment": exp.name, "part": part.label}, cals)
        pres = PartResult(
            label=part.label,
            topology=topo.name,
            topology_file=part.topology.name,
            topology_paper=topo.paper,
            links={str(k): v for k, v in net.link_specs.items()}
            | {f"nic:{h}": {"tc_qdisc": a} for h, a in net.nic_specs.items()}
            | {f"underlay:{i}": u for i, u in enumerate(net.underlays)},
            calibration=as_json(cals),
            calibration_ok=all(c.ok for c in cals),
            paper=part.paper,
            sweep=asdict(part.sweep) if part.sweep else None,
            cores=cc.as_json(),
            offloads=net.offloads(),
        )
        if not pres.calibration_ok:
            msg = (
                f"calibration of {topo.name} is off beyond tolerance (RTT ±{run.rtt_tol_ms} ms, "
                f"rate ±{run.rate_tol * 100:.0f}%) at scale {run.scale}"
            )
            if run.on_cal_fail == "refuse":
                raise CalibrationError(msg + "; lower SCALE or pass CALIBRATION=flag to run anyway")
            run.log(f"  WARNING: {msg}; flagged, running anyway")
        # Repeats interleave the stacks (A B A B ...); each repeat writes its raw files apart.
        # A run that ``run.repeats`` does not repeat (--repeat-only) is in the first repeat only.
        for repeat, now in due(part, runs, run.repeats):
            run.current_repeat = repeat
            raw = work if repeat == 0 else work / f"repeat-{repeat + 1}"
            raw.mkdir(exist_ok=True)
            stacks: dict[str, StackResult] = {}
            for lineup in now:
                n = run.repeats.of(part, lineup)
                of = f" (repeat {repeat + 1} of {n})" if n > 1 else ""
                label = f"{exp.name} / {part.label} / {lineup.name}{of}"
                run.progress.step(label, stack_seconds(part, run.duration) + (START_JITTER_S / 2 if repeat else 0.0))
                beside = sorted({s.name for s in lineup.flow_stacks.values()} - {lineup.name})
                jitter = run.start_jitter(exp, part, lineup.name, repeat)
                run.log(
                    f"  -- {lineup.name}{of}: {run.duration:.0f} s"
                    + (f" (beside {', '.join(beside)})" if beside else "")
                    + (f", start {jitter:.2f} s late" if jitter else "")
                )
                time.sleep(jitter)
                if part.short_tcp:
                    assert lineup.under_test is not None
                    res = short_tcp.run_part(run, exp, part, net, lineup.under_test, raw)
                elif part.sweep:
                    res = sweep.run_part(run, exp, part, net, lineup, raw, topo)
                else:
                    res = bulk.run_part(run, exp, part, net, lineup, raw, topo)
                res.repeat, res.start_jitter_s = repeat, round(jitter, 3)
                reference = refs.get(res.protocol) == lineup.name
                res.verdicts = judge_all(part, res, run.scale, run.warmup, run.duration, reference)
                for v in res.verdicts:
                    run.log(f"     {v.line()}")
                stacks[lineup.name] = res
            # Each band read against the reference stack's value in this repeat (udtbed.experiments.bands).
            for ref in refs.values():
                for res in against_reference(stacks, ref, part, run.scale, run.warmup, run.duration):
                    run.log(f"  -- {res.stack} against {ref}:")
                    for v in res.verdicts:
                        run.log(f"     {v.line()}")
            if repeat == 0:
                pres.stacks = stacks
            else:
                pres.more_repeats.append(stacks)
        # udt-linkem's last stats line; netem's qdisc counters (frames out, queue and loss drops).
        stats = net.link_stats() if net.backend == "linkem" else net.link_counters()
        pres.link_stats = {str(k): v for k, v in stats.items()}
    return pres
