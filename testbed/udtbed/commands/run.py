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
from ..experiments.run import UDT_BUFFERS, Repeats, Run
from ..experiments.runner import CalibrationError, Step, part_runs, plan, run_experiment
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
    """The run, checked (a refusal: its exit status), then carried out: the run directory, the
    experiments, their cleanup however they end, the simulated figures, the report; 130 on Ctrl-C."""
    try:
        exps, stacks, repeats = _selection(a)
        if a.dry_run:
            print_plan(plan(exps, stacks, a.duration, repeats), repeats)
            return 0
        cpus, scale_asked = _cpus_and_scale(a)
        parts = [(e, p) for e in exps for p in e.parts if part_runs(p, stacks)]
        cluster = _cluster(a, scale_asked)
        if cluster is not None and a.backend == "auto":
            backend, backend_why = "linkem", "a cluster run: udt-linkem on the delay nodes (--backend netem for theirs)"
        else:
            backend, backend_why = choose_backend(a.backend)
        _refuse_parts_too_big(a, parts, backend, cpus, scale_asked, cluster)
        if a.cpuset:
            os.sched_setaffinity(0, cpus)  # every process of the run inherits it, unless pinned to its seat
        host_runtime, image = _host_runtime(a)
    except _Refused as r:
        print(r, file=sys.stderr)
        return r.rc
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    stale_cleanup()
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = Path(a.results) / run_id
    outdir.mkdir(parents=True, exist_ok=True)
    cluster_meta: dict[str, object] | None = None
    cluster_cpus: dict[str, list[int]] = {}
    if cluster is not None:
        assert scale_asked is not None
        try:
            cluster_meta, cluster_cpus = _start_cluster(cluster, parts, outdir, backend, scale_asked, a)
        except _Refused as r:
            print(r, file=sys.stderr)
            shutil.rmtree(outdir, ignore_errors=True)
            return r.rc
    print(f"backend: {backend} ({backend_why})")
    influxd, url = _start_influx(a)
    writer = InfluxWriter(url)
    meta = _run_meta(a, run_id, backend, backend_why, exps, stacks, repeats, url, image, cpus, cluster_meta)
    rc = 0
    try:
        scale, scale_why = choose_scale(a.scale, backend, print, functools.partial(_too_big, a, parts, backend, cpus))
        meta |= {"scale": scale, "scale_reason": scale_why}
        print(f"scale: {scale} ({scale_why})")
        if cluster is None:
            print(cores.run_line(seats.checks(parts, backend, cpus, scale, a.pin), cpus))
        run = Run(
            outdir,
            scale,
            a.duration,
            backend,
            writer,
            run_id,
            a.calibration,
            rtt_tol_ms=a.rtt_tol_ms,
            rate_tol=a.rate_tol_pct / 100,
            host_runtime=host_runtime,
            cpus=cpus,
            pin=a.pin,
            on_cores_fail=a.cores,
            udt_buffers=a.udt_buffers,
            repeat=a.repeat,
            cluster=cluster,
            cluster_cpus=cluster_cpus,
            repeats=repeats,
        )
        print(f"repeats: {repeats.describe()}")
        _run_experiments(run, exps, stacks, meta)
        meta["status"] = "ok"
    except KeyboardInterrupt:
        print(
            f"\nudtbed: interrupted; cleaned up namespaces{', containers' if image else ''} and processes",
            file=sys.stderr,
        )
        meta["status"] = "interrupted"
        rc = 130
    except (CalibrationError, cores.CoresError) as e:
        print(f"udtbed: refused: {e}", file=sys.stderr)
        meta["status"] = f"refused: {e}"
        rc = 3
    finally:
        rc = _close_run(outdir, meta, writer, influxd, cluster, rc)
    if a.simulate != "none" and rc == 0:
        rc = _simulated_figures(a, outdir, meta)
    if meta["results"]:
        draw_report(outdir, a.report)
    _link_latest(Path(a.results), run_id)
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


def _cluster(a: argparse.Namespace, scale_asked: float | None) -> Cluster | None:
    """The servers of ``--servers`` (None: a run on this machine), which run the stacks as
    processes at a given scale."""
    if not a.servers:
        return None
    try:
        cluster = Cluster.load(a.servers)
    except ClusterError as e:
        raise _Refused(f"udtbed: {e}") from e
    if a.runtime == "docker" or scale_asked is None:
        raise _Refused(
            "udtbed: a cluster run (--servers) runs the stacks as processes (--runtime netns) at a given "
            "scale (not --scale auto)"
        )
    return cluster


def _too_big(
    a: argparse.Namespace, parts: list[tuple[Experiment, Part]], backend: str, cpus: list[int], s: float
) -> list[str]:
    """The parts that do not fit the run's CPUs at scale ``s``, each with its shortfall."""
    return [f"{part}: {c.shortfall()}" for part, c in seats.shortfalls(parts, backend, cpus, s, a.pin).items()]


def _refuse_parts_too_big(
    a: argparse.Namespace,
    parts: list[tuple[Experiment, Part]],
    backend: str,
    cpus: list[int],
    scale_asked: float | None,
    cluster: Cluster | None,
) -> None:
    """Refuses the run (exit 3) where a part needs more cores than it has at the scale asked for,
    unless ``--cores flag``. A cluster run checks each server's seats after its preflight."""
    short = seats.shortfalls(parts, backend, cpus, scale_asked, a.pin) if scale_asked is not None else {}
    if cluster is not None:
        short = {}  # each server's seats are checked against its CPUs after the preflight
    if not (short and a.cores == "refuse"):
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
            if a.pin == "on"
            else f"Run at a scale below {cores.CHECKED_FROM:g} (SCALE=0.1 is what 2 shared cores emulate "
            "faithfully), SCALE=auto (the largest scale that fits and calibrates), "
        )
        + f"on a machine with {need} or more cores, or pass CORES=flag (--cores flag) to run anyway "
        "with those parts flagged.",
        3,
    )


def _host_runtime(a: argparse.Namespace) -> tuple[Callable[[Network], runtime.HostRuntime], runtime.StacksImage | None]:
    """Where the stacks run on the hosts (``--runtime``), and the stacks' image under docker."""
    if a.runtime != "docker":
        return runtime.NamespaceRuntime, None
    try:
        image = runtime.StacksImage.resolve(a.image)
    except runtime.DockerError as e:
        raise _Refused(f"udtbed: docker runtime: {e}") from e
    print(f"host runtime: docker, image {image.name} ({image.id}){f', cpuset {a.cpuset}' if a.cpuset else ''}")
    return functools.partial(runtime.DockerRuntime, image=image, cpuset=a.cpuset), image


def _start_cluster(
    cluster: Cluster,
    parts: list[tuple[Experiment, Part]],
    outdir: Path,
    backend: str,
    scale: float,
    a: argparse.Namespace,
) -> tuple[dict[str, object], dict[str, list[int]]]:
    """:func:`_cluster_preflight`, the cluster closed where it refuses (exit 2, or 3 for cores)."""
    try:
        return _cluster_preflight(cluster, parts, outdir, backend, scale, a)
    except ClusterError as e:
        cluster.close()
        raise _Refused(f"udtbed: refused before anything was built: {e}") from e
    except cores.CoresError as e:
        cluster.close()
        raise _Refused(f"udtbed: refused: {e}", 3) from e


def _start_influx(a: argparse.Namespace) -> tuple[LocalInfluxd | None, str | None]:
    """The InfluxDB the series go to (``--influx``): a local influxd started here, a URL, or none."""
    influxd = None
    url = None
    if a.influx == "local":
        try:
            influxd = LocalInfluxd(Path(a.results) / "influxdb").start()
            url = influxd.url
            print(f"influxdb: local influxd at {url}, data in {influxd.datadir}")
        except Exception as e:  # noqa: BLE001 - never fail the run on InfluxDB
            print(f"influxdb: local influxd unavailable ({e}); series only in the JSON results")
    elif a.influx not in ("none", ""):
        url = a.influx.rstrip("/")
        print(f"influxdb: {url}")
    return influxd, url


def _run_meta(
    a: argparse.Namespace,
    run_id: str,
    backend: str,
    backend_why: str,
    exps: list[Experiment],
    stacks: list[BulkStack],
    repeats: Repeats,
    url: str | None,
    image: runtime.StacksImage | None,
    cpus: list[int],
    cluster_meta: dict[str, object] | None,
) -> dict[str, Any]:
    """The run's metadata (run.json) as it starts; the scale, the status and the results follow."""
    return {
        "run_id": run_id,
        "commit": checkout_commit(),
        "backend": backend,
        "backend_reason": backend_why,
        "experiments": [e.name for e in exps],
        "stacks": [s.name for s in stacks],
        "duration_s": a.duration,
        "seed": "per link in the topology files (udt-linkem seed=...); a repeat continues each link's stream"
        + (
            "; repeats after the first start their flows up to 0.5 s late, seeded by run, part, stack and repeat"
            if a.repeat > 1
            else ""
        ),
        "repeat": a.repeat,
        "repeat_only": sorted(repeats.only),
        "repeats": repeats.describe(),
        "influx": url or None,
        "host_runtime": "docker" if image else runtime.NamespaceRuntime.name,
        "host_image": {"name": image.name, "id": image.id} if image else None,
        "host_cpuset": a.cpuset if image else None,
        "host_cpus": cores.cpu_list(cpus),
        "host": hostinfo.describe(cpus),
        "pin": a.pin,
        "udt_buffers": a.udt_buffers,
        "cluster": cluster_meta,
        "started": time.time(),
        "status": "running",
        "results": {},
    }


def _run_experiments(run: Run, exps: list[Experiment], stacks: list[BulkStack], meta: dict[str, Any]) -> None:
    """Each experiment in turn under one progress view, its result written as it ends."""
    # A calibration, then each run of the part (each stack under test it takes, or once), repeated.
    steps = plan(exps, stacks, run.duration, run.repeats)
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


def _simulated_figures(a: argparse.Namespace, outdir: Path, meta: dict[str, Any]) -> int:
    """The papers' NS-2 figures beside the emulated ones (docs/simulator.md) into ``outdir/sim``;
    after the experiments, so that the simulations never take the emulation's CPU. A failure is
    recorded in run.json, not an exit status; an interrupt is 130."""
    rc = 0
    print(f"\nsimulated figures ({a.simulate}, experiments/sim) -> {outdir / 'sim'}")
    try:
        scenarios = sim.load_all(Path(a.scenarios_dir))
        missed = run_simulations(list(scenarios), scenarios, outdir / "sim", a.simulate == "quick", None)
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


def print_plan(steps: list[Step], repeats: Repeats) -> None:
    """A run's plan as ``--dry-run`` prints it: per part, its runs and how many times each."""
    print(f"repeats: {repeats.describe()}")
    parts: dict[tuple[str, str], dict[str, int]] = {}
    for x in steps:
        runs = parts.setdefault((x.experiment, x.part), {})
        if x.lineup is not None:
            runs[x.lineup] = runs.get(x.lineup, 0) + 1
    for (exp, part), runs in parts.items():
        each = ", ".join(f"{name} x{n}" for name, n in runs.items())
        print(f"  {exp} / {part}: build, calibrate; {each}")
    seconds = sum(x.seconds for x in steps)
    print(
        f"plan: {len(parts)} parts, {len(steps)} steps, {seconds / 60:.1f} min planned "
        "(the progress's estimate; the simulated figures come after)"
    )


def _cluster_preflight(
    cluster: Cluster,
    parts: list[tuple[Experiment, Part]],
    outdir: Path,
    backend: str,
    scale: float,
    a: argparse.Namespace,
) -> tuple[dict[str, object], dict[str, list[int]]]:
    """Every server checked (udtbed.emulation.cluster.preflight) over every underlay the parts' placements
    use, and each part's seats against its servers' CPUs; the run's metadata on the cluster."""
    placement: dict[str, dict[str, str]] = {}
    segments: list[tuple[str, str, str, str]] = []
    for _, p in parts:
        topo = load(p.topology)
        placement[topo.name] = cluster.place(topo)
        for seg in cluster.underlays(topo, placement[topo.name]):
            if seg not in segments:
                segments.append(seg)
    print(f"cluster: {len(cluster.servers)} servers ({cluster.path}); preflight:")
    report = preflight(cluster, outdir, segments, log=print)
    cpus = {name: server_cpus(s) for name, s in cluster.servers.items()}
    head = cores.run_cpus(a.cpuset)
    for e, p in parts:
        topo = load(p.topology)
        c = core_check(seats.plan(p, topo, backend), placement[topo.name], cpus, head, scale, "off")
        line = ", ".join(f"{s} {n} of {c.have_by_server[s]}" for s, n in c.need_by_server.items())
        print(f"  cores, {e.name} / {p.label}: {line}{'' if c.ok else ' (TOO FEW)'}")
        if not c.ok and a.cores == "refuse":
            raise cores.CoresError(
                f"{e.name} / {p.label} does not fit its servers {c.shortfall()}: place it on larger servers, "
                "lower --scale, or pass --cores flag"
            )
    return {"servers_file": str(cluster.path), "servers": report, "placement": placement}, cpus


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
