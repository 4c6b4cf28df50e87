"""Tracebacks that are the same failure, gathered: a restart loop reads as one thing.

With `Restart=on-failure`, a unit that fails its argument check prints the same traceback at
every start (11 starts in two minutes in the demo; on a real host each may first spend minutes
loading weights), and eight ranks crashing together print one each. Two tracebacks are the same
failure when their exception, the first line of its message and their failing frame agree.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from cockpit.traceback.model import Traceback

CRASH_LOOP_STARTS = 3  # this many starts dying the same way is a loop
CRASH_LOOP_RECENT_S = 600.0  # ... while its last crash is this recent


def signature(tb: Traceback) -> tuple[str | None, str, str | None, int | None]:
    frame = tb.failing_frame
    return (
        tb.exception,
        tb.message.split("\n", 1)[0].strip(),
        frame.file if frame else None,
        frame.line if frame else None,
    )


@dataclass
class Group:
    """One failure: its newest traceback (the one to open) and where and when it happened."""

    newest: Traceback
    newest_record: int  # the record number of the newest
    count: int = 0
    ranks: set[str] = field(default_factory=set)
    pids: list[int] = field(default_factory=list)
    invocations: list[str] = field(default_factory=list)  # oldest first
    first_us: int | None = None
    last_us: int | None = None
    members: list[Traceback] = field(default_factory=list)  # newest first

    def _add(self, tb: Traceback) -> None:
        self.count += 1
        self.members.append(tb)
        if tb.rank:
            self.ranks.add(tb.rank)
        if tb.pid is not None and tb.pid not in self.pids:
            self.pids.append(tb.pid)
        if tb.invocation_id and tb.invocation_id not in self.invocations:
            self.invocations.insert(0, tb.invocation_id)
        start = tb.times[0] if tb.times else None
        if start is not None:
            self.first_us = start if self.first_us is None else min(self.first_us, start)
            self.last_us = start if self.last_us is None else max(self.last_us, start)

    @property
    def starts(self) -> int:
        """How many invocations of the unit died this way."""
        return max(1, len(self.invocations))

    def summary(self) -> str:
        """`×12 · 12 starts since 08:04` (empty for a single traceback)."""
        if self.count == 1:
            return ""
        parts = [f"×{self.count}"]
        if len(self.ranks) > 1:
            parts.append(f"{len(self.ranks)} ranks")
        if self.starts > 1:
            since = time.strftime("%H:%M", time.localtime(self.first_us / 1e6)) if self.first_us else "?"
            parts.append(f"restart loop: {self.starts} starts since {since}")
        return " · ".join(parts)


def group(tracebacks: Iterable[tuple[int, Traceback]], *, by_rank: bool = True) -> list[Group]:
    """Groups of (record number, traceback) given most recent first, most recent group first.
    `by_rank`: a rank's failure is its own group (the side list keeps one row per rank that
    crashed); otherwise all ranks that failed alike are one (the incident note prints it once)."""
    groups: dict[tuple, Group] = {}
    for number, tb in tracebacks:
        key = (*signature(tb), tb.rank if by_rank else None)
        found = groups.get(key)
        if found is None:
            found = groups[key] = Group(tb, number)
        found._add(tb)
    return list(groups.values())


def crash_loop(groups: list[Group], now: float | None = None, recent_s: float = CRASH_LOOP_RECENT_S) -> Group | None:
    """The failure the unit keeps restarting into: the newest group, when it spans several
    starts and its last traceback is recent."""
    if not groups:
        return None
    newest = groups[0]
    now = time.time() if now is None else now
    recent = newest.last_us is not None and now - newest.last_us / 1e6 < recent_s
    return newest if newest.starts >= CRASH_LOOP_STARTS and recent else None
