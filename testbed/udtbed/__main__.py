"""``python -m udtbed``: run experiments, check topology files, calibrate, clean up.

udtbed run [--experiments efficiency,fairness,join,friendliness] [--scale 0.1|auto]
           [--duration 20] [--stacks udt-rs,libudt,sabul,frtp,tcp-cubic,tcp-bbr,tcp-reno] [--backend auto]
           [--influx local|none|URL] [--calibration refuse|flag] [--results results/testbed]
           [--runtime netns|docker] [--image udtbed-stacks] [--cpuset CPUS] [--pin auto|on|off]
           [--cores refuse|flag] [--simulate full|quick|none] [--servers servers.toml]
udtbed preflight --servers servers.toml [--experiments ...]   check the servers a cluster run would use
udtbed lab up|down DIR [--names sender,delay,receiver] [--mtu 1500]   servers on this machine (sshd in namespaces)
udtbed cores [--experiments ...] [--scale 1] [--cpuset CPUS] [--servers FILE]   the cores each part needs,
             and whether it fits (on each server of FILE)
udtbed check topologies/*.toml     validate topology files (file:line: error)
udtbed calibrate TOPO SRC DST [--scale S]
udtbed cleanup [--prefix udtb-PID-] [--all] [--servers FILE]   remove the udtb-* namespaces and containers
               of runs that are gone (here, and on the servers of FILE)
udtbed simulate [--only sc04-fig2,...] [--quick] [--results results/sim]   the papers' NS-2 figures, simulated
udtbed compare-backends [--scale 0.02] [--seconds 20] [--out FILE]   netem beside udt-linkem on each path class
udtbed vm [--accel auto|kvm|tcg|uml] [--rw DIR] [--record FILE] -- CMD...   CMD in a kernel with netem (QEMU, UML)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import functools
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from udtharness import netns
from udtharness.progress import Progress

from . import cores, hostinfo, lab, network, runtime, sim
from .calibrate import calibrate
from .cluster import Cluster, ClusterError, core_check, preflight, server_cpus
from .experiment import EXPERIMENTS_DIR, TOPOLOGIES_DIR, Experiment, ExperimentError, Part, load_all
from .experiment import load as load_experiment
from .influx import InfluxWriter, LocalInfluxd
from .network import Network, choose_backend
from .run import UDT_BUFFERS, Repeats, Run
from .runner import CalibrationError, Step, part_runs, plan, run_experiment
from .stacks import all_stacks
from .topology import TopologyError, load

REPO = network.REPO
AUTO_SCALES = [1.0, 0.5, 0.2, 0.1, 0.05]
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


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def _commit() -> str:
    """The checkout's commit (``-dirty`` with changes to the code a run uses); where there is no
    git or no repository (a copied working tree on a borrowed host), ``UDTBED_COMMIT``, which the
    full-scale bundle records where it was built, else ``unknown``."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return os.environ.get("UDTBED_COMMIT", "unknown")
    p = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "testbed", "topologies", "impl"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return p.stdout.strip() + ("-dirty" if dirty else "")


def stale_cleanup(log: Callable[[str], None] = print) -> None:
    """Remove containers and namespaces left by runs whose process is gone (udtb-<pid>-...)."""
    boxes, namespaces = runtime.cleanup_run(live=False)
    for name in boxes + namespaces:
        log(f"removed stale {'container' if name in boxes else 'namespace'} {name}")


def choose_scale(
    requested: str,
    backend: str,
    log: Callable[[str], None],
    too_big: Callable[[float], list[str]] = lambda s: [],
) -> tuple[float, str]:
    """A fixed SCALE, or the largest of AUTO_SCALES whose parts fit the run's cores (``too_big``:
    the parts that do not, udtbed.cores) and whose calibration on chicago-amsterdam passes."""
    if requested != "auto":
        return float(requested), "requested"
    topo = load(TOPOLOGIES_DIR / "chicago-amsterdam.toml")
    rejected: list[str] = []
    for s in AUTO_SCALES:
        if short := too_big(s):
            rejected.append(
                f"scale {s}: {short[0]}" + (f" (and {len(short) - 1} more parts)" if len(short) > 1 else "")
            )
            continue
        log(f"scale auto: calibrating chicago-amsterdam at scale {s}")
        with Network(topo, scale=s, backend=backend, workdir=Path("/tmp") / f"udtb-autoscale-{os.getpid()}") as net:
            c = calibrate(net, [("chicago", "amsterdam")], log=log)[0]
        if c.ok:
            why = f"largest scale whose calibration passed ({c.line()})"
            if rejected:
                why += "; rejected: " + "; ".join(rejected)
            return s, why
        rejected.append(f"scale {s}: {c.line()}")
    raise CalibrationError("no scale calibrates: " + "; ".join(rejected))


def select_experiments(directory: Path, wanted: str) -> list[Experiment]:
    """The experiments named in ``wanted`` (comma-separated; '' = the default set, 'all')."""
    known = load_all(directory)
    if wanted in ("", "default"):
        return [e for e in known.values() if e.default]
    if wanted == "all":
        return list(known.values())
    out = []
    for n in (x.strip() for x in wanted.split(",") if x.strip()):
        if n not in known:
            raise ExperimentError(f"unknown experiment {n!r} (have {', '.join(known)} in {directory})")
        out.append(known[n])
    return out


def select_parts(exps: list[Experiment], wanted: str | None) -> list[Experiment]:
    """``exps`` with only the parts whose labels ``wanted`` names (comma-separated; None: all);
    an experiment left with none is dropped. A label that no experiment has is an error."""
    if not wanted:
        return exps
    labels = {x.strip() for x in wanted.split(",") if x.strip()}
    have = {p.label for e in exps for p in e.parts}
    if unknown := sorted(labels - have):
        raise ExperimentError(
            f"unknown part {', '.join(map(repr, unknown))} (the experiments chosen have {', '.join(sorted(have))})"
        )
    picked = [dataclasses.replace(e, parts=tuple(p for p in e.parts if p.label in labels)) for e in exps]
    return [e for e in picked if e.parts]


def cmd_run(a: argparse.Namespace) -> int:
    if a.repeat < 1:
        print(f"udtbed: --repeat must be 1 or more, not {a.repeat}", file=sys.stderr)
        return 2
    try:
        exps = select_parts(select_experiments(Path(a.experiments_dir), a.experiments), a.parts)
    except ExperimentError as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    names = [e.name for e in exps]
    stacks_all = all_stacks()
    stacks = []
    for s in [x.strip() for x in a.stacks.split(",") if x.strip()]:
        if s not in stacks_all:
            print(f"udtbed: unknown stack {s!r} (have {', '.join(stacks_all)})", file=sys.stderr)
            return 2
        ok, why = stacks_all[s].available()
        print(f"stack {s}: {'yes' if ok else 'SKIPPED'} ({why})")
        if ok:
            stacks.append(stacks_all[s])
    if not stacks:
        print("udtbed: no stack available", file=sys.stderr)
        return 1
    try:
        repeats = Repeats.parse(a.repeat, a.repeat_only, stacks_all)
    except ValueError as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        print_plan(plan(exps, stacks, a.duration, repeats), repeats)
        return 0
    try:
        cpus = cores.run_cpus(a.cpuset)
        scale_asked = None if a.scale == "auto" else float(a.scale)
    except (cores.CoresError, ValueError) as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    parts = [(e, p) for e in exps for p in e.parts if part_runs(p, stacks)]
    cluster: Cluster | None = None
    if a.servers:
        try:
            cluster = Cluster.load(a.servers)
        except ClusterError as e:
            print(f"udtbed: {e}", file=sys.stderr)
            return 2
        if a.runtime == "docker" or scale_asked is None:
            print(
                "udtbed: a cluster run (--servers) runs the stacks as processes (--runtime netns) at a given "
                "scale (not --scale auto)",
                file=sys.stderr,
            )
            return 2
    if cluster is not None and a.backend == "auto":
        backend, backend_why = "linkem", "a cluster run: udt-linkem on the delay nodes (--backend netem for theirs)"
    else:
        backend, backend_why = choose_backend(a.backend)

    def too_big(s: float) -> list[str]:
        return [f"{part}: {c.shortfall()}" for part, c in cores.shortfalls(parts, backend, cpus, s, a.pin).items()]

    short = cores.shortfalls(parts, backend, cpus, scale_asked, a.pin) if scale_asked is not None else {}
    if cluster is not None:
        short = {}  # each server's seats are checked against its CPUs after the preflight
    if short and a.cores == "refuse":
        need = max(c.plan.need for c in short.values())
        print(
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
            file=sys.stderr,
        )
        return 3
    if a.cpuset:
        os.sched_setaffinity(0, cpus)  # every process of the run inherits it, unless pinned to its seat
    host_runtime: Callable[[Network], runtime.HostRuntime] = runtime.NamespaceRuntime
    image: runtime.StacksImage | None = None
    if a.runtime == "docker":
        try:
            image = runtime.StacksImage.resolve(a.image)
        except runtime.DockerError as e:
            print(f"udtbed: docker runtime: {e}", file=sys.stderr)
            return 2
        host_runtime = functools.partial(runtime.DockerRuntime, image=image, cpuset=a.cpuset)
        print(f"host runtime: docker, image {image.name} ({image.id}){f', cpuset {a.cpuset}' if a.cpuset else ''}")
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    stale_cleanup()
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = Path(a.results) / run_id
    outdir.mkdir(parents=True, exist_ok=True)
    cluster_meta: dict[str, object] | None = None
    cluster_cpus: dict[str, list[int]] = {}
    if cluster is not None:
        assert scale_asked is not None
        try:
            cluster_meta, cluster_cpus = _cluster_preflight(cluster, parts, outdir, backend, scale_asked, a)
        except ClusterError as e:
            cluster.close()
            print(f"udtbed: refused before anything was built: {e}", file=sys.stderr)
            shutil.rmtree(outdir, ignore_errors=True)
            return 2
        except cores.CoresError as e:
            cluster.close()
            print(f"udtbed: refused: {e}", file=sys.stderr)
            shutil.rmtree(outdir, ignore_errors=True)
            return 3
    print(f"backend: {backend} ({backend_why})")
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
    writer = InfluxWriter(url)
    meta = {
        "run_id": run_id,
        "commit": _commit(),
        "backend": backend,
        "backend_reason": backend_why,
        "experiments": names,
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
    rc = 0
    try:
        scale, scale_why = choose_scale(a.scale, backend, print, too_big)
        meta |= {"scale": scale, "scale_reason": scale_why}
        print(f"scale: {scale} ({scale_why})")
        if cluster is None:
            print(cores.run_line(cores.checks(parts, backend, cpus, scale, a.pin), cpus))
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
        # A calibration, then each run of the part (each stack under test it takes, or once), repeated.
        steps = plan(exps, stacks, a.duration, repeats)
        total = sum(x.seconds for x in steps)
        title = f"udtbed run {run_id}: {', '.join(names)}"
        with Progress(title, total, steps=len(steps), seconds_per_unit=1.0) as progress:
            run.progress = progress
            for exp in exps:
                res = run_experiment(run, exp, stacks)
                res.run = {k: meta[k] for k in RESULT_META}
                path = res.write(outdir / f"{exp.name}.json")
                meta["results"][exp.name] = path.name
                progress.log(f"   wrote {path}")
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
    if a.simulate != "none" and rc == 0:
        # The papers' NS-2 figures beside the emulated ones (docs/simulator.md); after the
        # experiments, so that the simulations never take the emulation's CPU.
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
    if meta["results"]:
        _report(outdir, a.report)
    latest = Path(a.results) / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_id)
    except OSError:
        pass
    return rc


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
    """Every server checked (udtbed.cluster.preflight) over every underlay the parts' placements
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
        c = core_check(cores.plan(p, topo, backend), p, placement[topo.name], cpus, head, scale, "off")
        line = ", ".join(f"{s} {n} of {c.have_by_server[s]}" for s, n in c.need_by_server.items())
        print(f"  cores, {e.name} / {p.label}: {line}{'' if c.ok else ' (TOO FEW)'}")
        if not c.ok and a.cores == "refuse":
            raise cores.CoresError(
                f"{e.name} / {p.label} does not fit its servers {c.shortfall()}: place it on larger servers, "
                "lower --scale, or pass --cores flag"
            )
    return {"servers_file": str(cluster.path), "servers": report, "placement": placement}, cpus


def _report(outdir: Path, how: str) -> int:
    """Draws ``outdir``'s report (``how="auto"``: where matplotlib is importable; a host
    without it, the full-scale bundle's, says how to draw it elsewhere from the results)."""
    if how == "none":
        return 0
    if importlib.util.find_spec("matplotlib") is None:
        if how == "auto":
            print(
                f"\nreport: not drawn here (no matplotlib); draw it from the results: python -m udtbed report {outdir}"
            )
            return 0
        print("udtbed: the report needs matplotlib: run `make setup` (it installs .venv)", file=sys.stderr)
        return 2
    from .report import write_report

    print(f"\nreport: {write_report(outdir)}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    """(Re)draws the report of a run directory from its results (run.json, <experiment>.json)."""
    outdir = Path(a.run_dir).resolve()  # `latest` names the run it points to, as the run itself did
    if not (outdir / "run.json").is_file():
        print(
            f"udtbed: {outdir} is not a run directory (no run.json): name one under results/testbed/", file=sys.stderr
        )
        return 2
    return _report(outdir, "on")


def cmd_compare(a: argparse.Namespace) -> int:
    """Two runs side by side, or two stacks of one run (udtbed.compare): exit 1 when a row
    regressed beyond the threshold, more than the repeats' scatter explains."""
    from . import compare

    pair = tuple(x.strip() for x in a.stacks.split(",")) if a.stacks else None
    if pair is not None and len(pair) != 2:
        print(f"udtbed compare: --stacks wants two names, A,B (got {a.stacks!r})", file=sys.stderr)
        return 2
    run_a = Path(a.run_a).resolve()
    run_b = Path(a.run_b).resolve() if a.run_b else None
    try:
        rows = compare.compare(run_a, run_b, pair, a.alpha, a.threshold)
    except compare.CompareError as e:
        print(f"udtbed compare: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("udtbed compare: no band was judged on both sides: nothing to compare", file=sys.stderr)
        return 2
    print(compare.table(rows))
    title = f"{run_a.name} against {run_b.name}" if run_b else f"{pair[0]} against {pair[1]} in {run_a.name}"  # type: ignore[index]
    out = Path(a.html) if a.html else (run_b or run_a) / f"compare-{run_a.name}.html"
    out.write_text(compare.page(rows, title))
    print(f"\n{compare.counts(rows, a.threshold, a.alpha)}\npage: {out}")
    return 1 if any(r.outcome == "regressed" for r in rows) else 0


def cmd_gate(a: argparse.Namespace) -> int:
    """This checkout's udt-rs against a base commit's, in turns on this machine (udtbed.gate):
    exit 1 on a regression beyond the threshold that the runs' scatter does not explain."""
    from . import compare, gate

    run_args = ["--experiments", a.experiments, "--duration", str(a.duration), "--scale", a.scale]
    run_args += ["--parts", a.parts] if a.parts else []
    try:
        head = Path(a.head_bin).resolve() if a.head_bin else None
        rows = gate.gate(a.base, a.repeat, run_args, a.alpha, a.threshold, head_bin=head)
    except (gate.GateError, compare.CompareError) as e:
        print(f"udtbed gate: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nudtbed gate: interrupted (each run cleaned up its namespaces and processes)", file=sys.stderr)
        return 130
    print(compare.table(rows))
    page = gate.GATE_DIR / "gate.html"
    page.write_text(compare.page(rows, f"gate: this checkout against {a.base}"))
    print(
        f"\ngate against {a.base}, {a.repeat} runs a build: {compare.counts(rows, a.threshold, a.alpha)}\npage: {page}"
    )
    return 1 if any(r.outcome == "regressed" for r in rows) else 0


def cmd_check(a: argparse.Namespace) -> int:
    """Topology files and experiment files (told apart by an experiment's [[part]] tables)."""
    bad = 0
    for f in map(Path, a.files):
        try:
            if f.is_file() and "[[part]]" in f.read_text():
                e = load_experiment(f)
                bands = sum(len(p.bands) for p in e.parts)
                profiles = sum(1 for p in e.parts if p.profile)
                print(f"{f}: ok (experiment, {len(e.parts)} parts, {bands} bands, {profiles} quick profiles)")
            else:
                t = load(f)
                what = f"{len(t.hosts)} hosts, {len(t.switches)} switches, {len(t.links)} links"
                print(f"{f}: ok ({what}, nets {', '.join(t.nets)})")
        except (TopologyError, ExperimentError) as e:
            print(e, file=sys.stderr)
            bad += 1
    return 1 if bad else 0


def cmd_list(a: argparse.Namespace) -> int:
    try:
        exps = load_all(Path(a.experiments_dir))
    except ExperimentError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    print(f"experiments ({a.experiments_dir}; * = in the default run):")
    for e in exps.values():
        parts = ", ".join(p.label for p in e.parts)
        print(f"  {'*' if e.default else ' '} {e.name:14s} {e.figure}: {e.title} [{parts}]")
    print("stacks (stacks/*/meta.toml):")
    for name, s in all_stacks().items():
        ok, why = s.available()
        print(f"    {name:14s} {s.protocol}: {'available' if ok else 'NOT AVAILABLE'} ({why})")
    return 0


def cmd_cores(a: argparse.Namespace) -> int:
    """Each part's seats (udtbed.cores) at ``--scale``, and whether the run's CPUs hold them."""
    try:
        exps = select_experiments(Path(a.experiments_dir), a.experiments)
        cpus = cores.run_cpus(a.cpuset)
    except (ExperimentError, cores.CoresError) as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    checked = a.scale >= cores.CHECKED_FROM
    print(
        f"cores at scale {a.scale:g} ({a.backend}); this run would have {len(cpus)} (CPUs {cores.cpu_list(cpus)}); "
        + (
            "checked: a part that does not fit is refused"
            if checked
            else f"not checked below {cores.CHECKED_FROM:g}: a part's seats share the CPUs"
        )
    )
    if a.servers:
        return _cores_on_servers(a, exps, cpus)
    parts = cores.checks([(e, p) for e in exps for p in e.parts], a.backend, cpus, a.scale, "off")
    for name, c in parts.items():
        fits = "fits" if c.plan.need <= c.have else ("TOO FEW" if checked else "shared")
        print(f"  {name:44s} {c.plan.need:3d}  {fits:8s}  {c.plan.summary()}")
    worst = max((c.plan.need for c in parts.values()), default=0)
    print(f"the largest part needs {worst} cores")
    return 1 if checked and worst > len(cpus) else 0


def _cleanup_servers(a: argparse.Namespace) -> int:
    """``udtbed cleanup --servers FILE``: the same sweep on each server, over SSH."""
    every = a.all or a.prefix != network.PREFIX
    try:
        with Cluster.session(a.servers) as cluster:
            swept = cluster.sweep(a.prefix if every else network.PREFIX, only_gone=not every)
    except ClusterError as e:
        print(f"udtbed cleanup: {e}", file=sys.stderr)
        return 1
    for name, there in swept.items():
        print(f"server {name}: removed {len(there)} namespace(s){': ' + ', '.join(there) if there else ''}")
    return 0


def cmd_preflight(a: argparse.Namespace) -> int:
    """The checks a cluster run makes before it builds anything, on their own."""
    try:
        exps = select_experiments(Path(a.experiments_dir), a.experiments)
    except ExperimentError as e:
        print(f"udtbed: {e}", file=sys.stderr)
        return 2
    try:
        with Cluster.session(a.servers) as cluster:
            segments: list[tuple[str, str, str, str]] = []
            for p in (p for e in exps for p in e.parts):
                topo = load(p.topology)
                segments += [s for s in cluster.underlays(topo, cluster.place(topo)) if s not in segments]
            preflight(cluster, Path(a.results), segments, log=print)
    except ClusterError as e:
        print(f"udtbed: preflight: {e}", file=sys.stderr)
        return 1
    print("preflight: every server is ready")
    return 0


def cmd_lab(a: argparse.Namespace) -> int:
    """``udtbed lab up|down DIR``: the servers of :mod:`udtbed.lab` on this machine."""
    try:
        if a.action == "up":
            names = tuple(n.strip() for n in a.names.split(",") if n.strip())
            path = lab.Lab(Path(a.dir).resolve(), names, a.mtu).up()
            print(f"lab: {len(names)} servers up; servers file {path}; stop them with `udtbed lab down {a.dir}`")
        else:
            lab.Lab.load(Path(a.dir).resolve()).down()
            print("lab: down")
    except lab.LabError as e:
        print(f"udtbed lab: {e}", file=sys.stderr)
        return 1
    return 0


def _cores_on_servers(a: argparse.Namespace, exps: list[Experiment], head: list[int]) -> int:
    """``udtbed cores --servers FILE``: each part's seats on the servers its placement puts them
    on, against each server's CPUs (asked over SSH); exit 1 where a part does not fit."""
    try:
        with Cluster.session(a.servers) as cluster:
            cpus = {name: server_cpus(s) for name, s in cluster.servers.items()}
    except ClusterError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    print("servers: " + ", ".join(f"{n} {len(c)} CPUs" for n, c in cpus.items()))
    short = False
    for e in exps:
        for p in e.parts:
            topo = load(p.topology)
            c = core_check(cores.plan(p, topo, a.backend), p, cluster.place(topo), cpus, head, a.scale, "off")
            fits = "fits" if c.ok else ("TOO FEW" if c.checked else "shared")
            short |= c.checked and not c.ok
            line = ", ".join(f"{s} {n}/{c.have_by_server[s]}" for s, n in c.need_by_server.items())
            print(f"  {e.name + ' / ' + p.label:44s} {fits:8s}  {line}")
    return 1 if short else 0


def cmd_calibrate(a: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    topo = load(a.topology)
    backend, why = choose_backend(a.backend)
    print(f"backend: {backend} ({why})")
    with Network(topo, scale=a.scale, backend=backend, workdir=Path("/tmp") / f"udtb-cal-{os.getpid()}") as net:
        cals = calibrate(net, [(a.src, a.dst)])
    return 0 if all(c.ok for c in cals) else 1


def run_simulations(
    names: list[str],
    scenarios: dict[str, sim.Scenario],
    outdir: Path,
    quick: bool,
    jobs: int | None,
    seeds: int = 1,
) -> int:
    """Runs the named scenarios into ``outdir`` (each under ``seeds`` seeds) and prints each
    claim's verdict; returns the number of claims not reproduced. Raises what ``sim.simulate``
    raises (a missing simulator)."""
    not_reproduced = 0
    for n in names:
        sc = scenarios[n]
        t0 = time.monotonic()
        by_seed, checks = sim.simulate_seeds(sc, seeds, quick=quick, jobs=jobs)
        points = by_seed[0]
        out = sim.write(sc, points, checks, outdir, quick, by_seed[1:])
        every = [p for pts in by_seed for p in pts]
        runs = sum(len(p.results) for p in every)
        # A count-bound run (short_flows.until_done) may end before its duration: its last sample.
        sim_s = sum((r["bottleneck"]["times_s"] or [r["spec"]["duration_s"]])[-1] for p in every for r in p.results)
        of = f", {seeds} seeds" if seeds > 1 else ""
        print(f"{n} ({sc.figure}): {runs} runs{of}, {sim_s:.0f} s simulated in {time.monotonic() - t0:.1f} s -> {out}")
        for c in checks:
            mark = {"holds": "reproduced", "fails": "NOT reproduced"}.get(c.judgement, c.judgement)
            print(f"  {mark}: {c.check.claim} [{c.detail}]")
            not_reproduced += c.ok is False
        for label, where in sim.paper_position(sc, points).items():
            print(f"  where the paper falls, {label}: {where}")
    return not_reproduced


# The NS-2 check's quick points beside the simulated figures: seeds per point (the full check,
# 36 dumbbells x 10 seeds per profile, is `make ns2-check`).
NS2_QUICK_SEEDS = 3


def quick_ns2_checks(outdir: Path) -> None:
    """The NS-2 check's quick points for every TCP profile into ``outdir/ns2-check[-profile]``, so
    that the report shows the simulator's TCP against NS-2's beside the figures it is used in.
    Without NS-2's ``ns`` it says so and skips; a disagreement is printed, not an error."""
    from . import ns2check

    if ns2check.ns_binary() is None:
        print("ns2-check: skipped, NS-2's `ns` is not installed (`make setup` installs it)")
        return
    for profile in ns2check.PROFILES:
        results = ns2check.compare(ns2check.scenarios(quick=True), NS2_QUICK_SEEDS, profile=profile)
        name = "ns2-check" if profile == ns2check.DEFAULT_PROFILE else f"ns2-check-{profile}"
        command = f"python -m udtbed ns2-check --quick --seeds {NS2_QUICK_SEEDS} --profile {profile}"
        ns2check.write(results, outdir / name, NS2_QUICK_SEEDS, command)
        verdicts = ", ".join(f"{c.scenario.name} {c.verdict.value}" for c in results)
        print(f"ns2-check, quick points, TCP profile {profile}: {verdicts} -> {outdir / name}")


def cmd_simulate(a: argparse.Namespace) -> int:
    """Every scenario of experiments/sim (or --only those), each a JSON, a plot and its claims."""
    try:
        scenarios = sim.load_all(Path(a.scenarios_dir))
    except sim.ScenarioError as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 2
    names = list(scenarios) if not a.only else a.only.split(",")
    unknown = [n for n in names if n not in scenarios]
    if unknown:
        have = ", ".join(scenarios)
        print(f"udtbed: no scenario {', '.join(unknown)} in {a.scenarios_dir} (have {have})", file=sys.stderr)
        return 2
    try:
        if a.seeds < 1:
            print(f"udtbed: --seeds must be 1 or more, not {a.seeds}", file=sys.stderr)
            return 2
        missed = run_simulations(names, scenarios, Path(a.results), a.quick, a.jobs, a.seeds)
        if not a.only:
            quick_ns2_checks(Path(a.results))
    except (FileNotFoundError, RuntimeError) as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nudtbed: interrupted (the simulations are processes of this one: nothing is left)", file=sys.stderr)
        return 130
    print(f"{missed} claim(s) not reproduced" if missed else "every judged claim reproduced")
    return 0


def cmd_ns2_check(a: argparse.Namespace) -> int:
    """Our simulator's TCP against NS-2's on the same dumbbells (docs/simulator.md, "Checked against
    NS-2"): a table, JSON and Markdown into --out; exit 1 when a scenario disagrees, 2 without ns."""
    from . import ns2check

    if ns2check.ns_binary() is None:
        print("udtbed: NS-2's `ns` is not installed: `make setup` installs it (Debian package ns2)", file=sys.stderr)
        return 2
    if a.seeds < 1:
        print(f"udtbed: --seeds must be 1 or more, not {a.seeds}", file=sys.stderr)
        return 2
    checks = ns2check.scenarios(a.quick)
    if a.only:
        names = a.only.split(",")
        checks = [c for c in checks if c.name in names]
        if not checks:
            have = ", ".join(c.name for c in ns2check.scenarios(a.quick))
            print(f"udtbed: no scenario {a.only} (have {have})", file=sys.stderr)
            return 2
    profile = a.profile
    command = (
        "python -m udtbed ns2-check"
        + (" --quick" if a.quick else "")
        + f" --seeds {a.seeds}"
        + (f" --profile {profile}" if profile != ns2check.DEFAULT_PROFILE else "")
    )
    print(f"==> ns2-check: {len(checks)} scenario(s) x {a.seeds} seed(s), ours and NS-2, profile {profile}", flush=True)
    try:
        results = ns2check.compare(
            checks, a.seeds, a.jobs, progress=lambda line: print("  " + line, flush=True), profile=profile
        )
    except (FileNotFoundError, RuntimeError) as err:
        print(f"udtbed: {err}", file=sys.stderr)
        return 1
    print(ns2check.table(results))
    default_out = "ns2-check" if profile == ns2check.DEFAULT_PROFILE else f"ns2-check-{profile}"
    out = Path(a.out) if a.out else REPO / "results/sim" / default_out
    ns2check.write(results, out, a.seeds, command)
    bad = [c.scenario.name for c in results if c.verdict is ns2check.Verdict.DISAGREE]
    unsure = [c.scenario.name for c in results if c.verdict is ns2check.Verdict.INCONCLUSIVE]
    print(f"wrote {out / 'ns2-check.json'} and {out / 'ns2-check.md'}")
    if unsure:
        print(f"inconclusive (beyond the tolerance, within the seeds' scatter; more --seeds): {', '.join(unsure)}")
    if bad:
        print(f"disagree with NS-2 beyond {ns2check.GOODPUT_TOLERANCE:.0%}: {', '.join(bad)}")
        return 1
    print(f"every scenario within {ns2check.GOODPUT_TOLERANCE:.0%} of NS-2 or the seeds' scatter")
    return 0


def cmd_compare_backends(a: argparse.Namespace) -> int:
    """Each Fig. 11 path class under each backend this kernel has: RTT, rate, queue, a UDT flow."""
    from . import backend_compare

    signal.signal(signal.SIGTERM, _interrupt)
    backends = a.backends.split(",") if a.backends else backend_compare.available_backends()
    work = Path("/tmp") / f"udtb-cmp-{os.getpid()}"
    print(f"backends: {', '.join(backends)}; scale {a.scale:g}; UDT for {a.seconds:g} s per path")
    try:
        rows = backend_compare.compare(backends, a.scale, a.seconds, work)
    except KeyboardInterrupt:
        print("\nudtbed compare-backends: interrupted (every topology was closed)", file=sys.stderr)
        return 130
    except RuntimeError as err:
        print(f"udtbed compare-backends: {err}", file=sys.stderr)
        return 1
    table = backend_compare.markdown(rows)
    print(table)
    if a.out:
        Path(a.out).write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1) + "\n")
    return 0


def cmd_vm(a: argparse.Namespace) -> int:
    """The command in the stock kernel: its output as it comes, its exit status as ours."""
    from . import vm

    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        print("udtbed vm: no command (udtbed vm [options] -- CMD...)", file=sys.stderr)
        return 2
    rw = [Path(d).resolve() for d in a.rw]
    for d in rw:
        d.mkdir(parents=True, exist_ok=True)
    try:
        r = vm.run(
            command, accel=a.accel, cpus=a.cpus, memory=a.memory, rw=rw, timeout_s=a.timeout, kernel=a.kernel, echo=True
        )
    except vm.VmUnavailable as err:
        print(f"udtbed vm: {err}", file=sys.stderr)
        return 3
    except vm.VmBootFailed as err:
        print(f"udtbed vm: {err}", file=sys.stderr)
        return 4
    except subprocess.TimeoutExpired:
        print(f"udtbed vm: the command ran past --timeout {a.timeout:g} s; the VM was stopped", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        print("\nudtbed vm: interrupted; the VM was stopped", file=sys.stderr)
        return 130
    print(
        f"udtbed vm: exit {r.rc} in {r.wall_s:.0f} s ({r.kernel} under {r.accel.upper()}, "
        f"{r.cpus} vCPU{'' if r.cpus == 1 else 's'}, "
        f"booted in {r.boot_s:.0f} s; {r.kvm_note})",
        file=sys.stderr,
    )
    if a.record:
        Path(a.record).write_text(json.dumps(r.record(), indent=1) + "\n")
    return r.rc


def main(argv: list[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress as it goes, also into a pipe or a log
    ap = argparse.ArgumentParser(
        prog="udtbed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run experiments and write results + report")
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
    rp = sub.add_parser("report", help="(re)draw a run directory's HTML report from its results")
    rp.add_argument("run_dir", help="a run directory (results/testbed/<run>)")
    cp = sub.add_parser("compare", help="two runs side by side (or two stacks of one): change, interval, significance")
    cp.add_argument("run_a", help="run A (results/testbed/<run>)")
    cp.add_argument("run_b", nargs="?", help="run B (omit to compare two stacks of A: --stacks)")
    cp.add_argument("--stacks", help="A's stack and B's, e.g. libudt,udt-rs (default: each stack both runs have)")
    cp.add_argument("--alpha", type=float, default=0.05, help="significance over all rows, Holm (default 0.05)")
    cp.add_argument("--threshold", type=float, default=0.05, help="smallest change that counts (default 0.05: 5 %%)")
    cp.add_argument("--html", help="write the page here (default: compare-<A>.html in B, or in A)")
    g = sub.add_parser("gate", help="this checkout's udt-rs against a base commit's, in turns, compared (root)")
    g.add_argument("--base", required=True, help="the git ref to compare against (built in build/gate/<sha>)")
    g.add_argument("--repeat", type=int, default=3, help="runs a build, in turns (default 3)")
    g.add_argument("--experiments", default="efficiency", help="the experiments run (default efficiency)")
    g.add_argument("--parts", help="only these parts (default: every part of the experiments)")
    g.add_argument("--duration", type=float, default=20.0, help="seconds per run of a part (default 20)")
    g.add_argument("--scale", default="0.1", help="the runs' scale (default 0.1)")
    g.add_argument("--head-bin", help="the head's udt binary (default impl/target/release/udt)")
    g.add_argument("--alpha", type=float, default=0.05)
    g.add_argument("--threshold", type=float, default=0.05)
    co = sub.add_parser("cores", help="the cores each part needs at a scale, and whether this machine has them")
    co.add_argument("--experiments", default="all", help="comma-separated names, 'default' or 'all' (default)")
    co.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))
    co.add_argument("--scale", type=float, default=1.0)
    co.add_argument("--cpuset", help="the CPUs a run would use (default: all this process may)")
    co.add_argument("--backend", default="linkem", choices=["linkem", "netem"])
    co.add_argument("--servers", help="a servers file: each part's seats on its servers' CPUs (asked over SSH)")
    c = sub.add_parser("check", help="validate topology and experiment files")
    c.add_argument("files", nargs="+")
    ls = sub.add_parser("list", help="the experiments and the stacks")
    ls.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))
    k = sub.add_parser("calibrate", help="build a topology and calibrate one path")
    k.add_argument("topology")
    k.add_argument("src")
    k.add_argument("dst")
    k.add_argument("--scale", type=float, default=0.1)
    k.add_argument("--backend", default="auto", choices=["auto", "linkem", "netem"])
    x = sub.add_parser(
        "cleanup", help="remove the udtb-* namespaces (and their processes) and containers of runs that are gone"
    )
    x.add_argument(
        "--prefix",
        default=network.PREFIX,
        help=f"only namespaces starting with this, e.g. {network.PREFIX}PID- for one run, "
        f"removed even while that run is alive (must start with {network.PREFIX})",
    )
    x.add_argument("--all", action="store_true", help="also remove the namespaces and containers of runs still alive")
    x.add_argument("--servers", help="a servers file: clean up on each of its servers too, over SSH")
    pf = sub.add_parser(
        "preflight", help="check the servers of a cluster run (SSH, root, tools, binaries, MTU, clocks)"
    )
    pf.add_argument("--servers", required=True, help="the servers file (docs/cluster.md)")
    pf.add_argument("--experiments", default="default", help="whose placements' underlays to probe (default: default)")
    pf.add_argument("--experiments-dir", default=str(EXPERIMENTS_DIR))
    pf.add_argument("--results", default="results/testbed", help="the run directory's parent, shared with the servers")
    lb = sub.add_parser("lab", help="servers on this machine: sshd in namespaces, joined by veth 'cables' (root)")
    lb.add_argument("action", choices=["up", "down"])
    lb.add_argument("dir", help="where its keys, configs, logs and servers.toml go")
    lb.add_argument("--names", default=",".join(lab.DEFAULT_NAMES), help="the servers' names (default %(default)s)")
    lb.add_argument("--mtu", type=int, default=1500, help="the underlay links' MTU (default 1500)")
    sm = sub.add_parser("simulate", help="the papers' NS-2 figures in the simulator (experiments/sim/*.toml)")
    sm.add_argument("--only", help="comma-separated scenario names (default: all)")
    sm.add_argument("--quick", action="store_true", help="the short versions make test pins")
    sm.add_argument("--jobs", type=int, help="simulations at once (default: the CPU count)")
    sm.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run each figure under this many seeds (loss streams, flows' start times); a claim holds "
        "when it holds in every seed, fails when in none, else is inconclusive (default 1)",
    )
    sm.add_argument("--results", default=str(REPO / "results/sim"))
    sm.add_argument("--scenarios-dir", default=str(sim.SCENARIOS_DIR))
    nc = sub.add_parser("ns2-check", help="our simulator's TCP against NS-2's on the same dumbbells (needs ns)")
    nc.add_argument("--quick", action="store_true", help="three 20 s points (seconds in all) instead of the 36")
    nc.add_argument("--seeds", type=int, default=10, help="seeds per scenario (default 10)")
    nc.add_argument("--only", help="comma-separated scenario names (default: all)")
    nc.add_argument("--jobs", type=int, help="runs at once (default: the CPU count + 4 threads)")
    nc.add_argument(
        "--profile",
        choices=sim.TCP_PROFILES,
        default="default",
        help="the model's TCP profile, NS-2's agents set to match (ns2-2.26: the papers' NS-2 defaults)",
    )
    nc.add_argument("--out", help="default results/sim/ns2-check (ns2-check-<profile> for another profile)")
    cb = sub.add_parser("compare-backends", help="netem beside udt-linkem on each Fig. 11 path class (root)")
    cb.add_argument("--scale", type=float, default=0.02)
    cb.add_argument("--seconds", type=float, default=20.0, help="the UDT flow on each path (default 20)")
    cb.add_argument("--backends", help="comma-separated (default: netem where the kernel has it, and linkem)")
    cb.add_argument("--out", help="write the rows as JSON here")
    v = sub.add_parser("vm", help="run a command in a stock kernel that has netem, under QEMU (virtme-ng) or UML")
    v.add_argument(
        "--accel",
        default="auto",
        choices=["auto", "kvm", "tcg", "uml"],
        help="auto: KVM where it boots, else TCG; uml: Debian's user-mode Linux (real CPU, one CPU, slow syscalls)",
    )
    v.add_argument("--cpus", type=int, default=2, help="QEMU's vCPUs (default 2; UML has one)")
    v.add_argument("--memory", default="4G")
    v.add_argument("--rw", action="append", default=[], help="a directory the guest may write (repeatable)")
    v.add_argument(
        "--kernel", help="the vmlinuz to boot (default: the newest /boot one with sch_netem); UML: its linux.uml"
    )
    v.add_argument("--timeout", type=float, default=1800.0, help="seconds before the VM is stopped (default 1800)")
    v.add_argument("--record", help="write how it ran (accel, kernel, times, exit) as JSON here")
    v.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.cmd == "vm":
        return cmd_vm(a)
    if a.cmd == "compare-backends":
        return cmd_compare_backends(a)
    if a.cmd == "ns2-check":
        return cmd_ns2_check(a)
    if a.cmd == "simulate":
        return cmd_simulate(a)
    if a.cmd == "run":
        return cmd_run(a)
    if a.cmd == "check":
        return cmd_check(a)
    if a.cmd == "list":
        return cmd_list(a)
    if a.cmd == "cores":
        return cmd_cores(a)
    if a.cmd == "report":
        return cmd_report(a)
    if a.cmd == "compare":
        return cmd_compare(a)
    if a.cmd == "gate":
        return cmd_gate(a)
    if a.cmd == "calibrate":
        try:
            return cmd_calibrate(a)
        except KeyboardInterrupt:
            return 130
    if a.cmd == "preflight":
        return cmd_preflight(a)
    if a.cmd == "lab":
        return cmd_lab(a)
    if not a.prefix.startswith(network.PREFIX):
        print(f"udtbed cleanup: --prefix must start with {network.PREFIX}", file=sys.stderr)
        return 2
    if a.servers and (rc := _cleanup_servers(a)) != 0:
        return rc
    boxes, gone = runtime.cleanup_run(a.prefix, live=a.all or a.prefix != network.PREFIX)
    if boxes:
        print(f"removed {len(boxes)} container(s): {', '.join(boxes)}")
    print(f"removed {len(gone)} namespace(s){': ' + ', '.join(gone) if gone else ''}")
    kept = netns.list_namespaces(a.prefix) + runtime.list_containers(a.prefix)
    if kept:
        print(
            f"kept {len(kept)} namespace(s) and container(s) of runs still alive ({', '.join(kept)}): "
            "stop those runs, or pass --all (make testbed-cleanup ALL=1)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
