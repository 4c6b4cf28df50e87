"""The records a fold produces: plain lines and traceback blocks.

A `Line` keeps a reference to its journal entry rather than copies of its fields: a million
of them is the normal size of a fold, so each costs one small object, and one the cyclic
collector never walks (like the entry, it holds only strings and an untracked struct): as a
slotted class, the window's 200,000 lines made each full collection during a flood take
about 90 ms, and all collections together 11 us per line. A `Traceback` keeps its
lines and reads its structure (frames, exception, chain, group members) on demand, again
each time lines have arrived since: records update in place while a traceback is printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from cockpit.systemd.entry import UNKNOWN_PRIORITY, JournalEntry
from cockpit.traceback.frames import Frame, Location
from cockpit.traceback.grammar import cuda_error, frame_site, is_frame_line, log_rank
from cockpit.traceback.structure import Part, parse_block

__all__ = ["TEXT_SOURCE", "Frame", "Line", "Location", "Traceback"]

TEXT_SOURCE = JournalEntry(message="", priority=UNKNOWN_PRIORITY)  # the entry of every line of bare text


def _time(realtime_us: int | None) -> str | None:
    return None if realtime_us is None else str(realtime_us)


class Line(msgspec.Struct, gc=False, eq=False):
    """A line that belongs to no traceback (compared by identity, as a record is)."""

    text: str
    entry: JournalEntry  # shared by the lines of one multi-line MESSAGE
    kind: ClassVar[str] = "line"

    @property
    def pid(self) -> int | None:
        return self.entry.pid

    @property
    def rank(self) -> str | None:
        return log_rank(self.text) or None

    @property
    def unit(self) -> str | None:
        return self.entry.unit

    @property
    def time(self) -> str | None:
        """`__REALTIME_TIMESTAMP` as the journal writes it: microseconds, decimal."""
        return _time(self.entry.realtime_us)

    @property
    def priority(self) -> int | None:
        return None if self.entry.priority == UNKNOWN_PRIORITY else self.entry.priority

    @property
    def cursor(self) -> str | None:
        return self.entry.cursor

    @property
    def invocation_id(self) -> str | None:
        return self.entry.invocation_id

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "line",
            "text": self.text,
            "pid": self.pid,
            "rank": self.rank,
            "unit": self.unit,
            "time": self.time,
            "priority": self.priority,
        }


class Traceback:
    """A traceback block: the exception that propagated, and the chain printed before it.

    `lines` are the input lines exactly (log prefix, carets, chain markers and the blank
    line logging adds included). For a block still being printed, `open` is True and
    `complete` says whether its last exception line has arrived. `truncated`: the start of
    the block was cut off (`tail -20`), so it began at a frame line.
    """

    __slots__ = (
        "pid",
        "rank",
        "unit",
        "lines",
        "times",
        "cursor",
        "invocation_id",
        "priority",
        "complete",
        "open",
        "truncated",
        "relation",
        "node",
        "_read",
        "_read_at",
    )
    kind = "traceback"

    def __init__(
        self,
        lines: list[str],
        times: list[int | None],
        *,
        pid: int | None = None,
        rank: str | None = None,
        unit: str | None = None,
        cursor: str | None = None,
        invocation_id: str | None = None,
        priority: int | None = None,
        complete: bool = False,
        open: bool = False,
        truncated: bool = False,
        relation: str | None = None,
        node: int = 0,
    ) -> None:
        self.lines = lines
        self.times = times  # each line's __REALTIME_TIMESTAMP (None for text)
        self.pid = pid
        self.rank = rank
        self.unit = unit
        self.cursor = cursor  # the first line's, for paging the journal from here
        self.invocation_id = invocation_id
        self.priority = priority  # the most severe of its lines'
        self.complete = complete
        self.open = open
        self.truncated = truncated
        self.relation = relation  # on a chained part: "cause" or "context"
        self.node = node  # the node rank it was printed on (a deployment's merged journal)
        self._read: _Reading | None = None
        self._read_at = -1

    @property
    def start(self) -> str | None:
        return _time(self.times[0]) if self.times else None

    def _reading(self) -> _Reading:
        if self._read_at != len(self.lines) or self._read is None:
            self._read = _Reading.of(self, parse_block(self.lines))
            self._read_at = len(self.lines)
        return self._read

    @property
    def frames(self) -> list[Frame]:
        return self._reading().frames

    @property
    def exception(self) -> str | None:
        return self._reading().exception

    @property
    def message(self) -> str:
        return self._reading().message

    @property
    def chained(self) -> list[Traceback]:
        """The earlier exceptions of the chain, in printed order."""
        return self._reading().chained

    @property
    def sub_exceptions(self) -> list[Traceback]:
        """An exception group's members, each with its own chain."""
        return self._reading().sub_exceptions

    @property
    def location(self) -> Location | None:
        """A SyntaxError's location, apart from its frames."""
        return self._reading().location

    @property
    def sites(self) -> list[Frame | Location]:
        """What the source pane can open, in printed order: the frames, then the location."""
        location = self.location
        return [*self.frames, location] if location is not None else list(self.frames)

    def frame_of_line(self, k: int) -> tuple[Traceback, int] | None:
        """Which frame `self.lines[k]` prints: (the traceback or chained part holding it, its
        index in that part's `sites`); None for a line that is no frame. A SyntaxError's
        location counts, so it opens as its failing line."""
        site = frame_site(self.lines[k]) if 0 <= k < len(self.lines) else None
        if site is None:
            return None
        for tb in (self, *self.chained, *self.sub_exceptions):
            for index, at in enumerate(tb.sites):
                if (at.file, at.line) == site:
                    return tb, index
        return None

    def failing_frame_line(self) -> int:
        """The index in `lines` of the last frame line (0 when none): where the journal puts
        the cursor when the traceback unfolds, so Enter opens the failing frame."""
        for k in range(len(self.lines) - 1, -1, -1):
            if is_frame_line(self.lines[k]):
                return k
        return 0

    @property
    def failing_frame(self) -> Frame | Location | None:
        """The line the failure is at: a SyntaxError's location, else the last frame."""
        sites = self.sites
        return sites[-1] if sites else None

    def to_json(self) -> dict[str, Any]:
        out = {
            "kind": "traceback",
            "pid": self.pid,
            "rank": self.rank,
            "unit": self.unit,
            "start": self.start,
            "lines": self.lines,
            "frames": [f.to_json() for f in self.frames],
            "location": self.location.to_json() if self.location is not None else None,
            "exception": self.exception,
            "message": self.message,
            "chained": [c.to_json() for c in self.chained],
            "complete": self.complete,
            "sub_exceptions": [s.to_json() for s in self.sub_exceptions],
            "truncated": self.truncated,
        }
        if self.relation is not None:
            out["relation"] = self.relation
        cuda = cuda_error(self.message)
        if cuda is not None:
            out["cuda_error"] = cuda
        return out


@dataclass(slots=True)
class _Reading:
    frames: list[Frame]
    location: Location | None
    exception: str | None
    message: str
    chained: list[Traceback]
    sub_exceptions: list[Traceback]

    @classmethod
    def of(cls, block: Traceback, chain: list[Part]) -> _Reading:
        if not chain:
            return cls([], None, None, "", [], [])
        *earlier, last = chain
        return cls(
            last.frames,
            last.location,
            last.exception,
            last.message,
            [_part(block, p) for p in earlier],
            [_member(block, member) for member in last.members],
        )


def _part(block: Traceback, part: Part, chained: list[Traceback] | None = None) -> Traceback:
    tb = Traceback(
        block.lines[part.first : part.end],
        block.times[part.first : part.end],
        pid=block.pid,
        rank=block.rank,
        unit=block.unit,
        invocation_id=block.invocation_id,
        priority=block.priority,
        complete=part.exception is not None,
        relation=part.relation,
    )
    tb._read = _Reading(
        part.frames,
        part.location,
        part.exception,
        part.message,
        chained or [],
        [_member(block, member) for member in part.members],
    )
    tb._read_at = len(tb.lines)
    return tb


def _member(block: Traceback, chain: list[Part]) -> Traceback:
    *earlier, last = chain
    return _part(block, last, [_part(block, p) for p in earlier])
