"""The side list of tracebacks, most recent first, for jumping to one."""

from __future__ import annotations

import time

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cockpit.traceback.model import Traceback


def label(tb: Traceback) -> Text:
    when = time.strftime("%H:%M:%S", time.localtime(tb.times[0] / 1e6)) if tb.times and tb.times[0] else "--:--:--"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{when} ", "dim")
    if tb.rank:
        text.append(f"{tb.rank} ", "bold")
    text.append(tb.exception or ("printing…" if tb.open else "incomplete"))
    return text


class TracebackList(OptionList):
    BINDINGS = [Binding("enter", "select", "Jump", id="tracebacks.jump")]

    class Jump(Message):
        def __init__(self, record_index: int) -> None:
            super().__init__()
            self.record_index = record_index

    def show(self, tracebacks: list[tuple[int, Traceback]], limit: int = 200) -> None:
        highlighted = self.highlighted
        self.clear_options()
        self.add_options(Option(label(tb), id=str(index)) for index, tb in tracebacks[:limit])
        self.display = bool(tracebacks)
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted
        self.border_title = f"tracebacks ({len(tracebacks)})"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Jump(int(event.option.id or 0)))
