"""Screenshots of the cockpit (SVG, PNG and plain text) and the incident folder they go in.

The screen is rendered once, through the same compositor call as `App.export_screenshot`, into
a recording console that gives both the SVG and the text; cockpit.ui.png makes the PNG. The
incident note's facts come from the session, never from the app's widgets: this module reads
the screen of any Textual app and imports no app.

The folder of one incident: `~/cockpit-incidents/<host>/<unit>/<YYYYmmdd-HHMMSS>/` by default
(`$COCKPIT_INCIDENT_DIR` or the caller's root instead of `~/cockpit-incidents`).
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.app import App

from cockpit.errors import CockpitError
from cockpit.incident import Image, render
from cockpit.session import Session
from cockpit.ui.inert import Scrubbed
from cockpit.ui.png import PngError, preserve_spaces, svg_to_png

NOTE_NAME = "incident.md"


class ScreenshotError(CockpitError):
    pass


@dataclass(frozen=True)
class Capture:
    svg: str
    text: str


def default_root() -> Path:
    return Path(os.environ.get("COCKPIT_INCIDENT_DIR") or "~/cockpit-incidents").expanduser()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name) or "_"


def incident_dir(host: str, unit: str, root: Path | str | None = None, when: float | None = None) -> Path:
    """A new, empty folder `<root>/<host>/<unit>/<YYYYmmdd-HHMMSS>` (`-2`, `-3`... if taken)."""
    base = (Path(root).expanduser() if root is not None else default_root()) / _safe(host) / _safe(unit)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when if when is not None else time.time()))
    base.mkdir(parents=True, exist_ok=True)
    for k in range(1, 1000):
        folder = base / (stamp if k == 1 else f"{stamp}-{k}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise ScreenshotError(f"too many incident folders named {stamp} under {base}")


# -- the screen as SVG and text -----------------------------------------------------------------


def capture(app: App[Any], title: str | None = None) -> Capture:
    """The current screen (with the screens below a modal, as Textual composes them)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    try:
        update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    except AttributeError:  # a Textual that moved its internals: the public SVG, no text
        return Capture(app.export_screenshot(title=title), "")
    if update is not None:  # None only for a partial update
        console.print(Scrubbed(update))
    rows = [line.rstrip() for line in console.export_text(clear=False, styles=False).splitlines()]
    rows += [""] * (height - len(rows))  # a blank bottom row is still a row of the screen
    return Capture(console.export_svg(title=title or app.title), "\n".join(rows[:height]) + "\n")


# -- saving -------------------------------------------------------------------------------------


async def save_screen(
    app: App[Any], folder: Path, name: str = "screen", label: str | None = None, problems: list[str] | None = None
) -> Image:
    """`<name>.svg`, `<name>.png` and `<name>.txt` of the current screen, in `folder`. A PNG
    that cannot be made is named in `problems` (the SVG and text are still written)."""
    shot = capture(app)
    await asyncio.to_thread(_write_screen, folder, name, shot)
    image = Image(label or name, "", svg=f"{name}.svg", text=f"{name}.txt")
    try:
        png, converter = await svg_to_png(shot.svg)
    except PngError as e:
        if problems is not None:
            problems.append(f"the PNG of {label or name}: {e}")
        return image
    await asyncio.to_thread((folder / f"{name}.png").write_bytes, png)
    image.path, image.converter = f"{name}.png", converter
    return image


def _write_screen(folder: Path, name: str, shot: Capture) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.svg").write_text(preserve_spaces(shot.svg), encoding="utf-8")
    (folder / f"{name}.txt").write_text(shot.text, encoding="utf-8")


async def write_incident(
    app: App[Any], session: Session, out_dir: Path | str | None = None, *, since: str | None = None
) -> Path:
    """Screenshot the screen as it is now, then write the note the session gathers beside it;
    returns the folder (`<out_dir or ~/cockpit-incidents>/<host>/<unit>/<YYYYmmdd-HHMMSS>/`)."""
    target = session.target
    folder = await asyncio.to_thread(
        incident_dir, target.host if target else "-", target.unit if target else "no-unit", out_dir
    )
    problems: list[str] = []
    image = await save_screen(app, folder, "screen", "the cockpit's screen", problems)
    incident = await session.incident(since)
    incident.images = [image]
    if target is not None and incident.load_run is None:  # the table `cockpit snapshot --load-run` gives
        runs = await asyncio.to_thread(session.saved_runs)
        if runs:
            incident.load_run = runs[-1].record
    incident.problems += problems
    await asyncio.to_thread((folder / NOTE_NAME).write_text, render(incident), encoding="utf-8")
    return folder
