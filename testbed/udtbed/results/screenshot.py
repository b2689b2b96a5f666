"""Screenshots of what a user sees, taken by headless Chromium: the top of a report page
(where its summary is) and the live progress display.

    python -m udtbed.results.screenshot report REPORT_HTML OUT_PNG [--width 1200] [--height 900]
    python -m udtbed.results.screenshot progress OUT_PNG [--width 1000]

``progress`` plays a short scripted run (a fake clock, a few steps and log lines) through
``udtharness.progress.Progress`` into a recording rich console, exports the frame as SVG and
renders that to PNG. Both need Debian's ``chromium`` (``ci/setup.sh`` installs it, with
``fonts-dejavu-core`` for the terminal font); ``CHROMIUM=/path/to/chrome`` picks another
binary. Chromium runs with ``--no-sandbox`` (CI runs as root) and a throwaway profile, and
draws at a device scale factor of 1, so a PNG is exactly ``width`` x ``height`` pixels.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from udtharness.progress import Progress

__all__ = ["ScreenshotError", "find_chromium", "rendered_dom", "screenshot_html", "screenshot_progress", "progress_svg"]

INSTALL_HINT = "install Debian's chromium (apt-get install chromium fonts-dejavu-core, or run ci/setup.sh as root)"


# Headless Chromium (156) paints only the top `height - 87` pixels of a window less than about
# 150 pixels high; smaller shots are taken in a taller window and cropped.
MIN_WINDOW_HEIGHT = 240


class ScreenshotError(RuntimeError):
    """A screenshot could not be taken; the message says why and what to do."""


def find_chromium() -> str:
    """The Chromium binary: ``$CHROMIUM``, else ``chromium`` / ``chromium-browser`` / ``google-chrome`` on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        found = shutil.which(env)
        if found is None:
            raise ScreenshotError(f"CHROMIUM={env} is not an executable")
        return found
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise ScreenshotError(f"chromium not found on PATH: {INSTALL_HINT}, or set CHROMIUM=/path/to/chrome")


def screenshot_html(page: Path, out: Path, *, width: int = 1200, height: int = 900, timeout: float = 60.0) -> None:
    """The top ``width`` x ``height`` pixels of ``page`` (a local HTML file) as PNG in ``out``."""
    if not page.is_file():
        raise ScreenshotError(f"{page}: no such file")
    chromium = find_chromium()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="udtbed-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",  # root in CI: Chromium refuses to start sandboxed as root
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",  # no profile lock shared with another run
            f"--window-size={width},{max(height, MIN_WINDOW_HEIGHT)}",
            f"--screenshot={out}",
            page.resolve().as_uri(),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise ScreenshotError(f"chromium took more than {timeout:.0f} s for {page}") from e
    if proc.returncode != 0 or not out.is_file():
        # Chromium logs harmless D-Bus complaints on machines without a session bus; keep the rest.
        noise = re.compile(r"dbus|Fontconfig|bytes written to file")
        why = [line for line in proc.stderr.splitlines() if not noise.search(line)][-5:]
        raise ScreenshotError(f"chromium failed (exit {proc.returncode}) on {page}: " + " / ".join(why))
    if height < MIN_WINDOW_HEIGHT:
        from PIL import Image  # a dependency of matplotlib

        with Image.open(out) as im:
            top = im.crop((0, 0, width, height))
        top.save(out)


def rendered_dom(url: str, *, width: int = 1280, height: int = 900, timeout: float = 60.0) -> str:
    """The DOM of ``url`` after its scripts ran in a ``width`` x ``height`` window, as headless
    Chromium serialises it."""
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="udtbed-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]
        cmd += [f"--window-size={width},{height}", "--force-device-scale-factor=1"]
        cmd += [f"--user-data-dir={profile}", "--dump-dom", url]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise ScreenshotError(f"chromium took more than {timeout:.0f} s for {url}") from e
    if proc.returncode != 0:
        raise ScreenshotError(f"chromium failed (exit {proc.returncode}) on {url}: {proc.stderr[-500:]}")
    return proc.stdout


# --- the progress display --------------------------------------------------

# The first steps of `make testbed` (DURATION=20) with the lines the runner logs in them, as a
# run on the 2-core machine printed them (udtbed.experiments.runner).
_PLAN: list[tuple[str, float, float, list[str]]] = [
    (
        "efficiency / chicago-local: build, calibrate",
        8.0,
        6.0,
        [
            "== efficiency / chicago-local: building chicago-local (scale 0.1, linkem)",
            "  calibration chicago->local: RTT 0.234 ms (want 0.040); rate 100.0 Mb/s (want 100.0, -0.03%) [ok]",
        ],
    ),
    (
        "efficiency / chicago-local / udt-rs",
        22.0,
        23.0,
        [
            "  -- udt-rs: 20 s",
            "     local 92.4 Mb/s; stability 0.081",
            "     ✓ time_to_90pct_s(local) <= 15: 8 (want <= 15)",
            "     ✓ mean_mbps(local, after 15 s) >= 0.85 x capacity: 94.1 (want >= 85)",
        ],
    ),
    ("efficiency / chicago-local / libudt", 22.0, 0.0, ["  -- libudt: 20 s"]),
]
_STEPS = 4 * (1 + 4) + 1  # the default experiments' parts, each calibrated, then four stacks
_TOTAL = 1160.0  # their planned seconds at DURATION=20


def progress_svg(*, width: int = 100) -> str:
    """The progress display early in a `make testbed` run, as rich's SVG terminal export.

    The console records but is not interactive, so the live region is not redrawn into the
    recording on every log line: the recording holds the log lines, then the frame printed
    once at the moment of the screenshot.
    """
    now = [0.0]
    console = Console(
        record=True,
        file=io.StringIO(),
        width=width,
        force_terminal=True,
        force_interactive=False,
        color_system="truecolor",
    )
    title = "udtbed run 20261123-031507: efficiency, fairness, join, friendliness"
    progress = Progress(title, _TOTAL, steps=_STEPS, console=console, clock=lambda: now[0])
    with progress:
        for label, weight, took, lines in _PLAN:
            progress.step(label, weight)
            for line in lines:
                progress.log(line)
            now[0] += took
            progress.advance(min(took, weight))
        now[0] += 9.0
        progress.advance(9.0)
        console.print(progress)
        svg = console.export_svg(title="make testbed")
    # Offline and deterministic: no web font from a CDN; DejaVu Sans Mono (fonts-dejavu-core)
    # has the box-drawing glyphs of the bar.
    svg = re.sub(r"@font-face\s*\{[^}]*\}", "", svg)
    return svg.replace("font-family: Fira Code, monospace", 'font-family: "DejaVu Sans Mono", monospace')


def screenshot_progress(out: Path, *, width: int = 1000, timeout: float = 60.0) -> None:
    """The progress display (``progress_svg``) as a PNG ``width`` pixels wide, height to scale."""
    svg = progress_svg()
    match = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    if match is None:
        raise ScreenshotError("rich's SVG export has no viewBox")
    vb_width, vb_height = float(match[1]), float(match[2])
    height = round(width * vb_height / vb_width)
    page = (
        '<!doctype html><meta charset="utf-8">'
        "<style>html,body{margin:0;background:#f4f5f7}svg{display:block;width:100%;height:auto}</style>" + svg
    )
    with tempfile.TemporaryDirectory(prefix="udtbed-progress-") as tmp:
        html = Path(tmp) / "progress.html"
        html.write_text(page, encoding="utf-8")
        screenshot_html(html, out, width=width, height=height, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m udtbed.results.screenshot", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    rep = sub.add_parser("report", help="the top of an HTML report (its summary)")
    rep.add_argument("report_html", type=Path)
    rep.add_argument("out_png", type=Path)
    rep.add_argument("--width", type=int, default=1200)
    rep.add_argument("--height", type=int, default=900)
    prog = sub.add_parser("progress", help="the live progress display, mid-run (scripted)")
    prog.add_argument("out_png", type=Path)
    prog.add_argument("--width", type=int, default=1000)
    args = ap.parse_args(argv)
    start = time.monotonic()
    try:
        if args.what == "report":
            screenshot_html(args.report_html, args.out_png, width=args.width, height=args.height)
        else:
            screenshot_progress(args.out_png, width=args.width)
    except ScreenshotError as e:
        print(f"udtbed.results.screenshot: {e}", file=sys.stderr)
        return 1
    print(f"{args.out_png} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
