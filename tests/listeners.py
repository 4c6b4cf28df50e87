"""Session listeners the tests share."""

from __future__ import annotations

from cockpit.session import Listener


class Notices(Listener):
    """Keeps each sentence the session says to the user as a notice, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def notice(self, sentence: str) -> None:
        self.said.append(sentence)
