"""Screenshots of the cockpit (SVG, PNG and plain text) and the incident folder they go in.

The screen is rendered once, through the same compositor call as `App.export_screenshot`, into
a recording console that gives both the SVG and the text. The PNG is made offline from the SVG
(docs/facts.md):

- `rsvg-convert` (Debian's librsvg2-bin, about 0.1 s) drops leading spaces of a text element
  unless the root `<svg>` carries `xml:space="preserve"`: Rich writes `" on host"` as one text
  element, so without it the words shift left and overlap their neighbours.
- cairosvg, used only when rsvg-convert is missing and cairosvg is installed, picks a
  proportional font for the unknown "Fira Code" unless the family is rewritten to a
  monospace one.

For both converters the terminal text's family is set to "DejaVu Sans Mono" (Debian's
fonts-dejavu-core), so the PNG does not depend on which fonts happen to be installed. The PNG
carries a `Software` text chunk naming the converter.

The folder of one incident: `~/cockpit-incidents/<host>/<unit>/<YYYYmmdd-HHMMSS>/` by default
(`$COCKPIT_INCIDENT_DIR` or the caller's root instead of `~/cockpit-incidents`).
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from cockpit.attempts import AttemptLog
from cockpit.errors import CockpitError
from cockpit.load.store import load_runs
from cockpit.incident import Image, Incident, attempts_in, gather, render, unit_events

if TYPE_CHECKING:
    from cockpit.ui.app import CockpitApp

MONOSPACE = '"DejaVu Sans Mono", monospace'
CONVERT_TIMEOUT_S = 60.0
GATHER_TIMEOUT_S = 120.0
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


def capture(app: CockpitApp, title: str | None = None) -> Capture:
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
    console.print(update)
    text = "\n".join(line.rstrip() for line in console.export_text(clear=False, styles=False).splitlines())
    return Capture(console.export_svg(title=title or app.title), text.rstrip("\n") + "\n")


def preserve_spaces(svg: str) -> str:
    """`xml:space="preserve"` on the root element, so renderers keep leading spaces."""
    return re.sub(r"<svg\b(?![^>]*\bxml:space=)", '<svg xml:space="preserve"', svg, count=1)


def monospace(svg: str, family: str = MONOSPACE) -> str:
    """The terminal text's font-family set to a monospace font that is installed."""
    return re.sub(r"(\.[\w-]*matrix\s*\{[^}]*?font-family:)[^;}]*", rf"\1 {family}", svg)


# -- SVG to PNG ---------------------------------------------------------------------------------

_rsvg_version: str | None = None


async def _rsvg_name(rsvg: str) -> str:
    global _rsvg_version
    if _rsvg_version is None:
        proc = await asyncio.create_subprocess_exec(
            rsvg, "--version", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        out, _ = await proc.communicate()
        m = re.search(r"(\d+(?:\.\d+)+)", out.decode(errors="replace"))
        _rsvg_version = m.group(1) if m else ""
    return f"rsvg-convert {_rsvg_version}".rstrip()


async def _rsvg(rsvg: str, svg: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        rsvg,
        "--format",
        "png",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(svg.encode()), CONVERT_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise ScreenshotError(f"rsvg-convert took more than {CONVERT_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0 or not out.startswith(PNG_SIGNATURE):
        raise ScreenshotError(f"rsvg-convert failed: {err.decode(errors='replace').strip() or proc.returncode}")
    return out


def _cairosvg():
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        return None
    return cairosvg


async def svg_to_png(svg: str) -> tuple[bytes, str]:
    """(PNG bytes, the converter's name). rsvg-convert first; cairosvg if only it is installed."""
    prepared = monospace(preserve_spaces(svg))
    rsvg = shutil.which("rsvg-convert")
    if rsvg:
        name = await _rsvg_name(rsvg)
        return with_text_chunk(await _rsvg(rsvg, prepared), "Software", name), name
    cairosvg = _cairosvg()
    if cairosvg is not None:
        name = f"cairosvg {getattr(cairosvg, '__version__', '')}".rstrip()
        data = await asyncio.to_thread(cairosvg.svg2png, bytestring=prepared.encode())
        return with_text_chunk(data, "Software", name), name
    raise ScreenshotError("no SVG to PNG converter: install rsvg-convert (Debian: apt-get install librsvg2-bin)")


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def with_text_chunk(png: bytes, key: str, value: str) -> bytes:
    """The PNG with a tEXt chunk after its header (readers ignore what they do not know)."""
    if not png.startswith(PNG_SIGNATURE) or png[12:16] != b"IHDR":
        raise ScreenshotError("the converter wrote something that is not a PNG")
    end = 8 + 12 + struct.unpack(">I", png[8:12])[0]
    text = key.encode("latin-1") + b"\0" + value.encode("latin-1", "replace")
    return png[:end] + _chunk(b"tEXt", text) + png[end:]


def png_facts(png: bytes) -> tuple[int, int, dict[str, str]]:
    """(width, height, tEXt chunks) of a PNG."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", png[16:24])
    texts: dict[str, str] = {}
    i = 8
    while i + 8 <= len(png):
        n = struct.unpack(">I", png[i : i + 4])[0]
        kind = png[i + 4 : i + 8]
        if kind == b"tEXt":
            key, _, value = png[i + 8 : i + 8 + n].partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        i += 12 + n
    return width, height, texts


# -- saving -------------------------------------------------------------------------------------


async def save_screen(
    app: CockpitApp, folder: Path, name: str = "screen", label: str | None = None, problems: list[str] | None = None
) -> Image:
    """`<name>.svg`, `<name>.png` and `<name>.txt` of the current screen, in `folder`. A PNG
    that cannot be made is named in `problems` (the SVG and text are still written)."""
    shot = capture(app)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.svg").write_text(preserve_spaces(shot.svg), encoding="utf-8")
    (folder / f"{name}.txt").write_text(shot.text, encoding="utf-8")
    image = Image(label or name, "", svg=f"{name}.svg", text=f"{name}.txt")
    try:
        png, converter = await svg_to_png(shot.svg)
    except ScreenshotError as e:
        if problems is not None:
            problems.append(f"the PNG of {label or name}: {e}")
        return image
    (folder / f"{name}.png").write_bytes(png)
    image.path, image.converter = f"{name}.png", converter
    return image


def incident_from_app(app: CockpitApp) -> Incident:
    """The note from what the app holds in memory: its status, unit and journal window."""
    target = app.target
    host, unit = (target.host, target.unit) if target else ("-", "no unit")
    model = app.journal_view.model
    tracebacks = [tb for _, tb in reversed(model.tracebacks())]
    records = model.folder.records
    times = [t for r in records for t in ([r.entry.realtime_us] if r.kind == "line" else r.times[:1]) if t]
    incident = Incident(
        host=host,
        unit=unit,
        period="the journal the cockpit held in memory",
        period_start=times[0] / 1e6 if times else None,
        period_end=times[-1] / 1e6 if times else None,
        status=app.status_pane.status,
        tracebacks=tracebacks,
        command=app.unit_model.exec() if app.unit_model is not None else None,
    )
    incident.events = unit_events(r.entry for r in records if r.kind == "line")
    if app.catalog is not None and app.catalog.version:
        incident.version, incident.version_from = app.catalog.version, "the installed package"
    if target is not None:
        incident.attempts = attempts_in(AttemptLog(host, unit).load(), incident.period_start)
    return incident


async def incident_of(app: CockpitApp, since: str | None = None) -> Incident:
    """Read over the app's own connection; what the app holds when the host cannot be read."""
    target = app.target
    if app.live and target is not None:
        try:
            return await asyncio.wait_for(
                gather(app.pool.get(target.host), target, since=since, sources=app.sources, catalogs=app.catalogs),
                GATHER_TIMEOUT_S,
            )
        except (CockpitError, asyncio.TimeoutError) as e:
            incident = incident_from_app(app)
            reason = str(e) or f"no answer within {GATHER_TIMEOUT_S:.0f} s"
            incident.problems.append(
                f"{target.host} could not be read ({reason}): the tracebacks are those the cockpit held in memory"
            )
            return incident
    return incident_from_app(app)


async def write_incident(app: CockpitApp, out_dir: Path | str | None = None, *, since: str | None = None) -> Path:
    """Screenshot the screen as it is now, then write the note beside it; returns the folder
    (`<out_dir or ~/cockpit-incidents>/<host>/<unit>/<YYYYmmdd-HHMMSS>/`)."""
    target = app.target
    folder = incident_dir(target.host if target else "-", target.unit if target else "no-unit", out_dir)
    problems: list[str] = []
    image = await save_screen(app, folder, "screen", "the cockpit's screen", problems)
    incident = await incident_of(app, since)
    incident.images = [image]
    if target is not None and incident.load_run is None:  # the table `cockpit snapshot --load-run` gives
        runs = await asyncio.to_thread(load_runs, target.host, target.unit)
        if runs:
            incident.load_run = runs[-1][1]
    incident.problems += problems
    (folder / NOTE_NAME).write_text(render(incident), encoding="utf-8")
    return folder
