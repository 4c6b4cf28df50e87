"""A Line-API view with a cursor row that the view keeps on screen: the journal and the source."""

from __future__ import annotations

from textual.reactive import reactive
from textual.scroll_view import ScrollView


class CursorView(ScrollView, can_focus=True):
    cursor: reactive[int] = reactive(0, always_update=True)

    def line_count(self) -> int:
        raise NotImplementedError

    def watch_cursor(self) -> None:
        self.refresh()

    def place_cursor(self, index: int) -> int:
        """Put the cursor on `index` (clamped) and scroll just enough to show it."""
        count = self.line_count()
        if count == 0:
            return 0
        index = max(0, min(count - 1, index))
        self.cursor = index
        height = self.scrollable_content_region.height
        if index < self.scroll_y:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= self.scroll_y + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True)
        return index

    def _move_to(self, index: int) -> None:
        self.place_cursor(index)

    def action_move(self, n: int) -> None:
        self._move_to(self.cursor + n)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))
