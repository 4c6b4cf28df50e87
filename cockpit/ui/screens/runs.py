"""Pick two saved load runs to compare: Enter marks A, then B (another run)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from cockpit.load.store import SavedRun


class RunPicker(ModalScreen[tuple[SavedRun, SavedRun] | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="runs.close")]

    def __init__(self, runs: list[SavedRun]) -> None:
        super().__init__()
        self.runs = list(reversed(runs))  # newest first
        self.first: SavedRun | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="runs-dialog"):
            yield Label("Compare runs: pick A (the baseline), then B", classes="dialog-title", id="runs-title")
            options = [
                Option(
                    f"{r.label} · {', '.join(str(lv['concurrency']) for lv in r.record.get('levels', []))}", id=str(i)
                )
                for i, r in enumerate(self.runs)
            ]
            yield OptionList(*options, id="runs")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        run = self.runs[int(event.option.id or 0)]
        if self.first is None:
            self.first = run
            self.query_one("#runs-title", Label).update(f"A: {run.label} · now pick B")
        elif run is self.first:  # a run against itself says nothing: B must be another
            self.query_one("#runs-title", Label).update(f"A: {run.label} · B must be another run")
        else:
            self.dismiss((self.first, run))
