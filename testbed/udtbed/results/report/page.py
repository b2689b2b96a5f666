"""The whole page of a run directory: the run's head and its host, the summary, each experiment's
parts, the simulated figures; and writing it (``report.html``, with the run's ``summary.json``
for the index of runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import runs_index
from ..results import ExperimentResult
from . import parts, summary
from .markup import CSS, esc
from .simulated import load_sims, sim_section, sim_summary


def _host(meta: dict[str, Any]) -> str:
    """The host's facts (run.json's ``host``, udtbed.emulation.hostinfo), folded: what a reader needs to
    trust or repeat the figures and no result line shows."""
    h = meta.get("host")
    if not isinstance(h, dict):
        return ""
    gov = ", ".join(f"{g} (CPUs {c})" for g, c in h.get("governors", {}).items())
    rows = [
        ("kernel", h.get("kernel")),
        ("CPU", f"{h.get('cpu_model')}; {h.get('cores_online')} online, the run had {h.get('run_cpus')}"),
        ("frequency governor", gov),
        ("clock source", h.get("clocksource")),
    ]
    rows += [(k, v) for k, v in h.get("sysctls", {}).items()]
    rows += [(k, v) for k, v in h.get("tools", {}).items()]
    rows += [(f"package {k}", v) for k, v in h.get("packages", {}).items()]
    rows.append(("python", h.get("python")))
    body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows)
    folded = f"The host: {esc(h.get('cpu_model'))}, {esc(h.get('kernel'))}"
    return f"<details><summary>{folded}</summary><table>{body}</table></details>"


def render(meta: dict[str, Any], results: list[ExperimentResult], sim_dir: Path | None = None) -> str:
    """The report's HTML; with ``sim_dir``, the simulated figures there too (summary and section)."""
    image = meta.get("host_image")
    head = [
        f"<h1>UDT testbed run {esc(meta['run_id'])}</h1>",
        f"<p>commit {esc(meta.get('commit'))}, backend <b>{esc(meta.get('backend'))}</b> "
        f"({esc(meta.get('backend_reason', ''))}), "
        f"scale <b>{esc(meta.get('scale'))}</b> ({esc(meta.get('scale_reason'))}), "
        f"duration {esc(meta.get('duration_s'))} s per stack, host runtime {esc(meta.get('host_runtime'))}"
        + (f" (image {esc(image['name'])} {esc(image['id'][:19])})" if image else "")
        + (", UDT windows and buffers <b>4.11's defaults</b>" if meta.get("udt_buffers") == "default" else "")
        + f", status {esc(meta.get('status'))}</p>",
        _host(meta),
        summary.section(results, summary.stack_order(results)),
    ]
    sims = load_sims(sim_dir) if sim_dir is not None else None
    if sims is not None:
        head.append(sim_summary(sims))
    body = []
    for res in results:
        body.extend(parts.experiment(res))
    if sim_dir is not None:
        body.append(sim_section(sim_dir, sims))
    title = f"udtbed {esc(meta['run_id'])}"
    return f"<!doctype html><meta charset=utf-8><title>{title}</title><style>{CSS}</style>" + "\n".join(head + body)


def write_report(outdir: Path) -> Path:
    """``outdir/report.html`` from the run's results (``run.json``, each experiment's JSON, ``sim/``),
    and the run's ``summary.json`` for the index of runs."""
    outdir = Path(outdir)
    meta = json.loads((outdir / "run.json").read_text())
    results = [ExperimentResult.read(outdir / fname) for fname in meta.get("results", {}).values()]
    # The simulated figures of the run (the simulator writes them to <run dir>/sim), if any.
    sim_dir = outdir / "sim"
    path = outdir / "report.html"
    path.write_text(render(meta, results, sim_dir if sim_dir.is_dir() else None))
    # The run's line in the index of all runs, where the run sits in a results tree that
    # `udtbed run` keeps (it has `latest`), not in a directory a run was copied to.
    runs_index.summarise(outdir, meta, results)
    if (outdir.parent / "latest").is_symlink():
        runs_index.write_index(outdir.parent)
    return path
