"""`?`: every key of every pane, as the keymap in effect binds it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


def key_text(binding: Binding, keymap: dict[str, str]) -> str:
    keys = keymap.get(binding.id or "") or binding.key_display or binding.key
    return (
        keys.replace("left_square_bracket", "[")
        .replace("right_square_bracket", "]")
        .replace("slash", "/")
        .replace("colon", ":")
        .replace("question_mark", "?")
    )


def bindings_table(sections: list[tuple[str, list[BindingType]]], keymap: dict[str, str]) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", expand=True)
    table.add_column("where", style="dim", no_wrap=True)
    table.add_column("key", no_wrap=True)
    table.add_column("does")
    table.add_column(
        Text("id (for [ui.keys])"), style="dim", no_wrap=True
    )  # a str header is markup: [ui.keys] vanished
    for where, bindings in sections:
        for b in bindings:
            if isinstance(b, Binding) and b.description:
                table.add_row(where, Text(key_text(b, keymap), style="bold"), b.description, b.id or "")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[BindingType]]], keymap: dict[str, str]) -> None:
        super().__init__()
        self.sections, self.keymap = sections, keymap

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help-dialog"):
            yield Label(
                "Keys (Esc closes; override any of them by id in [ui.keys] of the config)", classes="dialog-title"
            )
            with VerticalScroll():
                yield Static(bindings_table(self.sections, self.keymap), id="help-keys")
