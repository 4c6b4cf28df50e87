"""Every process of the unit where py-spy found it: one folded row per rank, drawn by the journal's
own view (Enter unfolds a rank's stack, Enter on a frame opens its source, `]`/`[` walk the ranks)."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from cockpit.systemd.stacks import StackCapture
from cockpit.traceback.model import Traceback
from cockpit.traceback.stack_dump import folded
from cockpit.ui.panes.journal import JournalView

Opened = tuple[Traceback, int]  # what the screen closes with: the frame to open, or None


class StacksScreen(ModalScreen[Opened | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="stacks.close")]

    def __init__(self, capture: StackCapture, unit: str) -> None:
        super().__init__()
        self.capture = capture
        self.unit = unit

    def compose(self) -> ComposeResult:
        when = time.strftime("%H:%M:%S", time.localtime(self.capture.at))
        with Vertical(classes="dialog", id="stacks-dialog"):
            yield Label(
                f"{self.unit}: {len(self.capture.processes)} processes, py-spy at {when} · Enter unfolds, "
                "Enter on a frame opens it · Esc closes",
                classes="dialog-title",
                markup=False,
            )
            view = JournalView(id="stacks")
            view.fixed = True
            view.attach(folded(self.capture.processes, self.capture.at))
            view.follow, view.cursor = False, 0
            view.set_label("stacks")
            yield view

    def on_mount(self) -> None:
        self.query_one(JournalView).focus()

    def on_journal_view_open_frame(self, event: JournalView.OpenFrame) -> None:
        event.stop()  # the app opens it on its own screen, once this one is gone
        self.dismiss((event.traceback, event.frame))

    def on_journal_view_tracebacks_changed(self, event: JournalView.TracebacksChanged) -> None:
        event.stop()  # the app's side list is the journal's, not these stacks'

    def on_journal_view_need_older(self, event: JournalView.NeedOlder) -> None:
        event.stop()  # a dump has nothing older
