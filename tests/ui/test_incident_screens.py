"""The incident note and the screenshots written from the app's memory (no host): the files, the
PNG's leading spaces (checked against rsvg-convert without the fix), the last load run."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import zlib
from pathlib import Path

from textual.widgets import Footer

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.png import monospace, png_facts, preserve_spaces
from cockpit.ui.screenshot import write_incident
from tests.conftest import ROOT
from tests.ui.test_app_shell import recorded_status
from tests.unit.test_incident import crash8, fences, journal_tracebacks, section


def png_pixels(data: bytes, rows: int) -> tuple[int, list[bytes]]:
    """(width, the first `rows` rows of RGBA pixels) of an 8-bit RGBA PNG, decoded here."""
    width, height, _ = png_facts(data)
    assert data[24:26] == b"\x08\x06", "8-bit RGBA expected"
    idat, i = b"", 8
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "big")
        if data[i + 4 : i + 8] == b"IDAT":
            idat += data[i + 8 : i + 8 + n]
        i += 12 + n
    stride = width * 4
    raw = zlib.decompressobj().decompress(idat, (stride + 1) * rows)
    out: list[bytes] = []
    prev = bytearray(stride)
    for r in range(rows):
        kind, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1 : (r + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - 4] if x >= 4 else 0
            b, c = prev[x], prev[x - 4] if x >= 4 else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line))
        prev = line
    return width, out


def leading_space_cell(svg: str) -> tuple[int, int, int, int, int]:
    """(x0, x1, y0, y1, cell width) in pixels of the first text element of the screen that starts
    with a space followed by a letter: the cell of that space."""
    tx, ty = map(float, re.search(r'<g transform="translate\(([\d.]+),\s*([\d.]+)\)" clip-path', svg).groups())
    m = re.search(
        r'<text class="[^"]+" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"[^>]*>&#160;(\w[^<]*)</text>', svg
    )
    x, y, length, rest = float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4)
    cell = length / (1 + len(rest.replace("&#160;", " ")))
    return int(tx + x + 2), int(tx + x + cell - 2), int(ty + y - 14), int(ty + y + 2), int(cell)


def ink(rows: list[bytes], x0: int, x1: int, y0: int, y1: int) -> bool:
    """Whether the box holds more than one colour (a glyph's pixels)."""
    return len({rows[y][4 * x : 4 * x + 4] for y in range(y0, y1) for x in range(x0, x1)}) > 1


def check_png(folder: Path, name: str) -> None:
    """A real PNG of the SVG's size, made by rsvg-convert, whose leading spaces are kept."""
    svg = (folder / f"{name}.svg").read_text()
    png = (folder / f"{name}.png").read_bytes()
    width, height, texts = png_facts(png)
    view = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups()
    assert (width, height) == (round(float(view[0])), round(float(view[1])))
    assert texts["Software"].startswith("rsvg-convert ")
    x0, x1, y0, y1, cell = leading_space_cell(svg)
    _, rows = png_pixels(png, y1 + 1)
    assert not ink(rows, x0, x1, y0, y1), "the leading space of a text element was dropped"
    assert ink(rows, x0 + cell, x1 + cell, y0, y1), "the letter after the space is missing"


async def _recorded_incident(out: Path) -> Path:
    _, entries = crash8()
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(headless=True, size=(160, 50)) as pilot:
        app.query_one(StatusPane).show_status(recorded_status())
        app.query_one(JournalView).append_entries(entries)
        footer = app.query_one(Footer)
        for _ in range(100):  # the footer is composed after the first layout; on a busy machine, later
            await pilot.pause()
            if any(key.region.width for key in footer.query("FooterKey")):
                break
        return await write_incident(app, app.session, out)


def test_the_png_keeps_leading_spaces_which_rsvg_drops_without_the_fix(tmp_path: Path) -> None:
    """The control: the same SVG converted without `xml:space="preserve"` shifts the text left."""
    asyncio.run(_recorded_incident(tmp_path))
    [folder] = list(tmp_path.glob("*/*/*"))
    check_png(folder, "screen")
    svg = (folder / "screen.svg").read_text()
    broken = svg.replace(' xml:space="preserve"', "")
    assert preserve_spaces(broken) == svg
    png = subprocess.run(
        ["rsvg-convert", "--format", "png"], input=monospace(broken).encode(), capture_output=True, check=True
    ).stdout
    x0, x1, y0, y1, _ = leading_space_cell(svg)
    _, rows = png_pixels(png, y1 + 1)
    assert ink(rows, x0, x1, y0, y1)  # rsvg drew the next letter where the space belongs


def test_write_incident_from_the_apps_memory_when_it_has_no_host(tmp_path: Path) -> None:
    folder = asyncio.run(_recorded_incident(tmp_path))
    assert folder.parent == tmp_path / "cockpit-lab" / "sglang-demo.service"
    assert re.fullmatch(r"\d{8}-\d{6}", folder.name)
    assert sorted(p.name for p in folder.iterdir()) == ["incident.md", "screen.png", "screen.svg", "screen.txt"]
    text = (folder / "screen.txt").read_text()
    assert len(text.splitlines()) == 50 and "tracebacks (8)" in text
    assert "Keys" in text.splitlines()[-1]  # the footer's keys: the whole screen was captured
    assert " active (running)   sglang-demo.service on cockpit-lab   ready ✓" in text
    objects, _ = crash8()
    note = (folder / "incident.md").read_text()
    assert fences(section(note, "Tracebacks")) == ["\n".join(t) + "\n" for t in journal_tracebacks(objects)]
    assert "![the cockpit's screen](screen.png)" in note and "[SVG](screen.svg)" in note
    assert "Period: the journal the cockpit held in memory" in note


def test_the_note_written_by_S_carries_the_last_load_run(tmp_path: Path) -> None:
    from cockpit.load.store import save_run

    save_run(
        "cockpit-lab", "sglang-demo.service", json.loads((ROOT / "tests" / "data" / "runs" / "eagle.json").read_text())
    )
    folder = asyncio.run(_recorded_incident(tmp_path))
    note = (folder / "incident.md").read_text()
    assert "## Load run" in note and "| concurrency" in section(note, "Load run").lower()
