"""The simulated figures (udtbed.simulation.sim: `make simulate`, or a run's ``<run dir>/sim``): the
summary's rows, each scenario's claims reproduced, and a section per scenario with its setup,
claims, points and plot; beside them the simulator's TCP against NS-2 (``udtbed ns2-check``). A
file that cannot be read is a note, never an error."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .markup import esc

SIM_MARK = {True: ("ok", "✓"), False: ("bad", "✕"), None: ("note", "–")}


@dataclass(frozen=True)
class SimFile:
    """One ``<name>.json`` of a simulated-results directory: its data (``udtbed.simulation.sim.to_json``'s
    shape) or why it could not be read."""

    path: Path
    data: dict[str, Any] | None
    error: str = ""

    @property
    def anchor(self) -> str:
        return f"sim--{self.path.stem}"


def load_sims(sim_dir: Path) -> list[SimFile]:
    """Every ``*.json`` of ``sim_dir``, by name; one that is missing a part or is not JSON carries
    its error instead of its data (the report says so and goes on)."""
    out = []
    for path in sorted(Path(sim_dir).glob("*.json")):
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            for key, kind in (("figure", str), ("title", str), ("metric", str), ("points", list), ("checks", list)):
                if not isinstance(d.get(key), kind):
                    raise ValueError(f"'{key}' missing or not a {kind.__name__}")
            if not all(isinstance(p, dict) and isinstance(p.get("values"), dict) for p in d["points"]):
                raise ValueError("a point without its 'values'")
            if not all(isinstance(c, dict) and c.get("ok") in (True, False, None) for c in d["checks"]):
                raise ValueError("a check whose 'ok' is not true, false or null")
            out.append(SimFile(path, d))
        except (OSError, ValueError) as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            out.append(SimFile(path, None, f"{type(e).__name__}: {e}"))
    return out


def _claims(d: dict[str, Any]) -> tuple[int, int, int]:
    """(reproduced, judged, not judged) of a scenario's claims; over seeds an inconclusive
    claim (the seeds disagree) is among the not judged, :func:`_inconclusive` counts it."""
    oks = [c.get("ok") for c in d["checks"]]
    return sum(ok is True for ok in oks), sum(ok is not None for ok in oks), sum(ok is None for ok in oks)


def _inconclusive(d: dict[str, Any]) -> int:
    return sum(c.get("judgement") == "inconclusive" for c in d["checks"])


def _num(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:.3g}"
    return esc(v)


def _png_file(path: Path, alt: str) -> str:
    """A PNG already on disk, inline like the plots (udtbed.results.report.plots) (a note where there is none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return f"<p class=note>no plot ({esc(path.name)} missing)</p>"
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def sim_summary(sims: list[SimFile]) -> str:
    """The summary's rows for the simulated figures: each scenario's claims reproduced, n / m."""
    if not sims:
        return ""
    rows = []
    for s in sims:
        if s.data is None:
            rows.append(
                f"<tr><td class=l>{esc(s.path.name)}</td><td class=bad colspan=2>unreadable: left out</td></tr>"
            )
            continue
        ok, judged, unjudged = _claims(s.data)
        cls = "note" if not judged else ("ok" if ok == judged else "bad")
        claims = f"{ok} / {judged}" if judged else "–"
        inconclusive = _inconclusive(s.data)
        if inconclusive:
            claims += f" ({inconclusive} inconclusive over {len(s.data.get('seeds', []))} seeds)"
        if unjudged - inconclusive:
            claims += f" ({unjudged - inconclusive} not judged)"
        if not s.data["checks"]:
            claims += " (none judged on this run)" if s.data.get("quick") else " (none)"
        link = f"<a href='#{esc(s.anchor)}'>{esc(s.data['title'])}</a>"
        rows.append(
            f"<tr><td class=l>{esc(s.data['figure'])}</td><td class=l>{link}</td><td class={cls}>{claims}</td></tr>"
        )
    return (
        "<h3>Simulated figures</h3><p class=note>The papers' NS-2 figures in the simulator (udtbed.sim): "
        "each scenario's claims reproduced, of those judged.</p><table class=summary>"
        "<tr><th>figure</th><th class=l>scenario</th><th>claims reproduced</th></tr>" + "".join(rows) + "</table>"
    )


def _sim_scenario(s: SimFile, d: dict[str, Any]) -> str:
    metric = d["metric"]
    quick = " (quick version: only the claims marked quick are judged)" if d.get("quick") else ""
    out = [
        f"<h3 id='{esc(s.anchor)}'>{esc(d['figure'])}: {esc(d['title'])}</h3>",
        f"<p><b>Setup</b>: {esc(d.get('setup', ''))}</p>",
        f"<p><b>The paper's claim</b>: {esc(d.get('claim', ''))}</p>",
    ]
    if d.get("note"):
        out.append(f"<p class=note>{esc(d['note'])}</p>")
    if d["checks"]:
        head = "<th class=l>claim</th><th class=l>series</th><th class=l>key</th><th></th><th class=l>detail</th>"
        rows = [f"<tr>{head}</tr>"]
        for c in d["checks"]:
            cls, mark = ("inc", "~") if c.get("judgement") == "inconclusive" else SIM_MARK[c.get("ok")]
            rows.append(
                f"<tr><td class=l>{esc(c.get('claim', ''))}</td><td class=l>{esc(c.get('series', ''))}</td>"
                f"<td class=l>{esc(c.get('key', ''))}</td><td class='{cls} mark'>{mark}</td>"
                f"<td class='l small'>{esc(c.get('detail', ''))}</td></tr>"
            )
        ok, judged, _ = _claims(d)
        seeds = d.get("seeds", [])
        over = (
            f" over seeds {', '.join(map(str, seeds))} (a claim holds when it holds in every seed)"
            if len(seeds) > 1
            else ""
        )
        out.append(
            f"<p>Claims reproduced: <b>{ok} / {judged}</b>{esc(over)}{esc(quick)}</p><table>{''.join(rows)}</table>"
        )
    else:
        out.append(f"<p class=note>No claim judged on this run{esc(quick)}.</p>")
    paper = d.get("paper")
    if isinstance(paper, dict) and isinstance(paper.get("where"), dict):
        items = "".join(f"<li>{esc(label)}: {esc(where)}</li>" for label, where in paper["where"].items())
        out.append(
            f"<p><b>Where the paper's figure falls in the sweep</b> ({esc(paper.get('key', ''))}; "
            f"the setup leaves this parameter open):</p><ul>{items}</ul>"
        )
    x = d.get("x") or "x"
    rows = [f"<tr><th class=l>series</th><th>{esc(x)}</th><th>{esc(metric)}</th><th>wall s</th></tr>"]
    for p in d["points"]:
        rows.append(
            f"<tr><td class=l>{esc(p.get('series', ''))}</td><td>{_num(p.get('x'))}</td>"
            f"<td>{_num(p['values'].get(metric))}</td><td>{_num(p.get('wall_s'))}</td></tr>"
        )
    seed = f", seed {esc(d['seed'])}" if "seed" in d else ""
    out.append(f"<table>{''.join(rows)}</table><p class=note>{len(d['points'])} points{seed}.</p>")
    out.append(_png_file(s.path.with_suffix(".png"), f"{d['figure']} (simulated)"))
    return "\n".join(out)


NS2_MARK = {"agree": ("ok", "✓"), "disagree": ("bad", "✕"), "inconclusive": ("inc", "~")}


def ns2_checks(sim_dir: Path) -> str:
    """The simulator's TCP against NS-2's (``udtbed ns2-check``'s ``ns2-check.json`` in each
    ``ns2-check*`` folder of ``sim_dir``): per profile, every dumbbell's per-flow goodput in both,
    their ratio, the drops and the verdict; empty where there is none. An unreadable file is a
    note."""
    out = []
    for path in sorted(Path(sim_dir).glob("ns2-check*/ns2-check.json")):
        try:
            d = json.loads(path.read_text())
            rows = ["<tr><th class=l>dumbbell</th><th>ours Mb/s</th><th>NS-2 Mb/s</th><th>ratio</th>"
                    "<th>drops ours / NS-2</th><th></th></tr>"]  # fmt: skip
            verdicts: dict[str, int] = {}
            for c in d["scenarios"]:
                verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
                cls, mark = NS2_MARK.get(c["verdict"], ("note", "–"))
                ours, ns2 = c["ours"], c["ns2"]
                rows.append(
                    f"<tr><td class=l>{esc(c['scenario']['name'])}</td>"
                    f"<td>{ours['per_flow_mean_mbps']:.2f} ± {ours['per_flow_sd_mbps']:.2f}</td>"
                    f"<td>{ns2['per_flow_mean_mbps']:.2f} ± {ns2['per_flow_sd_mbps']:.2f}</td>"
                    f"<td>{c['ratio']:.3f} ± {c['stderr_ratio']:.3f}</td>"
                    f"<td>{ours['drops']:.0f} / {ns2['drops']:.0f}</td><td class='{cls} mark'>{mark}</td></tr>"
                )
            counts = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
            out.append(
                f"<h3>The simulator's TCP against NS-2 ({esc(path.parent.name)})</h3>"
                f"<p class=note><code>{esc(d.get('command', ''))}</code>: the same dumbbells in NS-2 2.35 and "
                f"in the simulator, {esc(d.get('seeds'))} seeds each; a dumbbell agrees (✓) when the per-flow "
                f"means are within {float(d['tolerance']):.0%}, ~ beyond it but within the seeds' scatter "
                f"(docs/simulator.md, 'Checked against NS-2'). {esc(counts)}.</p><table>{''.join(rows)}</table>"
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            out.append(f"<p class=bad>{esc(path)} left out: not an NS-2 check ({esc(type(e).__name__)}: {esc(e)}).</p>")
    return "\n".join(out)


def sim_section(sim_dir: Path, sims: list[SimFile] | None = None) -> str:
    """The simulated figures of ``sim_dir`` (``udtbed.simulation.sim.write``'s ``<name>.json`` and ``.png``):
    per scenario its setup, the paper's claim, the claims judged (✓ / ✕ / – not judged), the
    metric per series and x, and the plot. A file that cannot be read is a note, not an error."""
    if sims is None:
        sims = load_sims(sim_dir)
    out = [
        "<h2 id='sim'>Simulated figures (NS-2 scenarios, <code>make simulate</code>)</h2>",
        f"<p class=note>From {esc(sim_dir)}: the papers' NS-2 figures run in the deterministic simulator "
        "(docs/simulator.md) with the real protocol code. ✓ reproduced, ✕ not, – not judged.</p>",
    ]
    if not sims:
        out.append("<p class=note>No simulated results there.</p>")
    for s in sims:
        if s.data is not None:
            try:
                out.append(_sim_scenario(s, s.data))
                continue
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                s = SimFile(s.path, None, f"{type(e).__name__}: {e}")
        out.append(f"<p class=bad>{esc(s.path.name)} left out: not a simulated result ({esc(s.error)}).</p>")
    out.append(ns2_checks(sim_dir))
    return "\n".join(out)
