"""The one journal feed of an open unit: followed once, folded once, fanned out.

Every batch the follower reads is folded into one `JournalRows` here, then handed to each
subscriber as a `JournalBatch` (the entries, and what the fold changed): the journal view
draws the rows it was told were added, the throughput series parses the decode lines, the
status poll learns how the main process ended, a restart watch collects the new invocation's
lines. Before, the view folded, the restart watch followed the journal a second time and folded
again, and the poll's exit memory was fed through the UI.

A deployment's feed follows every node's journal over that node's connection and merges them
into the same rows: each entry carries its node's rank (the fold keeps one stream per node and
PID, the view prefixes `n1`), the nodes' backlogs are delivered as one batch in time order, and
after that each batch as it arrives (the nodes' lines interleave as they are logged, give or take
each link's delay). Paging back through history reads node 0's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from cockpit.remote.base import Host
from cockpit.session.feeds import supervise
from cockpit.systemd import journal
from cockpit.systemd.entry import JournalEntry
from cockpit.timeouts import within
from cockpit.traceback.journal_rows import JournalRows

BACKLOG = 2000  # entries shown at first; older ones are paged from journald on demand
WINDOW = 200_000  # records kept in memory; the oldest are dropped in chunks
BEHIND_S = 1.0  # late by more than this (beyond the link's own delay): the view says it is behind
CAUGHT_UP_S = 1.0  # no batch for this long while behind: the stream ran dry, so it caught up
MERGE_WAIT_S = 3.0  # how long the first node's backlog waits for the others' before it is shown alone


class Lag:
    """How many lines journald holds that the feed has not received yet, estimated.

    They cannot be counted from here without asking journald once more (which a flood would
    slow further). What is known: an entry stamped T by journald that arrives at `now` was late
    by `now - T`, which includes the two clocks' difference and the link's delay; the smallest
    such figure seen is taken as that constant (the feed was not behind then). Beyond it, the
    feed is behind by that many seconds, times the rate journald wrote at over the last
    `RATE_SPAN_S` of its stamps that arrived (a single batch's own span overstated it fourfold
    in a flood: journald stamps entries in bursts).
    """

    RATE_SPAN_S = 5.0

    def __init__(self) -> None:
        self.base_s: float | None = None
        self.late_s = 0.0  # how late the last batch came, beyond the link's own delay
        self.received = 0
        self._marks: collections.deque[tuple[float, int]] = collections.deque()  # (stamp s, received)

    @property
    def rate(self) -> float:
        """Entries per second of journald's time, over the recent stamps received."""
        if len(self._marks) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._marks[0], self._marks[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def update(self, entries: list[JournalEntry], now: float) -> int:
        self.received += len(entries)
        stamp = entries[-1].realtime_us
        if stamp is None:
            return 0
        last = stamp / 1e6
        late = now - last
        self.base_s = late if self.base_s is None else min(self.base_s, late)
        marks = self._marks
        if not marks or last > marks[-1][0]:
            marks.append((last, self.received))
        while len(marks) > 2 and marks[1][0] <= last - self.RATE_SPAN_S:
            marks.popleft()
        behind_s = self.late_s = late - self.base_s
        return two_figures(behind_s * self.rate) if behind_s > BEHIND_S else 0


def two_figures(x: float) -> int:
    """`x` to two significant figures (12,400 -> 12,000): an estimate says no more, and a title
    that changed on every batch redrew its box on every batch."""
    if x < 100:
        return round(x)
    scale = 10 ** (len(str(int(x))) - 2)
    return round(x / scale) * scale


@dataclass(frozen=True)
class JournalBatch:
    entries: list[JournalEntry]
    added: int  # rows added at the end of `rows`, -1 when the rows were rebuilt
    rows_before: int
    behind: int = 0  # lines journald holds beyond this batch, estimated (Lag); 0 when caught up


Subscriber = Callable[[JournalBatch], None]
Source = tuple[Callable[[], Host], str]  # how to reach a node's host, and its unit


class MergedStart:
    """Each node's first batch (its backlog) held until every node's has come, or MERGE_WAIT_S,
    then delivered as one batch in time order; every later batch as it comes. Each entry gets
    its node's rank on the way."""

    def __init__(self, nodes: int, deliver: Callable[[list[JournalEntry]], None]) -> None:
        self.nodes, self._deliver = nodes, deliver
        self._held: dict[int, list[JournalEntry]] = {}
        self._released = asyncio.Event()

    async def batch(self, node: int, entries: list[JournalEntry]) -> None:
        for entry in entries:
            entry.node = node
        if self._released.is_set():
            self._deliver(entries)
            return
        self._held.setdefault(node, []).extend(entries)
        if len(self._held) < self.nodes:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._released.wait(), MERGE_WAIT_S)
        self._release()

    def _release(self) -> None:
        if self._released.is_set():
            return
        self._released.set()
        held, self._held = self._held, {}
        self._deliver(sorted((e for batch in held.values() for e in batch), key=lambda e: e.realtime_us or 0))


class JournalFeed:
    def __init__(
        self,
        host: Callable[[], Host] | None,  # asked when the follow starts; None: a recorded journal, delivered by hand
        unit: str,
        *,
        others: list[Source] | None = None,  # a deployment's other nodes, rank 1 first: merged in
        backlog: int = BACKLOG,
        window: int = WINDOW,
        on_state: Callable[[str, str | None], None] | None = None,
        on_subscriber_failed: Callable[[str], None] | None = None,
        on_behind: Callable[[int], None] | None = None,
        on_skipped: journal.OnSkipped | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host_of, self.unit, self.backlog = host, unit, backlog
        self.others = others or []
        self.rows = JournalRows(window, unit)
        self.rows.nodes = 1 + len(self.others)
        self.state = "connecting"
        self._on_state = on_state
        self._on_subscriber_failed = on_subscriber_failed
        self._subscribers: list[Subscriber] = []
        self._on_behind = on_behind
        self._on_skipped = on_skipped
        self._clock = clock
        self.lag = Lag()
        self._delivered_at = -math.inf
        self.behind = 0
        self._caught_up: asyncio.TimerHandle | None = None

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
        if self.host_of is not None:  # a recorded journal's stamps say nothing of this moment
            self._delivered_at = self._clock()
            self._set_behind(self.lag.update(entries, self._delivered_at))
        batch = JournalBatch(entries, self.rows.add(entries), before, self.behind)
        for subscriber in list(self._subscribers):
            try:
                subscriber(batch)
            except Exception as e:  # noqa: BLE001 - one subscriber's failure is reported, not spread
                if self._on_subscriber_failed is not None:
                    self._on_subscriber_failed(f"{getattr(subscriber, '__qualname__', subscriber)}: {e}")

    def late_s(self) -> float:
        """How late the journal arrives, beyond the link's own delay: 0 when nothing came for
        CAUGHT_UP_S (the stream ran dry, so nothing waits) or the journal is a recorded one."""
        return 0.0 if self._dry() else self.lag.late_s

    def rate(self) -> float:
        """Lines a second journald wrote the journal at lately (Lag.rate): 0 when nothing came for
        CAUGHT_UP_S, or the journal is a recorded one."""
        return 0.0 if self._dry() else self.lag.rate

    def _dry(self) -> bool:
        """Nothing came for CAUGHT_UP_S, or the journal is a recorded one (whose stamps say
        nothing of this moment): no lateness and no rate to go by."""
        return self.host_of is None or self._clock() - self._delivered_at > CAUGHT_UP_S

    def _set_behind(self, lines: int) -> None:
        if self._caught_up is not None:
            self._caught_up.cancel()
            self._caught_up = None
        if lines:
            with contextlib.suppress(RuntimeError):  # no loop: a recorded journal delivered by hand
                self._caught_up = asyncio.get_running_loop().call_later(CAUGHT_UP_S, self._set_behind, 0)
        if lines != self.behind:
            self.behind = lines
            if self._on_behind is not None:
                self._on_behind(lines)

    def _state(self, state: str, detail: str | None) -> None:
        self.state = state
        if self._on_state is not None:
            self._on_state(state, detail)

    async def run(self) -> None:
        """Follow until cancelled, resuming after the last cursor delivered after any failure."""
        assert self.host_of is not None, "a recorded journal is not followed"
        if not self.others:
            follower = journal.JournalFollower(
                self.host_of(), self.unit, backlog=self.backlog, on_state=self._state, on_skipped=self._on_skipped
            )
            await supervise(lambda: follower.run(self.deliver), lambda detail: self._state("reconnecting", detail))
            return
        start = MergedStart(1 + len(self.others), self.deliver)
        sources = [(self.host_of, self.unit), *self.others]
        await asyncio.gather(*(self._follow(node, source, start) for node, source in enumerate(sources)))

    async def _follow(self, node: int, source: Source, start: MergedStart) -> None:
        """One node's journal into the merged rows; its state is the view's with its node named."""
        host_of, unit = source

        def state(now: str, detail: str | None) -> None:
            self._state(now, detail if node == 0 or detail is None else f"n{node}: {detail}")

        follower = journal.JournalFollower(
            host_of(), unit, backlog=self.backlog, on_state=state, on_skipped=self._on_skipped
        )
        deliver = functools.partial(start.batch, node)
        await supervise(lambda: follower.run(deliver), lambda detail: state("reconnecting", detail))

    async def older(self, cursor: str, count: int = 2000) -> list[JournalEntry]:
        """Entries before `cursor`, oldest first (the view prepends them to the same rows)."""
        if self.host_of is None:
            return []
        return await journal.older(self.host_of(), self.unit, cursor, count)
