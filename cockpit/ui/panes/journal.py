"""The journal pane: a Line-API view that renders only the rows on screen.

Textual's Log and RichLog were 3x to 100x slower on a million lines (NOTES.md); this view
keeps plain rows in a list, builds a Strip for a row only when it is visible, and takes
lines in batches. New lines never move the view while the user reads older ones: following
stops when they scroll up, and the border counts what arrived since.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.systemd.entry import JournalEntry

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def display_text(message: str) -> str:
    """What a terminal would show: the last `\\r` segment, tabs expanded, controls made visible."""
    if "\r" in message:
        segments = [s for s in message.split("\r") if s]
        message = segments[-1] if segments else ""
    if "\t" in message:
        message = message.expandtabs(8)
    return _CONTROL.sub("\ufffd", message)


@dataclass(slots=True)
class Row:
    text: str
    time_us: int | None
    priority: int
    pid: int | None


class JournalView(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("j,down", "scroll_lines(1)", "Down", show=False, id="journal.down"),
        Binding("k,up", "scroll_lines(-1)", "Up", show=False, id="journal.up"),
        Binding("g,home", "top", "Top", show=False, id="journal.top"),
        Binding("G,end", "bottom", "Bottom", key_display="G", id="journal.bottom"),
        Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False, id="journal.page_down"),
        Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False, id="journal.page_up"),
        Binding("f", "toggle_follow", "Follow", id="journal.follow"),
        Binding("T", "toggle_time", "Times", id="journal.times"),
    ]
    COMPONENT_CLASSES = {"journal--time", "journal--err", "journal--warn", "journal--dim"}

    follow: reactive[bool] = reactive(True)
    show_time: reactive[bool] = reactive(True)

    def __init__(self, window: int = 200_000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.rows: list[Row] = []
        self.unread = 0
        self._widest = 0

    # -- data -----------------------------------------------------------------------------

    def append_entries(self, entries: list[JournalEntry]) -> None:
        rows = [Row(display_text(e.message), e.realtime_us, e.priority, e.pid) for e in entries]
        self.rows.extend(rows)
        dropped = 0
        if len(self.rows) > self.window:
            dropped = len(self.rows) - self.window + self.window // 10  # drop in chunks, not per line
            del self.rows[:dropped]
        self._widest = max([self._widest, *(len(r.text) for r in rows)]) if rows else self._widest
        self._resize()
        if self.follow:
            self.scroll_end(animate=False, immediate=True)
        else:
            self.unread += len(rows)
            if dropped:
                self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        self._update_title()
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self._widest + self._prefix_width(), len(self.rows))

    def _prefix_width(self) -> int:
        return 16 if self.show_time else 0

    def _update_title(self) -> None:
        self.border_subtitle = (f"▼ {self.unread} new line{'s' * (self.unread != 1)} · f to follow"
                                if self.unread and not self.follow else ("following" if self.follow else "paused"))

    # -- rendering ------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row = self.rows[index]
        base = self.rich_style
        if row.priority <= 3:
            base = base + self.get_component_rich_style("journal--err")
        elif row.priority == 4:
            base = base + self.get_component_rich_style("journal--warn")
        segments = []
        if self.show_time:
            stamp = time.strftime("%b %d %H:%M:%S ", time.localtime(row.time_us / 1e6)) if row.time_us else " " * 16
            segments.append(Segment(stamp, base + self.get_component_rich_style("journal--time")))
        prefix = self._prefix_width()
        start = max(0, scroll_x - prefix)
        text = row.text[start:start + width * 2]  # crop before building segments: lines can be 100 KB
        segments.append(Segment(text, base))
        strip = Strip(segments)
        crop_from = min(scroll_x, prefix)
        return strip.crop(crop_from, crop_from + width).extend_cell_length(width, base)

    # -- actions --------------------------------------------------------------------------

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.unread = 0
            self.scroll_end(animate=False)
        self._update_title()

    def watch_show_time(self) -> None:
        self._resize()
        self.refresh()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        at_bottom = new >= self.max_scroll_y
        if at_bottom and not self.follow and self.unread:
            self.follow = True
        elif new < old and not at_bottom and self.follow:
            self.follow = False

    def action_scroll_lines(self, n: int) -> None:
        self.scroll_to(y=self.scroll_y + n, animate=False)

    def action_page(self, direction: int) -> None:
        self.scroll_to(y=self.scroll_y + direction * max(1, self.size.height - 1), animate=False)

    def action_top(self) -> None:
        self.follow = False
        self.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.follow = True

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_toggle_time(self) -> None:
        self.show_time = not self.show_time
