"""Screenshots by headless Chromium (udtbed.results.screenshot): a report page's top, the progress display."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from PIL import Image  # a dependency of matplotlib
from udtbed.results import screenshot
from udtbed.results.screenshot import ScreenshotError, find_chromium


def chromium_missing() -> str | None:
    try:
        find_chromium()
    except ScreenshotError as e:
        return str(e)
    return None


needs_chromium = pytest.mark.skipif(chromium_missing() is not None, reason=f"needs Chromium: {chromium_missing()}")

PAGE = """<!doctype html><meta charset="utf-8">
<style>body{font-family:sans-serif;margin:16px} td,th{border:1px solid #999;padding:4px 12px}
.pass{background:#cfc} .fail{background:#fcc}</style>
<h1>udt-testbed report</h1>
<table><tr><th>experiment</th><th>measured</th><th>paper</th><th></th></tr>
<tr><td>efficiency</td><td>941 Mb/s</td><td>940 Mb/s</td><td class="pass">within band</td></tr>
<tr><td>fairness</td><td>0.91</td><td>0.99</td><td class="fail">outside band</td></tr></table>
<div style="height:5000px"></div><p>far below the fold</p>
"""


def colours(png: Path) -> tuple[tuple[int, int], dict[tuple[int, int, int], int]]:
    """The PNG's size and its colours with their pixel counts."""
    with Image.open(png) as im:
        assert im.format == "PNG"
        rgb = im.convert("RGB")
    counts = rgb.getcolors(maxcolors=rgb.width * rgb.height)
    assert counts is not None
    # Pillow types a pixel by any mode's (a tuple of any length, or one number); in RGB it is a triple.
    return rgb.size, {cast(tuple[int, int, int], colour): n for n, colour in counts}


@needs_chromium
def test_report_screenshot_is_the_top_of_the_page_at_the_requested_size(tmp_path: Path) -> None:
    page, out = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(PAGE)
    assert screenshot.main(["report", str(page), str(out), "--width", "640", "--height", "360"]) == 0
    size, palette = colours(out)
    assert size == (640, 360)  # clipped to the top, though the page is 5000 px tall
    assert len(palette) > 20  # text antialiasing, the table's fills: not a blank page
    assert palette.get((204, 255, 204), 0) > 500  # the green "within band" cell is in view


@needs_chromium
def test_progress_screenshot_shows_a_drawn_terminal(tmp_path: Path) -> None:
    out = tmp_path / "progress.png"
    assert screenshot.main(["progress", str(out), "--width", "800"]) == 0
    (width, height), palette = colours(out)
    assert width == 800 and 100 < height < 400
    assert len(palette) > 20
    # the terminal window (rich's dark theme) fills most of the picture
    dark = sum(n for (r, g, b), n in palette.items() if r + g + b < 160)
    assert dark > width * height // 2


def test_progress_svg_is_offline_and_shows_the_frame() -> None:
    svg = screenshot.progress_svg()
    assert "cdnjs" not in svg and "@font-face" not in svg
    for text in ("udtbed", "efficiency", "chicago-local", "calibration", "step", "3/21", "ETA"):
        assert text in svg


def test_missing_chromium_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CHROMIUM", raising=False)
    with pytest.raises(ScreenshotError, match=r"chromium not found.*apt-get install chromium"):
        find_chromium()
    page = tmp_path / "p.html"
    page.write_text(PAGE)
    assert screenshot.main(["report", str(page), str(tmp_path / "p.png")]) == 1


@needs_chromium
def test_a_shot_lower_than_chromium_paints_is_painted_to_the_bottom(tmp_path: Path) -> None:
    page, out = tmp_path / "black.html", tmp_path / "black.png"
    page.write_text('<style>body{margin:0;background:#000}</style><div style="height:2000px"></div>')
    screenshot.screenshot_html(page, out, width=300, height=100)
    size, palette = colours(out)
    assert size == (300, 100) and palette == {(0, 0, 0): 300 * 100}
