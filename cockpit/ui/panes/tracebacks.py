"""The side list of tracebacks, most recent first, for jumping to one; the same failure
printed again (a restart loop, eight ranks at once) is one row with its count."""

from __future__ import annotations

import time

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
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
    _drawn: list[tuple[str, str]] | None = None  # (record, label) of each row shown

    class Jump(Message):
        def __init__(self, record_index: int) -> None:
            super().__init__()
            self.record_index = record_index

    def show(self, groups: list[Group], limit: int = 200) -> None:
        labels = [(str(g.newest_record), label(g)) for g in groups[:limit]]
        shown = [(key, text.plain) for key, text in labels]
        if shown == self._drawn:  # rebuilding the list lays out the screen: only when it changed
            return
        self._drawn = shown
        highlighted = self.highlighted
        self.clear_options()
        self.add_options(Option(text, id=key) for key, text in labels)
        self.display = bool(groups)
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted
        total = sum(g.count for g in groups)
        self.border_title = (
            f"tracebacks ({total})"
            if total == len(groups)
            else f"tracebacks ({total}, {len(groups)} kind{'s' * (len(groups) != 1)})"
        )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Jump(int(event.option.id or 0)))
