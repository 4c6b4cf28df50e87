"""The journal pane: a Line-API view over the folded journal; it renders only visible rows.

Textual's Log and RichLog were 3x to 100x slower on a million lines (docs/facts.md); this view
keeps a row model (journal_rows.py), builds a Strip for a row only when it is on screen, and
takes entries in batches. Each traceback is one row until Enter unfolds it. New lines never
move the view while the user reads older ones: following stops when they move up, and the
box's title counts what arrived since; the title also says when the feed is not live.
"""

from __future__ import annotations

import re
import time
from math import ceil

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.content import Content
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from cockpit.printable import printable
from cockpit.sglang.server.logparse import ERRORS
from cockpit.systemd.entry import JournalEntry
from cockpit.traceback.grammar import is_frame_line
from cockpit.traceback.journal_rows import MAIN, SEPARATOR, Filter, JournalRows
from cockpit.traceback.model import Line, Traceback
from cockpit.traceback.render import summary
from cockpit.ui.panes.cursor import CursorView

TIME_WIDTH = 16
# a drawn row: record, part, text width, strip width, scroll x, times shown, cursor, search
RowKey = tuple[int, int, int, int, int, bool, bool, "re.Pattern[str] | None"]


def display_text(message: str) -> str:
    """What a terminal would show: the last `\\r` segment, tabs expanded, controls made visible."""
    if "\r" in message:
        segments = [s for s in message.split("\r") if s]
        message = segments[-1] if segments else ""
    if "\t" in message:
        message = message.expandtabs(8)
    return printable(message)


def thumb(size: int, virtual: float, window: float, position: float) -> tuple[int, ...]:
    """Where a vertical scrollbar of `size` cells draws its thumb, in eighths of a cell
    (the arithmetic of Textual's ScrollBarRender.render_bar); a bar with no thumb is ()."""
    if not (window and size and virtual) or size == virtual or virtual <= window:
        return ()
    length = max(1, window / (virtual / size))
    start = int((size - length) * (position / (virtual - window)) * 8)
    return (start, start + ceil(length * 8))


# SGLang's own lines of something gone wrong, which it logs at info: `err` shows them (a graceful
# stop's kill_process_tree is no error).
ERROR_TEXTS = tuple(text for text, kind in ERRORS if kind != "tree_killed")


class JournalView(CursorView):
    BINDINGS = [
        Binding("j,down", "move(1)", "Down", show=False, id="journal.down"),
        Binding("k,up", "move(-1)", "Up", show=False, id="journal.up"),
        Binding("g,home", "top", "Top", show=False, id="journal.top"),
        Binding("G,end", "bottom", "Bottom", key_display="G", show=False, id="journal.bottom"),
        Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False, id="journal.page_down"),
        Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False, id="journal.page_up"),
        Binding("enter", "activate", "Unfold/open", id="journal.activate"),
        Binding("right_square_bracket", "next_traceback(1)", "Next tb", key_display="]", id="journal.next_traceback"),
        Binding(
            "left_square_bracket",
            "next_traceback(-1)",
            "Prev tb",
            key_display="[",
            show=False,
            id="journal.previous_traceback",
        ),
        Binding("z", "fold_all(False)", "Fold all", show=False, id="journal.fold_all"),
        Binding("Z", "fold_all(True)", "Unfold all", show=False, id="journal.unfold_all"),
        Binding("f", "toggle_follow", "Follow", id="journal.follow"),
        Binding("slash", "prompt('search')", "Search", key_display="/", id="journal.search"),
        Binding("n", "search_next(1)", "Next match", show=False, id="journal.search_next"),
        Binding("N", "search_next(-1)", "Prev match", show=False, id="journal.search_previous"),
        Binding("F", "prompt('filter')", "Filter", id="journal.filter"),
        Binding("T", "toggle_time", "Times", show=False, id="journal.times"),
    ]
    COMPONENT_CLASSES = {
        "journal--time",
        "journal--err",
        "journal--warn",
        "journal--traceback",
        "journal--traceback-open",
        "journal--frame",
        "journal--separator",
        "journal--cursor",
        "journal--match",
    }

    follow: reactive[bool] = reactive(True)
    show_time: reactive[bool] = reactive(True)

    class OpenFrame(Message):
        """Enter on a frame line of an unfolded traceback: the source pane opens it."""

        def __init__(self, traceback: Traceback, frame: int) -> None:
            super().__init__()
            self.traceback = traceback
            self.frame = frame

    class Prompt(Message):
        """Ask the pane's container for a line of input (search or filter)."""

        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

    class TracebacksChanged(Message):
        """The set of tracebacks changed. A burst of batches posts many of these; the side list
        needs only the last, so one still queued is replaced by the next."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, JournalView.TracebacksChanged)

    class NeedOlder(Message):
        """The user reached the top: page older entries from journald."""

        def __init__(self, cursor: str) -> None:
            super().__init__()
            self.cursor = cursor

    def __init__(self, window: int = 200_000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model = JournalRows(window)
        self._rows_dropped = 0  # the model's rows_dropped when this view last shifted by it
        self.unread = 0
        # Rows the window dropped from the view's top row on, while paused: the view can keep
        # its rows only while they are in the window, and the title says when it could not.
        self.dropped_in_view = 0
        self.search: re.Pattern[str] | None = None
        self._widest = 0
        self.history_exhausted = False  # journald has nothing older than the first row
        self._paging = False
        self.label = "journal"
        self.fixed = False  # rows that never grow (a py-spy dump): no following, the cursor at the top
        self.feed_trouble: str | None = None
        self.behind = 0
        self.filter_text = ""
        self._title = ""
        self._paints: dict[tuple[bool, tuple[str, ...]], Style] = {}
        self._frame = (0, 0, 0, 0)  # scroll x and y, widths (`_read_frame`)
        self._in_frame = False
        self._to_truecolor: ANSIToTruecolor | None = None
        self._stamps: LRUCache[int, str] = LRUCache(256)
        # Three screens of rows (`_read_frame` grows it with the view): a page back and forth
        # draws nothing twice (with two, the cursor's rows pushed the oldest out and each row
        # drawn again pushed out the next). Not more: a kept row is its Strip, seven caches and
        # the strips cut from it, which the cyclic collector walks at each young collection
        # while they are young; 1,024 rows made those collections 12 to 28 ms in a 10k lines/s
        # flood (one a second, the tail of the frames), three screens 1 to 8 (docs/facts.md).
        self._strips: LRUCache[RowKey, Strip] = LRUCache(64)

    def on_mount(self) -> None:
        self._update_title()

    # -- data -----------------------------------------------------------------------------

    def append_entries(self, entries: list[JournalEntry]) -> None:
        """Fold a batch into the view's own rows (a view without a session: tests, benchmarks)."""
        before = len(self.model.rows)
        self.show_added(self.model.add(entries), before)

    def attach(self, model: JournalRows) -> None:
        """Draw the session's rows (the session folds each batch once, for every subscriber),
        from the end, with nothing searched or filtered."""
        self.model = model
        self._strips.clear()  # the numbers of another model's records
        self._rows_dropped = model.rows_dropped
        self.history_exhausted = False
        self._paging = False
        self.unread = self.dropped_in_view = 0
        self._widest = 0
        self.cursor = 0
        self.follow = True
        self.filter_text = ""
        self.feed_trouble = None
        self.behind = 0
        self._resize()
        self._update_title()
        self.refresh()

    def show_added(self, added: int, rows_before: int) -> None:
        """The model grew by `added` rows at the end (-1: it was rebuilt): draw them."""
        model = self.model
        self._widest = max(self._widest, model.longest(len(model.rows) - max(0, added)))
        self._grow()
        if self.follow:
            # the rows are repainted below: the reactive's watcher would repaint the whole box
            self.set_reactive(CursorView.cursor, max(0, len(model.rows) - 1))
            self._pin_to_end()
            # The first batch can land before the new virtual size reaches the scrollbars: the
            # view then sat at the top of the backlog until the next line (15 s on a quiet server).
            self.call_after_refresh(self._keep_at_end)
        else:
            self.unread += added if added >= 0 else max(0, len(model.rows) - rows_before)
            if (shift := model.rows_dropped - self._rows_dropped) and added >= 0:
                # the window dropped rows above: the rows in view stay in view, where they now are
                self.dropped_in_view += max(0, shift - int(self.scroll_y))  # ...unless they went too
                self.scroll_to(y=max(0, self.scroll_y - shift), animate=False, immediate=True)
                self.cursor -= shift
            self.cursor = max(0, min(self.cursor, len(model.rows) - 1))
        self._rows_dropped = model.rows_dropped
        self._sync_thumb()
        if model.tracebacks_changed:
            model.tracebacks_changed = False
            self.post_message(self.TracebacksChanged())
        self._update_title()
        self._refresh_rows()

    def _refresh_rows(self) -> None:
        """Repaint the rows and not the scrollbars beside them: `refresh()` marks the view's
        whole box, and the compositor then renders the bars and their corner too (0.26 ms each,
        in most frames of a flood) for a thumb that `_sync_thumb` moves only when it must."""
        rows = self.scrollable_content_region.size
        if rows:
            self.refresh(Region(0, 0, rows.width, rows.height))
        else:
            self.refresh()

    def prepend_entries(self, entries: list[JournalEntry]) -> None:
        """Older entries at the top; the row under the cursor stays under it."""
        self._paging = False
        if not entries:
            self.history_exhausted = True
            self._update_title()
            return
        added = self.model.prepend(entries)
        self._strips.clear()  # the numbers below the first record were dropped records' before
        self._widest = max(self._widest, self.model.longest(0, added))
        self._resize()
        self.cursor += added
        self.scroll_to(y=self.scroll_y + added, animate=False, immediate=True)
        if self.model.tracebacks_changed:
            self.model.tracebacks_changed = False
            self.post_message(self.TracebacksChanged())
        self.refresh()

    def paging_failed(self) -> None:
        self._paging = False  # the next move to the top asks again

    def _want_older(self) -> None:
        cursor = self.model.oldest_cursor
        if not self._paging and not self.history_exhausted and cursor is not None:
            self._paging = True
            self.post_message(self.NeedOlder(cursor))

    def _wanted_size(self) -> Size:
        return Size(self._widest + self._gutter() + 2, len(self.model.rows))

    def _resize(self) -> None:
        self.virtual_size = self._wanted_size()

    def _grow(self) -> None:
        """The rows grew at the end: the new virtual size without a layout pass of the screen.

        Setting `virtual_size` lays out the whole screen (it is a layout reactive), and a
        scroll reflows every visible widget; a flood paid both on every batch, more than half
        of each screen update (issue 14's profile). A view whose box has not changed needs
        neither: the scrollbars' windows are set here, and a scrollbar that must appear or go
        still lays the view out (Textual's `show_vertical_scrollbar` does)."""
        size = self._wanted_size()
        if size == self.virtual_size:
            return
        if not self.is_mounted or not self.container_size:
            self.virtual_size = size
            return
        width = self.virtual_size.width
        self.set_reactive(Widget.virtual_size, size)
        if size.width != width or not self.show_vertical_scrollbar:
            self._scroll_update(size)  # a scrollbar may appear: that one lays the view out

    def _pin_to_end(self) -> None:
        """Following: the last row in view, repainted rather than scrolled (see `_grow`)."""
        end = self.max_scroll_y
        if self.scroll_y != end and self.is_mounted and self.container_size:
            self.set_reactive(Widget.scroll_y, end)
            self.set_reactive(Widget.scroll_target_y, end)
        elif self.scroll_y != end:
            self.scroll_end(animate=False, immediate=True)

    def _sync_thumb(self) -> None:
        """Tell the vertical scrollbar the new size and position only when its thumb would be
        drawn elsewhere: over a long window a batch moves it by far less than a cell, and
        repainting the bar on every batch cost as much as drawing the rows."""
        if not self.show_vertical_scrollbar:
            return
        bar = self.vertical_scrollbar
        size, window = bar.size.height, bar.window_size
        if not size or thumb(size, bar.window_virtual_size, window, bar.position) != thumb(
            size, self.virtual_size.height, window, self.scroll_y
        ):  # a bar not laid out yet has no thumb to compare: it is told, and drawn later
            bar.window_virtual_size = self.virtual_size.height
            bar.position = self.scroll_y

    def _gutter(self) -> int:
        return TIME_WIDTH if self.show_time else 0

    def set_label(self, label: str) -> None:
        self.label = label
        self._update_title()

    def show_feed(self, trouble: str | None) -> None:
        """None while the journal arrives live; else what it is instead (`not following
        (connection lost)`)."""
        if trouble != self.feed_trouble:
            self.feed_trouble = trouble
            self._update_title()

    def show_behind(self, lines: int) -> None:
        """Lines the journal holds that have not arrived yet (0: caught up): every line still
        lands in order, but the view must not look live while it trails a flood."""
        if lines != self.behind:
            self.behind = lines
            self._update_title()

    def _start_in_view(self) -> bool:
        """Whether the journal's first row is on screen: the title says `start of the journal`
        only then (it stayed after `g` then `G`, over the newest lines)."""
        if self.follow:
            return len(self.model.rows) <= self.scrollable_content_region.height
        return int(self.scroll_y) == 0

    def title_text(self) -> str:
        """The box's title: what is shown and whether it is live, where the eye is."""
        parts = [self.label]
        if self.feed_trouble:
            parts.append(self.feed_trouble)
        if self.behind:
            parts.append(f"behind by ~{self.behind:,} lines")
        if self.model.filter.active:
            parts.append(f"filtered: {self.filter_text} (F to change)")
        if self.history_exhausted and self._start_in_view():
            parts.append("start of the journal")
        if self.fixed:
            return " · ".join(parts)
        if not self.follow:
            parts.append("paused")
            if n := self.dropped_in_view:
                parts.append(f"{n:,} line{'s' * (n != 1)} in view dropped: the window keeps {self.model.window:,}")
            if n := self.unread:
                parts.append(f"▼ {n:,} new line{'s' * (n != 1)}")
            parts.append("G to follow")
        elif not self.feed_trouble:
            parts.append("following")
        return " · ".join(parts)

    def _update_title(self) -> None:
        title = self.title_text()
        if title != self._title:
            self._title = title
            if self.parent is not None:  # the box the view sits in carries the border
                self.parent.border_title = Content(title)  # type: ignore[attr-defined]  # never markup

    # -- rendering ------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._paints.clear()
        self._strips.clear()

    def _paint(self, *names: str) -> Style:
        """The view's own style with these components' on top, worked out once per style
        change: `rich_style` walks every ancestor, and took half of `render_line` in a flood.
        The app's ANSI-to-truecolor filter, when on, is applied here, once per style, instead
        of to every segment of every row of every frame (`get_line_filters`)."""
        to_truecolor = self._to_truecolor
        key = (to_truecolor is not None, names)
        style = self._paints.get(key)
        if style is None:
            style = self.rich_style
            for name in names:
                style = style + self.get_component_rich_style(name)
            if to_truecolor is not None:
                style = to_truecolor.truecolor_style(style, self.background_colors[1].rich_color)
            self._paints[key] = style
        return style

    def get_line_filters(self) -> list[LineFilter]:
        """The app's filters but ANSI-to-truecolor, whose work `_paint` has done: it rebuilt
        every visible row (a list of segments and a Strip with its seven caches) on every frame
        of a flood, where every row is new."""
        return [f for f in self.app.get_line_filters() if not isinstance(f, ANSIToTruecolor)]

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows as `render_line` draws them, cut to the crop's columns, through the app's
        other line filters. Each row is already what the screen shows there: the view's colours
        are in its segments (`_paint`) and it is the view's width. Textual's style pass
        (`StylesCache.render_widget`) would rebuild every row of every frame into another Strip
        for the border, padding, outline, tint and opacity the view does not have (the box
        around it carries the border), reading the styles again per row: the view's rows of a
        flood's frame, all new, took 0.85 ms through it and take 0.43 without (p50, 48 rows,
        `bench_panes.py`'s rows_to_screen_ms). A view given any of them (`_bare` false) goes
        through Textual's pass; tests/ui/test_journal_pane.py holds the two equal."""
        self._read_frame()
        self._in_frame = True
        try:
            if not self._bare():
                return super().render_lines(crop)
            filters = self.get_line_filters()
            background = self.background_colors[1]
            strips = []
            for y in crop.line_range:
                strip = self.render_line(y)
                for line_filter in filters:
                    strip = strip.apply_filter(line_filter, background)
                strips.append(strip)
            left, right = crop.column_span
            if (left, right) != (0, self.outer_size.width):
                strips = [strip.crop(left, right) for strip in strips]
            return strips
        finally:
            self._in_frame = False

    def _bare(self) -> bool:
        """Whether Textual's style pass would leave the rows `render_line` draws as they are."""
        styles = self.styles
        return (
            not any(edge for edge, _ in styles.border)
            and not any(edge for edge, _ in styles.outline)
            and not any(styles.padding)
            and not styles.tint.a
            and styles.text_opacity == 1.0
            and self.opacity == 1.0
            and (not styles.has_rule("hatch") or styles.hatch == "none")
        )

    def _read_frame(self) -> None:
        """What every row of a frame is drawn with, read once a frame (`scrollable_content_region`
        alone costs 44 us a call): scroll x and y, the width text may use (the scrollbar's column
        left out), the width of a row's Strip (the whole content width, which Textual would
        otherwise widen each row to, a new Strip per row), and the app's ANSI-to-truecolor filter
        while it is on. The app turns that off for an ANSI theme, and on again with `ansi_color`,
        which restyles nothing: rows drawn under the other setting are dropped then."""
        x, y = self.scroll_offset
        self._frame = (x, y, self.scrollable_content_region.width, self.content_region.width)
        self._strips.grow(3 * self.size.height)
        on = next((f for f in self.app.get_line_filters() if isinstance(f, ANSIToTruecolor)), None)
        if (on is None) != (self._to_truecolor is None):
            self._strips.clear()
        self._to_truecolor = on

    def _stamp(self, realtime_us: int) -> str:
        second = realtime_us // 1_000_000
        stamp = self._stamps.get(second)
        if stamp is None:
            stamp = self._stamps[second] = time.strftime("%b %d %H:%M:%S ", time.localtime(second))
        return stamp

    def render_line(self, y: int) -> Strip:
        """Lines that are not part of a traceback are drawn once and kept (`_strips`): while
        following, every row moves up on every batch, and only the new ones are new."""
        if not self._in_frame:  # called alone (a test, a benchmark): read what the frame would
            self._read_frame()
        scroll_x, scroll_y, width, cells = self._frame
        row = scroll_y + y
        model = self.model
        if row >= len(model.rows):
            return Strip.blank(cells, self._paint())
        index, part = model.rows[row]
        record = model.record(index)
        if isinstance(record, Line):  # a plain line (or its restart separator) draws the same wherever it scrolls
            cursor = row == self.cursor and self.has_focus
            key = (index, part, width, cells, scroll_x, self.show_time, cursor, self.search)
            strip = self._strips.get(key)
            if strip is None:
                strip = self._strips[key] = self._render_row(row, index, part, record, width, cells, scroll_x)
            return strip
        return self._render_row(row, index, part, record, width, cells, scroll_x)

    def _render_row(
        self, row: int, index: int, part: int, record: Line | Traceback, width: int, cells: int, scroll_x: int
    ) -> Strip:
        """The row's text cut to `width` cells, its Strip `cells` wide (the rest is padding)."""
        paint = self._paint
        model = self.model
        kind: tuple[str, ...] = ()
        if part == SEPARATOR:
            text = f"──── {model.separators.get(index, 'restart')} "
            rule = Segment(text + "─" * max(0, width - len(text)), paint("journal--separator"))
            return Strip([rule]).crop(0, width).extend_cell_length(cells, paint())
        stamp_time: int | None = None
        if isinstance(record, Traceback):
            if part == MAIN:
                mark = "▼" if id(record) in model.expanded else "▶"
                tail = f" [{len(record.lines)} lines]" + (
                    "" if record.complete else (" (still printing)" if record.open else " (incomplete)")
                )
                head = f"{mark} {printable(summary(record))}"
                room = max(12, width - self._gutter() - len(tail))
                text = (head if len(head) <= room else head[: room - 1] + "…") + tail  # the count stays in view
                kind = ("journal--traceback",)
                stamp_time = record.times[0] if record.times else None
            else:
                line = record.lines[part]
                text = "  │ " + display_text(line)
                kind = (
                    ("journal--traceback-open", "journal--frame")
                    if is_frame_line(line)
                    else ("journal--traceback-open",)
                )
                stamp_time = record.times[part] if part < len(record.times) else None
        else:
            text = display_text(record.text)
            entry = record.entry
            stamp_time = entry.realtime_us
            if entry.priority <= 3:
                kind = ("journal--err",)
            elif entry.priority == 4:
                kind = ("journal--warn",)
        if model.nodes > 1:  # a deployment's merged journal: `n1 [... TP11] ...`
            text = f"n{record.node if isinstance(record, Traceback) else record.entry.node} {text}"
        if row == self.cursor and self.has_focus:
            kind = (*kind, "journal--cursor")
        style = paint(*kind)
        segments = []
        gutter = self._gutter()
        if gutter:
            stamp = self._stamp(stamp_time) if stamp_time else " " * gutter
            segments.append(Segment(stamp, paint("journal--time")))
        start = max(0, scroll_x - gutter)
        crop_from = min(scroll_x, gutter)
        room = width - (gutter - crop_from)
        if self.search is None and crop_from == 0 and (visible := text[start : start + room]).isascii():
            # One cell a character: the row is cut and padded here, one Strip instead of three.
            segments.append(Segment(visible.ljust(room + cells - width), style))
            return Strip(segments, cells)
        visible = text[start : start + width * 2]  # crop before building segments: lines can be 100 KB
        segments.extend(self._highlight(visible, style, kind))
        return Strip(segments).crop(crop_from, crop_from + width).extend_cell_length(cells, style)

    def _highlight(self, text: str, style: Style, kind: tuple[str, ...]) -> list[Segment]:
        if self.search is None:
            return [Segment(text, style)]
        out, at = [], 0
        match_style = self._paint(*kind, "journal--match")
        for m in self.search.finditer(text):
            if m.start() == m.end():
                continue
            out.append(Segment(text[at : m.start()], style))
            out.append(Segment(text[m.start() : m.end()], match_style))
            at = m.end()
        out.append(Segment(text[at:], style))
        return out

    # -- moving ---------------------------------------------------------------------------

    def _keep_at_end(self) -> None:
        if self.follow and self.scroll_y != self.max_scroll_y:
            self.scroll_end(animate=False, immediate=True)
        self._sync_thumb()  # the bar may have been laid out only now

    def on_resize(self) -> None:
        self._keep_at_end()  # the side list opening narrows the view; following stays at the end

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.unread = self.dropped_in_view = 0
            self.cursor = max(0, len(self.model.rows) - 1)
            self.scroll_end(animate=False)
        self._update_title()

    def watch_show_time(self) -> None:
        self._resize()
        self.refresh()

    def line_count(self) -> int:
        return len(self.model.rows)

    def _move_to(self, row: int) -> None:
        rows = len(self.model.rows)
        if rows == 0:
            return
        if row <= 0:
            self._want_older()
        if min(row, rows - 1) < rows - 1 and self.follow:
            self.follow = False  # the user reads older lines: new ones must not move the view
        row = self.place_cursor(row)
        if row == rows - 1 and not self.follow and self.unread:
            self.follow = True
        self._update_title()

    def on_click(self, event: events.Click) -> None:
        self._move_to(int(self.scroll_y) + event.y)

    def action_top(self) -> None:
        self.follow = False
        self._move_to(0)

    def action_bottom(self) -> None:
        self.follow = True

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_toggle_time(self) -> None:
        self.show_time = not self.show_time

    # -- folding and frames -----------------------------------------------------------------

    def action_activate(self) -> None:
        if not self.model.rows:
            return
        frame = self.model.frame_at(self.cursor)
        if frame is not None:
            self.post_message(self.OpenFrame(*frame))
            return
        index, part = self.model.rows[self.cursor]
        record = self.model.record(index)
        if isinstance(record, Traceback) and part != SEPARATOR:  # fold it, or unfold it
            self.model.toggle(index)
            self._resize()
            head = self.model.row_of(index)
            if id(record) in self.model.expanded:
                # Show the block, and put the cursor on the failing frame: Enter again opens it.
                self.scroll_to(y=head, animate=False, immediate=True)
                self._move_to(head + 1 + record.failing_frame_line())
            else:
                self._move_to(head)
            self.refresh()

    def toggle_record(self, index: int, expanded: bool) -> None:
        record = self.model.record(index)
        if (id(record) in self.model.expanded) != expanded:
            self.model.toggle(index)
            self._resize()
            self.refresh()

    def action_fold_all(self, expanded: bool) -> None:
        anchor = self.model.rows[self.cursor][0] if self.model.rows else 0
        self.model.set_all(expanded)
        self._resize()
        self._move_to(self.model.row_of(anchor))
        self.refresh()

    def action_next_traceback(self, direction: int) -> None:
        rows = self.model.rows
        row = self.cursor + direction
        while 0 <= row < len(rows):
            index, part = rows[row]
            if part == MAIN and isinstance(self.model.record(index), Traceback):
                self.follow = False
                self._move_to(row)
                return
            row += direction

    def jump_to_record(self, index: int) -> None:
        self.follow = False
        self._move_to(self.model.row_of(index))
        self.focus()

    # -- search and filter --------------------------------------------------------------------

    def action_prompt(self, kind: str) -> None:
        self.post_message(self.Prompt(kind))

    def set_search(self, text: str) -> str | None:
        """Search for a regular expression (plain text works); returns an error or None."""
        if not text:
            self.search = None
            self.refresh()
            return None
        try:
            self.search = re.compile(text, re.IGNORECASE if text.islower() else 0)
        except re.error as e:
            return f"not a regular expression: {e}"
        self.refresh()
        self.action_search_next(1)
        return None

    def action_search_next(self, direction: int) -> None:
        if self.search is None or not self.model.rows:
            return
        row = self.model.find(self.search, self.cursor, forward=direction > 0)
        if row is not None:
            self.follow = False
            self._move_to(row)

    def set_filter(self, text: str) -> str | None:
        try:
            new = Filter.parse(text, error_texts=ERROR_TEXTS)
        except ValueError as e:
            return str(e)
        if new.node is not None and new.node >= max(1, self.model.nodes):
            nodes = self.model.nodes
            return (
                f"node:{new.node}: this journal is one unit's, node 0's (node:N is for a deployment's merged journal)"
                if nodes <= 1
                else f"node:{new.node}: the deployment's nodes are 0 to {nodes - 1}"
            )
        self.model.set_filter(new)
        self.filter_text = text.strip()
        self.cursor = min(self.cursor, max(0, len(self.model.rows) - 1))
        self._resize()
        self._update_title()
        if self.follow:
            self.scroll_end(animate=False)
        self.refresh()
        return None
