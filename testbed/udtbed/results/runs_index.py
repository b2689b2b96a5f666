"""All runs at a glance: ``results/testbed/index.html``, one row per run, from which any two
runs open side by side.

Drawing a run's report also writes the run's ``summary.json`` (:func:`summarise`): its metadata,
each stack's count of bands met / missed / inconclusive / missed by 4.11 too, and every band's
mean, 95 % interval and n (udtbed.results.repeats). The index (:func:`write_index`) reads only those
files, so it stays quick with many runs; a run without one (drawn before, or never drawn) is
listed with the command that draws it. The page is static: the summaries ride in it as JSON,
and picking run A and run B shows their bands side by side with the change and whether the two
intervals overlap (``index.html#a=<run>&b=<run>`` opens with that pair picked). The
significance test over the rows (Welch, Holm) is ``udtbed compare A B``, whose command the page
gives for the pair picked.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from . import repeats
from .results import ExperimentResult

SUMMARY = "summary.json"


def summarise(outdir: Path, meta: dict[str, Any], results: list[ExperimentResult]) -> dict[str, Any]:
    """``outdir/summary.json``: what the index shows of the run (returned too)."""
    counts: dict[str, dict[str, int]] = {}
    rows = []
    most = 1
    for exp in results:
        for part in exp.parts:
            most = max(most, len(part.repeats()))
            for stack, verdicts in repeats.judged(part).items():
                c = counts.setdefault(stack, dict.fromkeys(("met", "missed", "inconclusive", "deviation"), 0))
                for v in verdicts:
                    key = (
                        "deviation"
                        if v.reading == "4.11 deviation"
                        else "inconclusive"
                        if v.judgement == "inconclusive"
                        else None
                        if v.ok is None
                        else "met"
                        if v.ok
                        else "missed"
                    )
                    if key:
                        c[key] += 1
                    rows.append(
                        {
                            "experiment": exp.experiment,
                            "part": part.label,
                            "stack": stack,
                            "band": v.band,
                            "mean": v.value,
                            "low": v.ci_low,
                            "high": v.ci_high,
                            "n": v.n,
                            "mark": v.mark,
                        }
                    )
    host = meta.get("host") or {}
    summary = {
        "run_id": meta.get("run_id"),
        "started": meta.get("started"),
        "commit": meta.get("commit"),
        "scale": meta.get("scale"),
        "duration_s": meta.get("duration_s"),
        "repeat": meta.get("repeat", most),
        "backend": meta.get("backend"),
        "status": meta.get("status"),
        "experiments": meta.get("experiments", []),
        "host": {k: host.get(k) for k in ("cpu_model", "kernel", "cores_online")},
        "counts": counts,
        "rows": rows,
    }
    (outdir / SUMMARY).write_text(json.dumps(summary, indent=1))
    return summary


SCRIPT = """
const runs = JSON.parse(document.getElementById('runs').textContent);
function pick() {
  const a = document.querySelector('input[name=a]:checked'), b = document.querySelector('input[name=b]:checked');
  const out = document.getElementById('side');
  if (!a || !b) { out.innerHTML = '<p class=note>Pick run A and run B above.</p>'; return; }
  const A = runs[a.value], B = runs[b.value];
  const key = r => [r.experiment, r.part, r.stack, r.band].join(' | ');
  const bm = new Map(B.rows.map(r => [key(r), r]));
  const fmt = r => r.mean === null ? '–' : r.mean.toPrecision(3) + (r.low === null ? ' (n = ' + r.n + ')'
      : ' [' + r.low.toPrecision(3) + ', ' + r.high.toPrecision(3) + '] n = ' + r.n) + ' ' + r.mark;
  let rows = '';
  for (const r of A.rows) {
    const s = bm.get(key(r));
    if (!s) continue;
    const change = (r.mean && s.mean !== null) ? ((s.mean / r.mean - 1) * 100).toFixed(1) + ' %' : '–';
    const apart = r.high < s.low || s.high < r.low;
    const overlap = (r.low === null || s.low === null) ? 'one repeat' : apart ? 'apart' : 'overlap';
    rows += '<tr class="' + (overlap === 'apart' ? 'apart' : '') + '"><td class=l>' + r.experiment + ' / ' + r.part
      + '</td><td>' + r.stack + '</td><td class=l>' + r.band + '</td><td>' + fmt(r) + '</td><td>' + fmt(s)
      + '</td><td>' + change + '</td><td>' + overlap + '</td></tr>';
  }
  out.innerHTML = '<h2>' + A.run_id + ' (A) beside ' + B.run_id + ' (B)</h2><p class=note>The test over all rows:'
    + ' <code>python -m udtbed compare results/testbed/' + A.run_id + ' results/testbed/' + B.run_id + '</code></p>'
    + '<table><tr><th>part</th><th>stack</th><th>band</th><th>A</th><th>B</th><th>change</th><th>intervals</th></tr>'
    + (rows || '<tr><td colspan=7>no band both runs judged</td></tr>') + '</table>';
}
document.querySelectorAll('input[type=radio]').forEach(e => e.addEventListener('change', pick));
// index.html#a=<run>&b=<run> opens with that pair picked (a link to a comparison).
const want = new URLSearchParams(location.hash.slice(1));
for (const k of ['a', 'b']) {
  const e = [...document.querySelectorAll('input[name=' + k + ']')].find(x => x.value === want.get(k));
  if (e) e.checked = true;
}
pick();
"""


def write_index(root: Path) -> Path:
    """``root/index.html`` from every run directory under ``root`` (newest first)."""
    runs: dict[str, Any] = {}
    rows = []
    for d in sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink()), reverse=True):
        if not (d / "run.json").is_file():
            continue
        try:
            s = json.loads((d / SUMMARY).read_text())
        except (OSError, ValueError):
            rows.append(
                f"<tr><td></td><td></td><td class=l>{html.escape(d.name)}</td><td class=note colspan=6>no summary: "
                f"draw its report (<code>python -m udtbed report {html.escape(str(d))}</code>)</td></tr>"
            )
            continue
        runs[d.name] = s
        counts = "; ".join(
            f"{html.escape(k)} {c['met']}✓ {c['missed']}✕ {c['inconclusive']}~"
            + (f" ({c['deviation']} 4.11)" if c.get("deviation") else "")
            for k, c in s.get("counts", {}).items()
        )
        name = html.escape(d.name)
        host = s.get("host") or {}
        rows.append(
            f"<tr><td><input type=radio name=a value='{name}'></td><td><input type=radio name=b value='{name}'></td>"
            f"<td class=l><a href='{name}/report.html'>{name}</a></td>"
            f"<td>{html.escape(str(s.get('commit', ''))[:12])}</td><td>{s.get('scale')}</td>"
            f"<td>{s.get('repeat')}</td><td class=l>{html.escape(', '.join(s.get('experiments', [])))}</td>"
            f"<td class=l>{counts or '–'}</td><td class='l small'>{html.escape(str(s.get('status')))}; "
            f"{html.escape(str(s.get('backend')))}; {html.escape(str(host.get('cpu_model')))}, "
            f"{host.get('cores_online')} cores</td></tr>"
        )
    style = (
        "body{font-family:sans-serif;max-width:1250px;margin:2em auto;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}td.l,th.l{text-align:left}"
        ".note{color:#555}.small{font-size:85%}tr.apart{background:#fdf3dc}"
    )
    data = json.dumps(runs).replace("</", "<\\/")
    page = (
        f"<!doctype html><meta charset=utf-8><title>udtbed runs</title><style>{style}</style>"
        "<h1>Testbed runs</h1><p class=note>One row per run under this directory, newest first: bands met ✓, "
        "missed ✕ and inconclusive ~ per stack (over the run's repeats). Pick A and B to see them side by "
        "side.</p><table><tr><th>A</th><th>B</th><th class=l>run</th><th>commit</th><th>scale</th><th>repeats</th>"
        f"<th class=l>experiments</th><th class=l>bands</th><th class=l>run</th></tr>{''.join(rows)}</table>"
        f"<div id=side></div><script type=application/json id=runs>{data}</script><script>{SCRIPT}</script>"
    )
    out = root / "index.html"
    out.write_text(page)
    return out


__all__ = ["SUMMARY", "summarise", "write_index"]
