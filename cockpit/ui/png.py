"""SVG to PNG for the cockpit's screenshots, offline (docs/facts.md):
- `rsvg-convert` (Debian's librsvg2-bin, about 0.1 s) drops leading spaces of a text element
  unless the root `<svg>` carries `xml:space="preserve"`: Rich writes `" on host"` as one text
  element, so without it the words shift left and overlap their neighbours.
- cairosvg, used only when rsvg-convert is missing and cairosvg is installed, picks a
  proportional font for the unknown "Fira Code" unless the family is rewritten to a
  monospace one.
For both converters the terminal text's family is set to "DejaVu Sans Mono" (Debian's
fonts-dejavu-core), so the PNG does not depend on which fonts happen to be installed. The PNG
carries a `Software` text chunk naming the converter. No Textual here: the screen is made by
cockpit.ui.screenshot, the picture by this module.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import struct
import zlib

from cockpit.errors import CockpitError
from cockpit.timeouts import within

MONOSPACE = '"DejaVu Sans Mono", monospace'
CONVERT_TIMEOUT_S = 60.0


class PngError(CockpitError):
    pass


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
        out, err = await within(proc.communicate(svg.encode()), CONVERT_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise PngError(f"rsvg-convert took more than {CONVERT_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0 or not out.startswith(PNG_SIGNATURE):
        raise PngError(f"rsvg-convert failed: {err.decode(errors='replace').strip() or proc.returncode}")
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
    raise PngError("no SVG to PNG converter: install rsvg-convert (Debian: apt-get install librsvg2-bin)")


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def with_text_chunk(png: bytes, key: str, value: str) -> bytes:
    """The PNG with a tEXt chunk after its header (readers ignore what they do not know)."""
    if not png.startswith(PNG_SIGNATURE) or png[12:16] != b"IHDR":
        raise PngError("the converter wrote something that is not a PNG")
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
