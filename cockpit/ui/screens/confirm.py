"""A yes/no modal that says what will happen on which host before anything changes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class YesNoModal(ModalScreen[bool]):
    """y or the yes button: True; n, Escape or the cancel button: False. Cancel has the focus,
    so a stray Enter never confirms."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class ConfirmModal(YesNoModal):
    def __init__(self, title: str, body: str, confirm: str = "Yes", danger: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm_label = confirm
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            yield Static(self.body, classes="dialog-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm_label} (y)", id="yes", variant="error" if self.danger else "primary")
                yield Button("Cancel (n)", id="no")
