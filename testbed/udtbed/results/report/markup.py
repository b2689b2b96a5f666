"""What the report's sections share: the page's style, escaping and numbers as text, a part's
anchor (the summary links down to it), how a sweep's option reads and which stack a flow ran."""

from __future__ import annotations

import html

from ..results import ExperimentResult, PartResult

# The page's style; its classes (ok, bad, dev, inc, note, small, mark, iv) are what every section marks with.
CSS = """body{font-family:sans-serif;max-width:1250px;margin:1.5em auto;padding:0 .5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.bad{color:#b00}.ok{color:#070}.dev{color:#950}.inc{color:#555}
.note{color:#555}img{max-width:100%}td.l,th.l{text-align:left}.mark{font-weight:bold}
table.summary td.ok{background:#eef8ee}table.summary td.bad{background:#fbeaea}table.summary td.dev{background:#fdf3dc}
table.summary td.inc{background:#f0f0f0}.iv{display:block}ul.headline{font-size:110%}
table.summary{font-size:88%}table.summary td.l{min-width:6em}.small{font-size:85%}"""

# How a sweep's option reads: its name, the divisor from the experiment's value to the unit, the unit.
SWEEP_UNITS = {
    "rate": ("sending rate", 1.0, "Mb/s"),
    "udp_buffer": ("UDP buffer", 1024, "KB"),
    "frtp_buffer": ("FRTP buffer", 1e6, "MB"),
}


def fmt(x: float | None, nd: int = 1) -> str:
    """A number with ``nd`` decimals; – for none."""
    return "–" if x is None else f"{x:.{nd}f}"


def esc(s: object) -> str:
    """Anything as HTML text, escaped."""
    return html.escape(str(s))


def anchor(exp: ExperimentResult, part: PartResult) -> str:
    """The id of a part's section, which the summary's rows link to."""
    return f"{exp.experiment}--{part.label}"


def flow_stack(part: PartResult, flow: str) -> str:
    """' (tcp-cubic)' when ``flow`` ran a stack of its own beside the stacks under test."""
    for name, r in part.stacks.items():
        f = next((f for f in r.flows if f.name == flow), None)
        if f is not None and f.stack and f.stack != name:
            return f" ({f.stack})"
    return ""
