"""The one journal feed of an open unit: followed once, folded once, fanned out.

Every batch the follower reads is folded into one `JournalRows` here, then handed to each
subscriber as a `JournalBatch` (the entries, and what the fold changed): the journal view
draws the rows it was told were added, the throughput series parses the decode lines, the
status poll learns how the main process ended, a restart watch collects the new invocation's
lines. Before, the view folded, the restart watch followed the journal a second time and folded
again, and the poll's exit memory was fed through the UI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cockpit.remote.base import Host
from cockpit.session.feeds import supervise
from cockpit.systemd import journal
from cockpit.systemd.entry import JournalEntry
from cockpit.traceback.journal_rows import JournalRows

BACKLOG = 2000  # entries shown at first; older ones are paged from journald on demand
WINDOW = 200_000  # records kept in memory; the oldest are dropped in chunks


@dataclass(frozen=True)
class JournalBatch:
    entries: list[JournalEntry]
    added: int  # rows added at the end of `rows`, -1 when the rows were rebuilt
    rows_before: int


Subscriber = Callable[[JournalBatch], None]


class JournalFeed:
    def __init__(
        self,
        host: Host | None,  # None: a recorded journal, delivered by hand
        unit: str,
        *,
        backlog: int = BACKLOG,
        window: int = WINDOW,
        on_state: Callable[[str, str | None], None] | None = None,
        on_subscriber_failed: Callable[[str], None] | None = None,
    ) -> None:
        self.host, self.unit, self.backlog = host, unit, backlog
        self.rows = JournalRows(window, unit)
        self.state = "connecting"
        self._on_state = on_state
        self._on_subscriber_failed = on_subscriber_failed
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """`subscriber` gets every batch from now on; returns the unsubscribe."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def deliver(self, entries: list[JournalEntry]) -> None:
        """Fold a batch once and hand it to every subscriber. A subscriber that fails is
        reported and the others still get the batch: a drawing bug must not stop the feed."""
        if not entries:
            return
        before = len(self.rows.rows)
        batch = JournalBatch(entries, self.rows.add(entries), before)
        for subscriber in list(self._subscribers):
            try:
                subscriber(batch)
            except Exception as e:  # noqa: BLE001 - one subscriber's failure is reported, not spread
                if self._on_subscriber_failed is not None:
                    self._on_subscriber_failed(f"{getattr(subscriber, '__qualname__', subscriber)}: {e}")

    def _state(self, state: str, detail: str | None) -> None:
        self.state = state
        if self._on_state is not None:
            self._on_state(state, detail)

    async def run(self) -> None:
        """Follow until cancelled, resuming after the last cursor delivered after any failure."""
        assert self.host is not None, "a recorded journal is not followed"
        follower = journal.JournalFollower(self.host, self.unit, backlog=self.backlog, on_state=self._state)
        await supervise(lambda: follower.run(self.deliver), lambda detail: self._state("reconnecting", detail))

    async def older(self, cursor: str, count: int = 2000) -> list[JournalEntry]:
        """Entries before `cursor`, oldest first (the view prepends them to the same rows)."""
        if self.host is None:
            return []
        return await journal.older(self.host, self.unit, cursor, count)
