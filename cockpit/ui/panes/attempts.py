"""The attempt timeline: each write-and-restart of this unit, newest first, and last #0, the unit
as the cockpit first found it; `u` rolls back to any of them after the write's pre-flight."""

from __future__ import annotations

import time

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cockpit.attempts import ORIGINAL, Attempt

_OUTCOME = {
    "ready": ("✓", "green"),
    "crashed": ("✗", "red"),
    "failed": ("✗", "red"),
    "timeout": ("…", "yellow"),
    "pending": ("◐", "yellow"),
    "refused": ("✗", "red"),
    ORIGINAL: ("◆", "cyan"),
}


def describe(attempt: Attempt) -> Text:
    mark, colour = _OUTCOME.get(attempt.outcome, ("?", ""))
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{mark} #{attempt.number} ", colour + " bold")
    text.append(time.strftime("%H:%M:%S ", time.localtime(attempt.started_at)), "dim")
    if attempt.outcome == ORIGINAL:  # the way back that is always there
        text.append(f"{'the original':<28}", colour)
        text.append(f"  {attempt.note} · u writes it back")
        return text
    outcome = attempt.outcome + (f" in {attempt.seconds:.1f} s" if attempt.seconds is not None else "")
    if attempt.traceback:
        outcome += f" · {attempt.traceback.get('exception')}"
    text.append(f"{outcome:<28}", colour)
    text.append("  ")  # an outcome longer than its column must not run into the changes
    changes = ", ".join(f"{n} {a}→{b}" for n, a, b in attempt.diff()) or "no flag changed"
    text.append(changes + (f" · {attempt.note}" if attempt.note else ""))
    if attempt.detail and (attempt.outcome == "failed" or (attempt.outcome == "crashed" and not attempt.traceback)):
        text.append(f" · {attempt.detail}", "red")
    return text


class AttemptsPane(OptionList):
    BINDINGS = [
        Binding("u", "rollback", "Roll back to this", id="attempts.rollback"),
        Binding("escape", "close", "Close", id="attempts.close"),
    ]

    class Rollback(Message):
        def __init__(self, attempt: Attempt) -> None:
            super().__init__()
            self.attempt = attempt

    class Closed(Message):
        pass

    def show(self, attempts: list[Attempt]) -> None:
        self.attempts = list(reversed(attempts))
        self.clear_options()
        for a in self.attempts:
            self.add_option(Option(describe(a), id=str(a.number)))
        ran = [a for a in self.attempts if a.outcome != ORIGINAL]
        if not ran:
            self.add_option(Option(Text("no attempt yet: edit the flags (e) and write them (w)", "dim"), disabled=True))
        self.border_title = f"attempts ({len(ran)})"
        if self.attempts:
            self.highlighted = 0  # the newest: u acts at once, and the cursor shows where

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "rollback" and getattr(self.app, "changes_refused", lambda: False)())

    def action_rollback(self) -> None:
        if self.highlighted is not None and getattr(self, "attempts", None):
            self.post_message(self.Rollback(self.attempts[self.highlighted]))

    def action_close(self) -> None:
        self.post_message(self.Closed())
