"""The side list of tracebacks, most recent first, for jumping to one; the same failure
printed again (a restart loop, eight ranks at once) is one row with its count."""

from __future__ import annotations

import time

from rich.text import Text
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cockpit.traceback.groups import Group


def label(group: Group) -> Text:
    tb = group.newest
    when = time.strftime("%H:%M:%S", time.localtime(tb.times[0] / 1e6)) if tb.times and tb.times[0] else "--:--:--"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{when} ", "dim")
    if tb.rank and len(group.ranks) <= 1:
        text.append(f"{tb.rank} ", "bold")
    text.append(tb.exception or ("printing…" if tb.open else "incomplete"))
    if group.count > 1:
        text.append(f" {group.summary()}", "bold")
    return text


class TracebackList(OptionList):
    BINDINGS = [Binding("enter", "select", "Jump", id="tracebacks.jump")]
    # The list's box is the stylesheet's (42 columns, a share of the height), whatever it holds:
    # a new kind of failure changes only what scrolls inside it. Textual's own `virtual_size`
    # lays out the whole screen when it changes (61 to 66 ms under a flood, twice a crash: the
    # ranks' tracebacks are kinds of their own while they print). The scrollbar's coming or
    # going, which does change what is inside the box, still lays it out (`show_vertical_scrollbar`).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)
    _drawn: list[str] | None = None  # the label of each row shown
    _targets: list[int] = []  # the record each row jumps to
    _blank: Strip | None = None  # a row past the last option, this frame

    class Jump(Message):
        def __init__(self, record_index: int) -> None:
            super().__init__()
            self.record_index = record_index

    def show(self, groups: list[Group], limit: int = 200) -> None:
        """Rows whose label changed are relabelled in place; the list is rebuilt only when its
        length changes (a new kind of failure), as a rebuild repaints every row. Neither lays
        out the screen (`virtual_size` above), unless the scrollbar comes or goes."""
        labels = [label(g) for g in groups[:limit]]
        self._targets = [g.newest_record for g in groups[:limit]]
        shown = [text.plain for text in labels]
        drawn, self._drawn = self._drawn, shown
        if shown == drawn:
            return
        if drawn is not None and len(drawn) == len(shown) and not any("\n" in s for s in shown):
            changed = [i for i, (now, before) in enumerate(zip(shown, drawn, strict=True)) if now != before]
            self._relabel(changed, labels)
        else:
            highlighted = self.highlighted
            # in one step: `clear_options` then `add_options` would hide a scrollbar and show it
            # again, and each of those lays out the screen
            self.set_options(Option(text) for text in labels)
            self.display = bool(groups)
            if highlighted is not None and highlighted < self.option_count:
                self.highlighted = highlighted
        total = sum(g.count for g in groups)
        self._retitle(
            f"tracebacks ({total})"
            if total == len(groups)
            else f"tracebacks ({total}, {len(groups)} kind{'s' * (len(groups) != 1)})"
        )

    def _relabel(self, indexes: list[int], labels: list[Text]) -> None:
        """Repaint only the rows relabelled: `replace_option_prompt_at_index` drops the line
        cache and repaints the whole list (45 rows, 3.5 ms, in the updates a flood's tracebacks
        made slowest). A label is one row (no newline, and the stylesheet's `text-wrap: nowrap`:
        OptionList drops the Text's own `no_wrap`), so the lines stay where they were; the
        rendered options are dropped, and only the rows repainted render again."""
        for i in indexes:
            self.get_option_at_index(i)._set_prompt(labels[i])
        self._option_render_cache.clear()
        lines = self._line_cache.index_to_line
        for i in indexes:
            self.refresh_line(lines.get(i, i))

    def _retitle(self, title: str) -> None:
        """The border's title, repainting the border's top row only: setting `border_title`
        repaints the whole widget, and the count in it changes with every traceback."""
        if self._border_title is not None and self._border_title.plain == title:
            return
        if self._border_title is None:
            self.border_title = Content(title)  # the first: the box's layout is being made anyway
            return
        self._border_title = Content(title)
        x, y = self.content_offset
        self.refresh(Region(-x, -y, self.outer_size.width, 1))

    def render_lines(self, crop: Region) -> list[Strip]:
        self._blank = None
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        """A row past the last option is one blank made once a frame: OptionList makes each anew,
        reading `scrollable_content_region` (44 us a call) and its line cache, which took half of
        an update that redrew this list beside the journal in a flood (docs/facts.md)."""
        if self.scroll_offset.y + y < len(self._line_cache.lines):  # OptionList.render_lines updated it
            return super().render_line(y)
        if self._blank is None:
            style = self.get_visual_style("option-list--option").rich_style
            self._blank = Strip.blank(self.scrollable_content_region.width, style)
        return self._blank

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Jump(self._targets[event.option_index]))
