"""Results of a conformance session as JSON and as an HTML matrix (rows = server stacks,
columns = client stacks), each cell listing the test cases with ✓ / ✕ / ? and links to the
run's logs and capture, the mark's tooltip saying why a run failed; below it, the diagnosis of
every failed run (udtconf.diagnosis: crash lines, log tails, what the capture shows), every
failed wire rule with case id, section, grade, stack and packet, and the active tester's
verdicts per stack with links to each probe's log and capture.

A test reports through its ``user_properties`` (``udtc_key``, ``udtc_grade``, …; see
:meth:`Entry.from_props`): ``udtc_verdict`` is the one-line outcome shown instead of pytest's
failure text, ``udtc_detail`` the lines shown under it."""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path


class Status(StrEnum):
    """A test's outcome as pytest reports it, an expected failure told apart (its value is what
    ``results.json`` says)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAIL = "xfail"  # failed as expected: a waiver (udtconf.expectations) or an xfail mark
    XPASS = "xpass"  # passed although expected to fail


@dataclass
class Entry:
    key: str
    nodeid: str
    status: Status
    message: str = ""
    grade: str = ""
    section: str = ""
    requirement: str = ""
    logdir: str = ""
    pcap: str = ""
    violations: list[str] = field(default_factory=list)
    verdict: str = ""  # one line, in the test's own words (no pytest assertion text)
    detail: list[str] = field(default_factory=list)  # a run's diagnosis, a probe's notes and log
    log: str = ""  # a probe's own log

    @classmethod
    def from_props(cls, props: Mapping[str, object], nodeid: str, status: Status, message: str) -> Entry:
        """From a test item's ``user_properties`` (``udtc_key``, ``udtc_grade``, …)."""

        def prop(name: str) -> str:
            return str(props.get(f"udtc_{name}", ""))

        def lines(name: str) -> list[str]:
            value = props.get(f"udtc_{name}", [])
            return [str(v) for v in value] if isinstance(value, list | tuple) else []

        return cls(
            key=str(props["udtc_key"]),
            nodeid=nodeid,
            status=status,
            message=" ".join(str(message).split())[:600],
            grade=prop("grade"),
            section=prop("section"),
            requirement=prop("requirement"),
            logdir=prop("logdir"),
            pcap=prop("pcap"),
            violations=lines("violations"),
            verdict=prop("verdict"),
            detail=lines("detail"),
            log=prop("log"),
        )

    @property
    def parts(self) -> list[str]:
        return self.key.split("/")

    @property
    def text(self) -> str:
        """The one-line outcome: the test's verdict (with the known finding's reason for an
        expected failure), else pytest's message."""
        if self.verdict and self.status == Status.XFAIL and self.message:
            return f"{self.verdict} — {self.message}"
        return self.verdict or self.message


# The reason conftest's fail-fast gives the cases it skips after a pair's failed handshake.
SKIPPED_AFTER_HANDSHAKE = "handshake failed for server"
PASSED = (Status.PASSED, Status.XPASS)
FAILED = (Status.FAILED, Status.XFAIL)
SYMBOL: dict[str, str] = {
    Status.PASSED: "✓",
    Status.FAILED: "✕",
    Status.XFAIL: "✕",
    Status.XPASS: "✓",
    Status.SKIPPED: "?",
}


def write(entries: list[Entry], outdir: Path, junit: Path | None = None) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, int] = {}
    for e in entries:
        summary[e.status] = summary.get(e.status, 0) + 1
    (outdir / "results.json").write_text(
        json.dumps(
            {
                "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "summary": summary,
                "entries": [asdict(e) for e in entries],
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    (outdir / "matrix.html").write_text(render_html(entries, outdir, junit))


def _rel(path: str, outdir: Path) -> str:
    return os.path.relpath(path, outdir) if path else ""


def render_html(entries: list[Entry], outdir: Path, junit: Path | None = None) -> str:
    interop = [e for e in entries if e.key.startswith("interop/")]
    wire = [e for e in entries if e.key.startswith("wire/")]
    servers = sorted({e.parts[1] for e in interop + wire})
    clients = sorted({e.parts[2] for e in interop + wire})
    cases = list(dict.fromkeys(e.parts[3] for e in interop + wire))
    by_cell: dict[tuple[str, str, str], Entry] = {(x.parts[1], x.parts[2], x.parts[3]): x for x in interop}
    wire_fail: dict[tuple[str, str, str], list[Entry]] = {}
    for w in wire:
        if w.status in FAILED:
            wire_fail.setdefault((w.parts[1], w.parts[2], w.parts[3]), []).append(w)

    out = [
        "<!doctype html><meta charset='utf-8'><title>UDT4 conformance matrix</title>",
        "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #bbb;"
        "padding:4px 8px;vertical-align:top}.ok{color:#080}.bad{color:#c00}.unk{color:#888}.known{color:#b60}"
        "code{font-size:12px}</style>",
        "<h1>UDT4 conformance — interop matrix</h1>",
        "<p>Rows: server (listener / receiver) stack; columns: client (sender) stack. ✓ transfer intact and no "
        "MUST rule violated, ✕ failure (orange = known finding/flaky), ? unclaimed in a meta.toml (unsupported) "
        "or not built, – not run because the pair's handshake failed (fail-fast); a case or pair not selected "
        "shows nothing. "
        "Each mark links to the run's logs; <i>pcap</i> to the capture.</p>",
    ]
    if junit and str(junit):
        out.append(
            f"<p>JUnit XML: <a href='{html.escape(_rel(str(junit), outdir))}'>{html.escape(junit.name)}</a>; "
            "JSON: <a href='results.json'>results.json</a></p>"
        )
    out.append(
        "<table><tr><th>server \\ client</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in clients) + "</tr>"
    )
    for s in servers:
        out.append(f"<tr><th>{html.escape(s)}</th>")
        for c in clients:
            lines = []
            for case in cases:
                e = by_cell.get((s, c, case))
                fails = wire_fail.get((s, c, case), [])
                must = [f for f in fails if f.grade == "MUST" and f.status == Status.FAILED]
                if e is None:
                    continue  # not selected (a reference × reference pair, another protocol's case)
                if e.status in PASSED and not must:
                    sym, cls = "✓", "ok"
                elif e.status == Status.SKIPPED:
                    sym, cls = ("–" if SKIPPED_AFTER_HANDSHAKE in e.text else "?"), "unk"
                else:
                    sym, cls = "✕", "known" if e.status == Status.XFAIL and not must else "bad"
                link = html.escape(_rel(e.logdir, outdir)) if e.logdir else ""
                cap = f" <a href='{html.escape(_rel(e.pcap, outdir))}'>pcap</a>" if e.pcap else ""
                note = f" <small>({len(fails)} rule{'s' if len(fails) != 1 else ''} failed)</small>" if fails else ""
                title = html.escape(e.text)
                mark = (
                    f"<a class='{cls}' href='{link}' title='{title}'>{sym}</a>"
                    if link
                    else f"<span class='{cls}' title='{title}'>{sym}</span>"
                )
                lines.append(f"{mark} {html.escape(case)}{cap}{note}")
            out.append("<td>" + "<br>".join(lines) + "</td>")
        out.append("</tr>")
    out.append("</table>")

    failed_runs = [e for e in interop if e.status in FAILED]
    if failed_runs:
        out.append("<h2>Failed runs</h2><table><tr><th>run</th><th>status</th><th>why</th></tr>")
        for e in failed_runs:
            cls = "known" if e.status == Status.XFAIL else "bad"
            out.append(
                f"<tr><td>{_link(e.key.removeprefix('interop/'), e.logdir, outdir)}{_pcap(e, outdir)}</td>"
                f"<td class='{cls}'>{e.status}</td><td>{html.escape(e.text)}{_details(e.detail)}</td></tr>"
            )
        out.append("</table>")

    failing = [e for e in entries if e.status in FAILED and not e.key.startswith(("interop/", "active/"))]
    if failing:
        out.append(
            "<h2>Rule violations and findings</h2><table><tr><th>test</th><th>grade</th><th>§</th>"
            "<th>status</th><th>details</th></tr>"
        )
        for e in failing:
            det = "<br>".join(html.escape(v) for v in e.violations[:8]) or html.escape(e.message)
            cls = "known" if e.status == Status.XFAIL else "bad"
            out.append(
                f"<tr><td><code>{html.escape(e.key)}</code></td><td>{e.grade}</td><td>{html.escape(e.section)}</td>"
                f"<td class='{cls}'>{e.status}</td><td>{det}</td></tr>"
            )
        out.append("</table>")
    active = [e for e in entries if e.key.startswith("active/")]
    if active:
        out.append(
            "<h2>Active tester</h2><table>"
            "<tr><th>stack</th><th>probe</th><th>§</th><th>result</th><th>details</th></tr>"
        )
        for e in active:
            cls = {Status.PASSED: "ok", Status.FAILED: "bad", Status.XFAIL: "known"}.get(e.status, "unk")
            links = (
                (f" <a href='{html.escape(_rel(e.log, outdir))}'>log</a>" if e.log else "")
                + (f" <a href='{html.escape(_rel(e.logdir, outdir))}'>files</a>" if e.logdir else "")
                + _pcap(e, outdir)
            )
            out.append(
                f"<tr><td>{html.escape(e.parts[1])}</td><td><code>{html.escape('/'.join(e.parts[2:]))}</code>{links}</td>"
                f"<td>{html.escape(e.section)}</td><td class='{cls}'>{SYMBOL.get(e.status, '?')} {e.status}</td>"
                f"<td>{html.escape(e.text or '; '.join(e.violations))}{_details(e.detail)}</td></tr>"
            )
        out.append("</table>")
    return "\n".join(out)


def _link(text: str, path: str, outdir: Path) -> str:
    if not path:
        return f"<code>{html.escape(text)}</code>"
    return f"<a href='{html.escape(_rel(path, outdir))}'><code>{html.escape(text)}</code></a>"


def _pcap(e: Entry, outdir: Path) -> str:
    return f" <a href='{html.escape(_rel(e.pcap, outdir))}'>pcap</a>" if e.pcap else ""


def _details(lines: list[str]) -> str:
    if not lines:
        return ""
    body = html.escape("\n".join(lines))
    return f"<details><summary>details</summary><pre>{body}</pre></details>"
