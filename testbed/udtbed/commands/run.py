"""``udtbed run``: the experiments on emulated links, here or across a cluster's servers; their
results, the run's metadata (``run.json``), the simulated figures and the report in a new run
directory (or, ``--dry-run``, only the plan). Everything the command line asks for is checked
before anything is built: a refusal prints why and exits 2 (a bad option) or 3 (too few cores)."""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from udtharness.progress import Progress

from .. import REPO
from ..emulation import cores, hostinfo, network, runtime
from ..emulation.cluster import Cluster, ClusterError, core_check, preflight, server_cpus
from ..emulation.network import Network, choose_backend
from ..emulation.topology import load
from ..experiments import seats
from ..experiments.experiment import EXPERIMENTS_DIR, Experiment, ExperimentError, Part
from ..experiments.plan import Placement, RunPlan, Sinks
from ..experiments.run import UDT_BUFFERS, Repeats, Run
from ..experiments.runner import CalibrationError, part_runs, run_experiment
from ..experiments.runner import plan as plan_steps
from ..experiments.stacks import BulkStack, all_stacks
from ..results.influx import InfluxWriter, LocalInfluxd
from ..simulation import sim
from .report import draw_report
from .shared import Command, checkout_commit, choose_scale, interrupt, select_experiments, select_parts, stale_cleanup
from .simulate import quick_ns2_checks, run_simulations

# The run's metadata copied into every experiment's result.
RESULT_META = (
    "run_id",
    "commit",
    "backend",
    "backend_reason",
    "scale",
    "scale_reason",
    "seed",
    "host_runtime",
    "host_image",
    "host_cpuset",
    "host_cpus",
    "host",
    "pin",
    "udt_buffers",
    "repeat",
    "repeat_only",
)


class _Refused(Exception):
    """The run does not start: what to print (the exception's text) and the exit status."""

    def __init__(self, message: str, rc: int = 2) -> None:
        super().__init__(message)
        self.rc = rc


def cmd_run(a: argparse.Namespace) -> int:
    """The run planned from the command line and checked (a refusal: its exit status), then
    printed (``--dry-run``) or carried out."""
    try:
        run_plan = plan_run(a)
    except _Refused as r:
        print(r, file=sys.stderr)
        return r.rc
    if a.dry_run:
        print("\n".join(run_plan.describe()))
        return 0
    return carry_out(run_plan)


def plan_run(a: argparse.Namespace) -> RunPlan:
    """The command line's run as one :class:`RunPlan`, every option checked before anything is
    built: :class:`_Refused` says why not."""
    exps, stacks, repeats = _selection(a)
    cpus, scale_asked = _cpus_and_scale(a)
    parts = [(e, p) for e in exps for p in e.parts if part_runs(p, stacks)]
    placement = _placement(a, cpus, scale_asked, parts)
    if placement.cluster is not None and a.backend == "auto":
        backend, backend_why = "linkem", "a cluster run: udt-linkem on the delay nodes (--backend netem for theirs)"
    else:
        backend, backend_why = choose_backend(a.backend)
    _refuse_parts_too_big(parts, backend, scale_asked, placement, a.cores)
    image = _stacks_image(a)
    return RunPlan(
        experiments=tuple(exps),
        stacks=tuple(stacks),
        repeats=repeats,
        duration=a.duration,
        backend=backend,
        backend_reason=backend_why,
        scale=scale_asked,
        placement=placement,
        sinks=Sinks(Path(a.results), a.influx, a.simulate, Path(a.scenarios_dir), a.report),
        runtime=a.runtime,
        image=image,
        calibration=a.calibration,
        rtt_tol_ms=a.rtt_tol_ms,
        rate_tol=a.rate_tol_pct / 100,
        cores=a.cores,
        udt_buffers=a.udt_buffers,
    )


def carry_out(plan: RunPlan) -> int:
    """The plan carried out: the run directory, the experiments, their cleanup however they end,
    the simulated figures, the report; 130 on Ctrl-C."""
    where = plan.placement
    if where.cpuset:
        os.sched_setaffinity(0, where.cpus)  # every process of the run inherits it, unless pinned to its seat
    host_runtime: Callable[[Network], runtime.HostRuntime] = (
        functools.partial(runtime.DockerRuntime, image=plan.image, cpuset=where.cpuset)
        if plan.image is not None
        else runtime.NamespaceRuntime
    )
    if plan.image is not None:
        print(
            f"host runtime: docker, image {plan.image.name} ({plan.image.id})"
            f"{f', cpuset {where.cpuset}' if where.cpuset else ''}"
        )
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    stale_cleanup()
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = plan.sinks.results / run_id
    outdir.mkdir(parents=True, exist_ok=True)
    cluster_meta: dict[str, object] | None = None
    cluster_cpus: dict[str, list[int]] = {}
    if where.cluster is not None:
        try:
            cluster_meta, cluster_cpus = _start_cluster(plan, outdir)
        except _Refused as r:
            print(r, file=sys.stderr)
            shutil.rmtree(outdir, ignore_errors=True)
            return r.rc
    print(f"backend: {plan.backend} ({plan.backend_reason})")
    influxd, url = _start_influx(plan.sinks)
    writer = InfluxWriter(url)
    meta = _run_meta(plan, run_id, url, cluster_meta)
    rc = 0
    try:
        too_big = functools.partial(_too_big, plan.parts, plan.backend, where)
        scale, scale_why = choose_scale("auto" if plan.scale is None else str(plan.scale), plan.backend, print, too_big)
        meta |= {"scale": scale, "scale_reason": scale_why}
        print(f"scale: {scale} ({scale_why})")
        if where.cluster is None:
            print(
                cores.run_line(
                    seats.checks(plan.parts, plan.backend, list(where.cpus), scale, where.pin), list(where.cpus)
                )
            )
        run = Run(
            outdir,
            scale,
            plan.duration,
            plan.backend,
            writer,
            run_id,
            plan.calibration,
            rtt_tol_ms=plan.rtt_tol_ms,
            rate_tol=plan.rate_tol,
            host_runtime=host_runtime,
            cpus=list(where.cpus),
            pin=where.pin,
            on_cores_fail=plan.cores,
            udt_buffers=plan.udt_buffers,
            repeat=plan.repeats.n,
            cluster=where.cluster,
            cluster_cpus=cluster_cpus,
            repeats=plan.repeats,
        )
        print(f"repeats: {plan.repeats.describe()}")
        _run_experiments(run, list(plan.experiments), list(plan.stacks), meta)
        meta["status"] = "ok"
    except KeyboardInterrupt:
        print(
            f"\nudtbed: interrupted; cleaned up namespaces{', containers' if plan.image else ''} and processes",
            file=sys.stderr,
        )
        meta["status"] = "interrupted"
        rc = 130
    except (CalibrationError, cores.CoresError) as e:
        print(f"udtbed: refused: {e}", file=sys.stderr)
        meta["status"] = f"refused: {e}"
        rc = 3
    finally:
        rc = _close_run(outdir, meta, writer, influxd, where.cluster, rc)
    if plan.sinks.simulate != "none" and rc == 0:
        rc = _simulated_figures(plan.sinks, outdir, meta)
    if meta["results"]:
        draw_report(outdir, plan.sinks.report)
    _link_latest(plan.sinks.results, run_id)
    return rc


def _selection(a: argparse.Namespace) -> tuple[list[Experiment], list[BulkStack], Repeats]:
    """The experiments and parts, the stacks (each said available or skipped) and the repeats the
    command line names."""
    if a.repeat < 1:
        raise _Refused(f"udtbed: --repeat must be 1 or more, not {a.repeat}")
    try:
        exps = select_parts(select_experiments(Path(a.experiments_dir), a.experiments), a.parts)
    except ExperimentError as e:
        raise _Refused(f"udtbed: {e}") from e
    stacks_all = all_stacks()
    stacks = []
    for s in [x.strip() for x in a.stacks.split(",") if x.strip()]:
        if s not in stacks_all:
            raise _Refused(f"udtbed: unknown stack {s!r} (have {', '.join(stacks_all)})")
        ok, why = stacks_all[s].available()
        print(f"stack {s}: {'yes' if ok else 'SKIPPED'} ({why})")
        if ok:
            stacks.append(stacks_all[s])
    if not stacks:
        raise _Refused("udtbed: no stack available", 1)
    try:
        repeats = Repeats.parse(a.repeat, a.repeat_only, stacks_all)
    except ValueError as e:
        raise _Refused(f"udtbed: {e}") from e
    return exps, stacks, repeats


def _cpus_and_scale(a: argparse.Namespace) -> tuple[list[int], float | None]:
    """The run's CPUs (``--cpuset``) and the scale asked for (None: ``auto``)."""
    try:
        return cores.run_cpus(a.cpuset), None if a.scale == "auto" else float(a.scale)
    except (cores.CoresError, ValueError) as e:
        raise _Refused(f"udtbed: {e}") from e


def _placement(
    a: argparse.Namespace, cpus: list[int], scale_asked: float | None, parts: list[tuple[Experiment, Part]]
) -> Placement:
    """This machine's CPUs, or (``--servers``) the servers each part's topology is placed on and
    the underlays that join them, checked as far as the servers file says."""
    here = Placement(tuple(cpus), a.cpuset, a.pin)
    if not a.servers:
        return here
    try:
        cluster = Cluster.load(a.servers)
    except ClusterError as e:
        raise _Refused(f"udtbed: {e}") from e
    if a.runtime == "docker" or scale_asked is None:
        raise _Refused(
            "udtbed: a cluster run (--servers) runs the stacks as processes (--runtime netns) at a given "
            "scale (not --scale auto)"
        )
    nodes: dict[str, dict[str, str]] = {}
    underlays: list[tuple[str, str, str, str]] = []
    try:
        for _, p in parts:
            topo = load(p.topology)
            nodes[topo.name] = cluster.place(topo)
            underlays += [u for u in cluster.underlays(topo, nodes[topo.name]) if u not in underlays]
    except ClusterError as e:
        raise _Refused(f"udtbed: refused before anything was built: {e}") from e
    return Placement(here.cpus, a.cpuset, a.pin, cluster, nodes, tuple(underlays))


def _too_big(parts: list[tuple[Experiment, Part]], backend: str, where: Placement, s: float) -> list[str]:
    """The parts that do not fit the run's CPUs at scale ``s``, each with its shortfall."""
    cpus = list(where.cpus)
    return [f"{part}: {c.shortfall()}" for part, c in seats.shortfalls(parts, backend, cpus, s, where.pin).items()]


def _refuse_parts_too_big(
    parts: list[tuple[Experiment, Part]],
    backend: str,
    scale_asked: float | None,
    where: Placement,
    on_fail: str,
) -> None:
    """Refuses the run (exit 3) where a part needs more cores than it has at the scale asked for,
    unless ``--cores flag``. A cluster run checks each server's seats after its preflight."""
    if scale_asked is None or where.cluster is not None:
        return
    cpus = list(where.cpus)
    short = seats.shortfalls(parts, backend, cpus, scale_asked, where.pin)
    if not (short and on_fail == "refuse"):
        return
    need = max(c.plan.need for c in short.values())
    raise _Refused(
        f"udtbed: refused: at scale {scale_asked:g} a part needs more cores than the run has "
        f"({len(cpus)}: CPUs {cores.cpu_list(cpus)}):\n  "
        + "\n  ".join(f"{part}: {c.shortfall()}" for part, c in short.items())
        + "\n"
        + (
            "Pinning every seat apart needs that many CPUs: PIN=auto (--pin auto) pins from scale "
            f"{cores.CHECKED_FROM:g} only, "
            if where.pin == "on"
            else f"Run at a scale below {cores.CHECKED_FROM:g} (SCALE=0.1 is what 2 shared cores emulate "
            "faithfully), SCALE=auto (the largest scale that fits and calibrates), "
        )
        + f"on a machine with {need} or more cores, or pass CORES=flag (--cores flag) to run anyway "
        "with those parts flagged.",
        3,
    )


def _stacks_image(a: argparse.Namespace) -> runtime.StacksImage | None:
    """The stacks' image under ``--runtime docker`` (checked usable), None for processes."""
    if a.runtime != "docker":
        return None
    try:
        return runtime.StacksImage.resolve(a.image)
    except runtime.DockerError as e:
        raise _Refused(f"udtbed: docker runtime: {e}") from e


def _start_cluster(plan: RunPlan, outdir: Path) -> tuple[dict[str, object], dict[str, list[int]]]:
    """:func:`_cluster_preflight`, the cluster closed where it refuses (exit 2, or 3 for cores)."""
    cluster = plan.placement.cluster
    assert cluster is not None
    try:
        return _cluster_preflight(plan, cluster, outdir)
    except ClusterError as e:
        cluster.close()
        raise _Refused(f"udtbed: refused before anything was built: {e}") from e
    except cores.CoresError as e:
        cluster.close()
        raise _Refused(f"udtbed: refused: {e}", 3) from e


def _start_influx(sinks: Sinks) -> tuple[LocalInfluxd | None, str | None]:
    """The InfluxDB the series go to (``--influx``): a local influxd started here, a URL, or none."""
    influxd = None
    url = None
    if sinks.influx == "local":
        try:
            influxd = LocalInfluxd(sinks.results / "influxdb").start()
            url = influxd.url
            print(f"influxdb: local influxd at {url}, data in {influxd.datadir}")
        except Exception as e:  # noqa: BLE001 - never fail the run on InfluxDB
            print(f"influxdb: local influxd unavailable ({e}); series only in the JSON results")
    elif sinks.influx not in ("none", ""):
        url = sinks.influx.rstrip("/")
        print(f"influxdb: {url}")
    return influxd, url


def _run_meta(plan: RunPlan, run_id: str, url: str | None, cluster_meta: dict[str, object] | None) -> dict[str, Any]:
    """The run's metadata (run.json) as it starts; the scale, the status and the results follow."""
    where, image = plan.placement, plan.image
    return {
        "run_id": run_id,
        "commit": checkout_commit(),
        "backend": plan.backend,
        "backend_reason": plan.backend_reason,
        "experiments": [e.name for e in plan.experiments],
        "stacks": [s.name for s in plan.stacks],
        "duration_s": plan.duration,
        "seed": "per link in the topology files (udt-linkem seed=...); a repeat continues each link's stream"
        + (
            "; repeats after the first start their flows up to 0.5 s late, seeded by run, part, stack and repeat"
            if plan.repeats.n > 1
            else ""
        ),
        "repeat": plan.repeats.n,
        "repeat_only": sorted(plan.repeats.only),
        "repeats": plan.repeats.describe(),
        "influx": url or None,
        "host_runtime": "docker" if image else runtime.NamespaceRuntime.name,
        "host_image": {"name": image.name, "id": image.id} if image else None,
        "host_cpuset": where.cpuset if image else None,
        "host_cpus": cores.cpu_list(list(where.cpus)),
        "host": hostinfo.describe(list(where.cpus)),
        "pin": where.pin,
        "udt_buffers": plan.udt_buffers,
        "cluster": cluster_meta,
        "started": time.time(),
        "status": "running",
        "results": {},
    }


def _run_experiments(run: Run, exps: list[Experiment], stacks: list[BulkStack], meta: dict[str, Any]) -> None:
    """Each experiment in turn under one progress view, its result written as it ends."""
    # A calibration, then each run of the part (each stack under test it takes, or once), repeated.
    steps = plan_steps(exps, stacks, run.duration, run.repeats)
    total = sum(x.seconds for x in steps)
    title = f"udtbed run {run.run_id}: {', '.join(e.name for e in exps)}"
    with Progress(title, total, steps=len(steps), seconds_per_unit=1.0) as progress:
        run.progress = progress
        for exp in exps:
            res = run_experiment(run, exp, stacks)
            res.run = {k: meta[k] for k in RESULT_META}
            path = res.write(run.outdir / f"{exp.name}.json")
            meta["results"][exp.name] = path.name
            progress.log(f"   wrote {path}")


def _close_run(
    outdir: Path,
    meta: dict[str, Any],
    writer: InfluxWriter,
    influxd: LocalInfluxd | None,
    cluster: Cluster | None,
    rc: int,
) -> int:
    """However the experiments ended: InfluxDB closed, run.json written, this run's namespaces,
    containers and processes removed, here and on every server; the exit status (1 where a
    server's sweep failed and nothing else did)."""
    writer.close()
    meta["influx_points"] = writer.written
    meta["influx_error"] = writer.failed
    if influxd:
        influxd.stop()
    (outdir / "run.json").write_text(json.dumps(meta, indent=1))
    runtime.cleanup_run(f"{network.PREFIX}{os.getpid()}-")
    if cluster is not None:
        try:
            cluster.sweep()  # every server, this run's namespaces and processes
        except ClusterError as e:
            print(f"udtbed: {e}", file=sys.stderr)
            rc = rc or 1
        cluster.close()
    return rc


def _simulated_figures(sinks: Sinks, outdir: Path, meta: dict[str, Any]) -> int:
    """The papers' NS-2 figures beside the emulated ones (docs/simulator.md) into ``outdir/sim``;
    after the experiments, so that the simulations never take the emulation's CPU. A failure is
    recorded in run.json, not an exit status; an interrupt is 130."""
    rc = 0
    print(f"\nsimulated figures ({sinks.simulate}, experiments/sim) -> {outdir / 'sim'}")
    try:
        scenarios = sim.load_all(sinks.scenarios_dir or sim.SCENARIOS_DIR)
        missed = run_simulations(list(scenarios), scenarios, outdir / "sim", sinks.simulate == "quick", None)
        meta["sim_claims_not_reproduced"] = missed
        quick_ns2_checks(outdir / "sim")
    except (sim.ScenarioError, FileNotFoundError, RuntimeError) as err:
        print(f"udtbed: the simulated figures failed: {err}", file=sys.stderr)
        meta["sim_error"] = str(err)
    except KeyboardInterrupt:
        print("\nudtbed: interrupted during the simulated figures", file=sys.stderr)
        rc = 130
    (outdir / "run.json").write_text(json.dumps(meta, indent=1))
    return rc


def _link_latest(results: Path, run_id: str) -> None:
    """``results/latest`` names this run (where the file system allows a symlink)."""
    latest = results / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_id)
    except OSError:
        pass


def _cluster_preflight(plan: RunPlan, cluster: Cluster, outdir: Path) -> tuple[dict[str, object], dict[str, list[int]]]:
    """Every server checked (udtbed.emulation.cluster.preflight) over every underlay the plan's
    placement uses, and each part's seats against its servers' CPUs; the run's metadata on the
    cluster."""
    where, scale = plan.placement, plan.scale
    assert scale is not None, "plan_run refuses a cluster run at --scale auto"
    print(f"cluster: {len(cluster.servers)} servers ({cluster.path}); preflight:")
    report = preflight(cluster, outdir, list(where.underlays), log=print)
    cpus = {name: server_cpus(s) for name, s in cluster.servers.items()}
    for e, p in plan.parts:
        topo = load(p.topology)
        c = core_check(seats.plan(p, topo, plan.backend), where.nodes[topo.name], cpus, list(where.cpus), scale, "off")
        line = ", ".join(f"{s} {n} of {c.have_by_server[s]}" for s, n in c.need_by_server.items())
        print(f"  cores, {e.name} / {p.label}: {line}{'' if c.ok else ' (TOO FEW)'}")
        if not c.ok and plan.cores == "refuse":
            raise cores.CoresError(
                f"{e.name} / {p.label} does not fit its servers {c.shortfall()}: place it on larger servers, "
                "lower --scale, or pass --cores flag"
            )
    nodes = {topo: dict(n) for topo, n in where.nodes.items()}
    return {"servers_file": str(cluster.path), "servers": report, "placement": nodes}, cpus


def add_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--experiments",
        default="default",
        help="comma-separated experiment names, 'default' (those with default = true) or 'all'",
    )
    r.add_argument(
        "--experiments-dir", default=str(EXPERIMENTS_DIR), help="where the experiment files are (default experiments/)"
    )
    r.add_argument("--parts", help="comma-separated part labels: only those parts of the experiments (default: all)")
    r.add_argument("--scale", default="0.1", help="rate multiplier, or 'auto' (default 0.1)")
    r.add_argument("--duration", type=float, default=20.0, help="seconds per stack and part (default 20)")
    r.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each part's stacks this many times, interleaved (A B A B ...); the report judges every "
        "band on the 95 %% interval over the repeats (default 1)",
    )
    r.add_argument(
        "--repeat-only",
        metavar="WHAT",
        help="repeat only these runs, the others once: comma-separated stack names, and/or 'reference' (in a "
        "part with a band against the reference stack, the runs that band compares: udt-rs and libudt on the "
        "SC'04 paths); default: every run",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (each part's runs and how many times each, the planned time) and exit",
    )
    r.add_argument("--stacks", default="udt-rs,libudt,sabul,frtp,tcp-cubic,tcp-bbr,tcp-reno", help="names from stacks/")
    r.add_argument("--backend", default="auto", choices=["auto", "linkem", "netem"])
    r.add_argument(
        "--servers", help="a servers file (docs/cluster.md): run across those machines over SSH (default: this one)"
    )
    r.add_argument("--influx", default="local", help="'local' (influxd under the results dir), 'none', or a URL")
    r.add_argument("--calibration", default="refuse", choices=["refuse", "flag"])
    r.add_argument("--rtt-tol-ms", type=float, default=1.0)
    r.add_argument("--rate-tol-pct", type=float, default=2.0)
    r.add_argument("--results", default=str(REPO / "results/testbed"))
    r.add_argument(
        "--runtime",
        default="netns",
        choices=["netns", "docker"],
        help="where the stacks run on the hosts: processes in the hosts' namespaces (default), "
        "or a container each on the host's namespace (make testbed-image)",
    )
    r.add_argument(
        "--image", default=runtime.IMAGE, help=f"the stacks' image for --runtime docker (default {runtime.IMAGE})"
    )
    r.add_argument(
        "--cpuset",
        help="the CPUs the run may use (e.g. 2-15; default: all this process may): every process runs on "
        "them, each on its own where pinned (docker --cpuset-cpus under --runtime docker)",
    )
    r.add_argument(
        "--pin",
        default="auto",
        choices=["auto", "on", "off"],
        help=f"give the emulator's busy directions, each sender and each receiver CPUs of their own "
        f"(auto: from scale {cores.CHECKED_FROM:g}, where the part fits)",
    )
    r.add_argument(
        "--cores",
        default="refuse",
        choices=["refuse", "flag"],
        help=f"a part that needs more cores than the run has at scale >= {cores.CHECKED_FROM:g}: refuse the run "
        "(default), or run it flagged",
    )
    r.add_argument(
        "--simulate",
        default="full",
        choices=["full", "quick", "none"],
        help="after the experiments, the papers' NS-2 figures in the simulator (experiments/sim) into <run>/sim",
    )
    r.add_argument("--scenarios-dir", default=str(sim.SCENARIOS_DIR), help="the simulated figures' scenario files")
    r.add_argument(
        "--udt-buffers",
        default="path",
        choices=list(UDT_BUFFERS),
        help="the UDT flows' flow window and buffers: 'path' (the default) sizes them to what the path holds in "
        "flight, never below 4.11's 8192 packets; 'default' gives 4.11's 8192",
    )
    r.add_argument(
        "--report",
        default="auto",
        choices=["auto", "on", "none"],
        help="draw the HTML report at the end (auto: where matplotlib is importable; else `udtbed report DIR` "
        "draws it from the results elsewhere)",
    )


RUN = Command("run", "run experiments and write results + report", add_arguments, cmd_run)
