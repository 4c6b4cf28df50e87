"""The start-up timeline of the unit's running start (or its latest): each phase from the unit's
start, rank by rank, the slowest rank, the memory left, the comparison with the last start that
reached ready, and what the start-up lines said beside (the KV cache, SGLang's own timings)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from cockpit.sglang.server.startup import Remembered, Timeline, death, facts, headline, table


class StartupScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,p", "dismiss(None)", "Close", id="startup.close")]

    def __init__(self, unit: str, timeline: Timeline, last: Remembered | None) -> None:
        super().__init__()
        self.unit, self.timeline, self.last = unit, timeline, last

    def compose(self) -> ComposeResult:
        rows = table(self.timeline, self.last)
        grid = Table(box=None, pad_edge=False, header_style="bold")
        for name in rows[0]:
            grid.add_column(name, no_wrap=True, justify="left" if name in ("phase", "vs the last start") else "right")
        for row in rows[1:]:
            grid.add_row(*(Text(cell) for cell in row))
        with Vertical(classes="dialog", id="startup-dialog"):
            yield Label(headline(self.unit, self.timeline) + " (Esc closes)", classes="dialog-title", markup=False)
            yield Static(grid if len(rows) > 1 else "SGLang has printed none of its start-up lines for this start.")
            end = death(self.timeline)
            lines = [*([end] if end is not None else []), *facts(self.timeline)]
            if self.last is None:
                lines.append("No earlier start that reached ready is known to compare with.")
            if lines:  # wrapped at the dialog's width: a fact runs longer than the table is wide
                yield Label("\n".join(lines), classes="dialog-body", id="startup-facts", markup=False)
