"""The app's one boundary for host text: nothing it draws can drive the terminal.

Host text reaches the screen through dozens of widgets (the journal, titles, modals, toasts,
the stacks and fleet screens), so escaping it at each one missed some: a process named
`/opt/evil/<ESC>]2;PWNED<BEL>py` set the tmux pane title from the `k` confirmation. Two hooks
cover every widget instead:

- Rich's `Text` and Textual's `Content` pass every string they are given through a filter of
  their own, which drops BEL, BS, VT, FF and CR but lets ESC and the C1 controls through.
  That filter is replaced by `cockpit.printable`, so every control is drawn as its escape
  (`\\x1b`), visible, and measured at its drawn width before the layout places it.
- The last step before the terminal, `Strip.render`, drops any control character still in a
  segment's text (one built as a raw `Segment`, by a widget of Textual's or ours) and any link
  whose address holds one: those have zero width, so dropping them keeps every column where
  the layout put it. A screenshot renders the same strips into a recording console instead
  (cockpit.ui.screenshot), through `Scrubbed`: one control byte there made the SVG invalid XML.

Both are Textual's and Rich's private names; textual and rich are pinned (constraints.txt), and
tests/ui/test_inert.py fails when an upgrade moves them.
"""

from __future__ import annotations

import re
from functools import partial

import rich.text
import textual.content
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from textual.strip import Strip

from cockpit.printable import printable

# what a terminal takes as a control (C0, DEL, C1) or as a reordering of what it shows; a
# newline is the line break between a screenshot's rows
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _scrubbed(segment: Segment) -> Segment:
    text, style, control = segment
    if _UNSAFE.search(text):
        text = _UNSAFE.sub("", text)
    if style is not None and style.link and _UNSAFE.search(style.link):
        style = style.update_link(None)
    return Segment(text, style, control)


def _needs_scrub(segment: Segment) -> bool:
    """A control segment (Rich's cursor moves) is the renderer's own and is left as it is."""
    text, style, control = segment
    if control:
        return False
    return bool(_UNSAFE.search(text) or (style is not None and style.link and _UNSAFE.search(style.link)))


class Scrubbed:
    """A renderable's segments as `Strip.render` lets them through to a terminal."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            yield _scrubbed(segment) if _needs_scrub(segment) else segment


def install() -> None:
    """Put both hooks in place (once per process; the app calls it before its first frame)."""
    if getattr(Strip.render, "cockpit_inert", False):
        return
    shown = partial(printable, lines=True)
    rich.text.strip_control_codes = shown
    textual.content._strip_control_codes = shown
    render = Strip.render

    def guarded(self: Strip, console: Console) -> str:
        if self._render_cache is None and any(_needs_scrub(s) for s in self._segments):
            self._segments = [_scrubbed(s) if _needs_scrub(s) else s for s in self._segments]
        return render(self, console)

    guarded.cockpit_inert = True  # type: ignore[attr-defined]
    Strip.render = guarded  # type: ignore[method-assign]
