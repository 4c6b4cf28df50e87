"""What the cockpit keeps per start (systemd invocation) of a server: the latest few only, since a
crash loop makes a new start every few seconds for as long as the cockpit watches."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

V = TypeVar("V")


class PerStart(dict[str, V]):
    """invocation -> its record, oldest first; beyond `kept`, the oldest go."""

    def __init__(self, make: Callable[[str], V], kept: int) -> None:
        super().__init__()
        self.make, self.kept = make, kept

    def of(self, invocation: str) -> V:
        """The start's record, made on first sight."""
        found = self.get(invocation)
        if found is None:
            found = self[invocation] = self.make(invocation)
            while len(self) > self.kept:
                del self[next(iter(self))]
        return found
