"""What the journal pane shows, row by row, kept apart from how it draws.

The folder turns journal entries into records (lines and whole tracebacks); this model maps
records to rows: one row per line, one per folded traceback, a header plus one row per line
for an expanded one, and a separator where a new invocation of the unit begins. Rows are a
sorted list of (record number, part) pairs, so finding a record's rows is a bisection and
expanding one traceback inserts only its lines. Record numbers count from the first record
ever folded, so dropping the oldest records (the bounded window) only cuts a prefix of the
rows. It lives in the core, not the UI: the session folds each batch into it once, and every
subscriber (the journal view, the side list, the crash-loop line) reads the same records.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.status import STOP_JOB, exit_words, main_exit_of, stop_job_began
from cockpit.traceback.fold import Folder, fold_entries
from cockpit.traceback.grammar import log_rank
from cockpit.traceback.model import Line, Traceback

MAIN = -1  # a line, or a traceback's one folded row (its header when expanded)
SEPARATOR = -2  # the restart separator shown above a record
Row = tuple[int, int]


@dataclass(frozen=True)
class Filter:
    """Which records to show: all of these that are set must hold."""

    max_priority: int | None = None  # 3 = errors and worse, 4 = warnings and worse
    rank: str | None = None
    pid: int | None = None
    pattern: re.Pattern[str] | None = None
    tracebacks_only: bool = False
    node: int | None = None  # a deployment's merged journal: one node's records
    # Words that make a line an error whatever its priority: SGLang logs everything at info
    # (`Health check failed`, `Scheduler hit an exception`), which `err` must not leave out.
    error_texts: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, error_texts: tuple[str, ...] = ()) -> Filter:
        """`err`, `warn`, `rank:TP3`, `pid:1234`, `node:1`, `tb`, anything else a regular expression."""
        kwargs: dict = {"error_texts": error_texts}
        words = []
        for token in text.split():
            low = token.lower()
            if low in ("err", "error", "errors"):
                kwargs["max_priority"] = 3
            elif low in ("warn", "warning", "warnings"):
                kwargs["max_priority"] = 4
            elif low.startswith("rank:"):
                kwargs["rank"] = token[5:].upper()
            elif low.startswith("pid:") and token[4:].isdigit():
                kwargs["pid"] = int(token[4:])
            elif low.startswith("node:") and token[5:].lstrip("n").isdigit():
                kwargs["node"] = int(token[5:].lstrip("n"))
            elif low in ("tb", "tracebacks"):
                kwargs["tracebacks_only"] = True
            else:
                words.append(token)
        if words:
            try:
                kwargs["pattern"] = re.compile(" ".join(words))
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
        return cls(**kwargs)

    @property
    def active(self) -> bool:
        return any(
            v not in (None, False)
            for v in (self.max_priority, self.rank, self.pid, self.pattern, self.tracebacks_only, self.node)
        )

    def _says_error(self, record: Line) -> bool:
        """A line that is an error by its words: systemd's of a start that failed (`Main process
        exited, code=exited, status=1/FAILURE`, `Failed with result ...`), or one of the
        server's own (`error_texts`)."""
        text = record.text
        if record.pid == 1:
            how = main_exit_of(text)
            return (how is not None and how != "exited 0/SUCCESS") or "Failed with result" in text
        return any(word in text for word in self.error_texts)

    def accepts(self, record: Line | Traceback) -> bool:
        if self.node is not None and (record.node if isinstance(record, Traceback) else record.entry.node) != self.node:
            return False
        if isinstance(record, Traceback):
            if (
                self.max_priority is not None
                and (record.priority or 6) > self.max_priority
                and record.exception is None
            ):
                return False  # a traceback is an error whatever priority stderr gave it
            if self.rank is not None and record.rank != self.rank:
                return False
            if self.pid is not None and record.pid != self.pid:
                return False
            return self.pattern is None or any(self.pattern.search(line) for line in record.lines)
        if self.tracebacks_only:
            return False
        if (
            self.max_priority is not None
            and (record.priority if record.priority is not None else 6) > self.max_priority
            and not self._says_error(record)
        ):
            return False
        if self.rank is not None and log_rank(record.text) != self.rank:
            return False
        if self.pid is not None and record.pid != self.pid:
            return False
        return self.pattern is None or self.pattern.search(record.text) is not None


class JournalRows:
    """Records folded from a unit's journal, and the rows they show as."""

    def __init__(self, window: int = 200_000, unit: str | None = None) -> None:
        self.window = window
        self.unit = unit
        self.nodes = 1  # a deployment's merged journal holds the records of this many nodes
        self.folder = Folder()
        self.rows: list[Row] = []
        self.expanded: set[int] = set()  # id() of expanded tracebacks
        self.filter = Filter()
        self.separators: dict[int, str] = {}  # record number -> separator text
        # Each node's current start and how its last one ended (one node but in a deployment's
        # merged journal, where the nodes' starts interleave and are each their own).
        self._invocation: dict[int, str] = {}
        self._last_exit: dict[int, str] = {}
        self._stopped: set[str] = set()  # starts a stop job ended (systemd's `Stopping` line names each)
        self.discarded = 0  # records dropped from the front so far: the number of records[0]
        self.rows_dropped = 0  # rows dropped from the front with them, so far (a paused view shifts by it)
        self.tracebacks_changed = False  # set when a batch brought or changed a traceback
        # Record numbers of the tracebacks, ascending: the side list is asked for after every
        # batch a crash prints, and scanning a 200,000-record window for it took 90 ms.
        self._traceback_numbers: list[int] = []

    @property
    def records(self) -> list[Line | Traceback]:
        return self.folder.records

    def record(self, number: int) -> Line | Traceback:
        return self.folder.records[number - self.discarded]

    # -- feeding ----------------------------------------------------------------------------

    def add(self, entries: list[JournalEntry]) -> int:
        """Fold a batch in; returns how many rows were added at the end, or -1 when the rows were
        rebuilt (an unfolded traceback took lines) and the view must redraw everything."""
        before = len(self.rows)
        changes = self.folder.feed_batch(entries)
        records = self.folder.records
        base = self.discarded
        grew_expanded = any(id(records[i]) in self.expanded for i in changes.updated if i < len(records))
        numbers = self._traceback_numbers
        for i in changes.updated:  # a line that turned out to open a traceback
            if i < len(records) and isinstance(records[i], Traceback):
                at = bisect.bisect_left(numbers, base + i)
                if at == len(numbers) or numbers[at] != base + i:
                    numbers.insert(at, base + i)
        if self._note_new(changes.first_new) or changes.updated:
            self.tracebacks_changed = True
        if grew_expanded:
            self.rebuild()
        else:
            self._append_rows(base + changes.first_new, base + len(records))
        added = len(self.rows) - before  # counted before the window drops rows at the front
        if len(records) > self.window:
            self._drop(len(records) - self.window + self.window // 10)  # in chunks
        return -1 if grew_expanded else added

    def prepend(self, entries: list[JournalEntry]) -> int:
        """Older entries, paged back from journald, before everything shown; returns the rows
        added at the top. Restart separators are drawn inside the page, not across its edge."""
        records = fold_entries(entries)
        if not records:
            return 0
        self.folder.prepend(records)
        self.discarded -= len(records)
        self._traceback_numbers[0:0] = [self.discarded + k for k, r in enumerate(records) if isinstance(r, Traceback)]
        saved = (self._invocation, self._last_exit, self._stopped)
        self._invocation, self._last_exit, self._stopped = {}, {}, set()
        for k, record in enumerate(records):
            self._note_invocation(self.discarded + k, record)
        self._invocation, self._last_exit, self._stopped = saved
        before = len(self.rows)
        tail, self.rows = self.rows, []
        self._append_rows(self.discarded, self.discarded + len(records))
        self.rows.extend(tail)
        if self._traceback_numbers and self._traceback_numbers[0] < self.discarded + len(records):
            self.tracebacks_changed = True
        return len(self.rows) - before

    @property
    def oldest_cursor(self) -> str | None:
        records = self.folder.records
        return records[0].cursor if records else None

    def _drop(self, count: int) -> None:
        self.folder.discard(count)
        self.discarded += count
        cut = bisect.bisect_left(self.rows, (self.discarded, SEPARATOR))
        self.rows_dropped += cut
        del self.rows[:cut]
        del self._traceback_numbers[: bisect.bisect_left(self._traceback_numbers, self.discarded)]
        self.separators = {n: t for n, t in self.separators.items() if n >= self.discarded}

    def _note_new(self, first: int) -> bool:
        """The records from index `first` on: each traceback's number noted, and each line that
        can move a node's invocation (systemd's, or another start's) noted by _note_invocation;
        True when there was a traceback. One loop, and a line of the start already noted passes
        with a look at its entry (a call of _note_invocation per line was a sixth of a flood's
        append)."""
        records, base, current = self.folder.records, self.discarded, self._invocation
        numbers, note = self._traceback_numbers, self._note_invocation
        found = False
        for i in range(first, len(records)):
            record = records[i]
            if type(record) is Line:
                entry = record.entry
                invocation = entry.invocation_id
                if entry.pid != 1 and (invocation is None or invocation is current.get(entry.node)):
                    continue
            else:
                numbers.append(base + i)
                found = True
            note(base + i, record)
        return found

    def _note_invocation(self, number: int, record: Line | Traceback) -> None:
        if isinstance(record, Line):
            entry = record.entry
            node = entry.node
            if entry.pid == 1:  # systemd's own word about the unit: remember how it last ended, and why
                ended = main_exit_of(record.text)
                if ended:
                    self._last_exit[node] = ended
                if stop_job_began(entry.pid, record.text) and entry.invocation_id:
                    self._stopped.add(entry.invocation_id)
                return
            invocation = entry.invocation_id
        else:
            node, invocation = record.node, record.invocation_id
        now = self._invocation.get(node)
        if invocation and invocation != now:
            if now is not None:
                ended = exit_words(self._last_exit.pop(node, None), STOP_JOB if now in self._stopped else None)
                self._stopped.discard(now)
                exit_text = f" · previous exit: {ended}" if ended else ""
                where = f"n{node} " if self.nodes > 1 else ""
                self.separators[number] = f"{where}restart · invocation {invocation[:12]}{exit_text}"
            self._invocation[node] = invocation
            self._last_exit.pop(node, None)

    def _append_rows(self, first: int, end: int) -> None:
        """The rows of records `first` to `end` (numbers), at the end: one loop for a batch, as
        a flood's batch is thousands of records."""
        records, base = self.folder.records, self.discarded
        accepts = self.filter.accepts if self.filter.active else None
        separators, expanded, rows = self.separators, self.expanded, self.rows
        for number in range(first, end):
            record = records[number - base]
            if accepts is not None and not accepts(record):
                continue
            if number in separators:
                rows.append((number, SEPARATOR))
            rows.append((number, MAIN))
            if isinstance(record, Traceback) and id(record) in expanded:
                rows.extend((number, k) for k in range(len(record.lines)))

    def rebuild(self) -> None:
        self.rows = []
        self._append_rows(self.discarded, self.discarded + len(self.folder.records))

    # -- folding ----------------------------------------------------------------------------

    def row_of(self, number: int) -> int:
        """The row of a record's MAIN row (or where it would be)."""
        return bisect.bisect_left(self.rows, (number, MAIN))

    def toggle(self, number: int) -> None:
        record = self.record(number)
        if not isinstance(record, Traceback):
            return
        at = self.row_of(number) + 1
        if id(record) in self.expanded:
            self.expanded.discard(id(record))
            end = at
            while end < len(self.rows) and self.rows[end][0] == number:
                end += 1
            del self.rows[at:end]
        else:
            self.expanded.add(id(record))
            self.rows[at:at] = [(number, k) for k in range(len(record.lines))]

    def set_all(self, expanded: bool) -> None:
        self.expanded = {id(self.record(n)) for n in self._traceback_numbers} if expanded else set()
        self.rebuild()

    def set_filter(self, new: Filter) -> None:
        self.filter = new
        self.rebuild()

    # -- reading rows -----------------------------------------------------------------------

    def record_at(self, row: int) -> Line | Traceback:
        return self.record(self.rows[row][0])

    def text(self, row: int) -> str:
        """The row's text without decoration (what search matches)."""
        number, part = self.rows[row]
        if part == SEPARATOR:
            return self.separators.get(number, "restart")
        record = self.record(number)
        if isinstance(record, Traceback):
            return record.lines[part] if part >= 0 else record.lines[0] if record.lines else ""
        return record.text

    def longest(self, first: int, end: int | None = None) -> int:
        """The length of the longest `text` of the rows `first` to `end` (the last by default),
        in one pass (the view's width grows with each batch; a call of `text` per row was a
        tenth of the append)."""
        records, base, separators = self.folder.records, self.discarded, self.separators
        best = 0
        for number, part in self.rows[first:end]:
            if part == SEPARATOR:
                n = len(separators.get(number, "restart"))
            else:
                record = records[number - base]
                if type(record) is Line:
                    n = len(record.text)
                else:
                    assert isinstance(record, Traceback)
                    lines = record.lines
                    n = len(lines[part]) if part >= 0 else len(lines[0]) if lines else 0
            if n > best:
                best = n
        return best

    def frame_at(self, row: int) -> tuple[Traceback, int] | None:
        """(the traceback or chained part holding it, frame index) for a `File "...", line N` row."""
        number, part = self.rows[row]
        record = self.record(number)
        if not isinstance(record, Traceback) or part < 0:
            return None
        return record.frame_of_line(part)

    def tracebacks(self) -> list[tuple[int, Traceback]]:
        """(record number, traceback), most recent first: the side list."""
        return [(n, r) for n in reversed(self._traceback_numbers) if isinstance(r := self.record(n), Traceback)]

    def find(self, pattern: re.Pattern[str], start: int, forward: bool = True) -> int | None:
        """The next row after (or before) `start` whose text matches."""
        n = len(self.rows)
        order: Callable[[int], int] = (lambda k: (start + 1 + k) % n) if forward else (lambda k: (start - 1 - k) % n)
        for k in range(n):
            row = order(k)
            if pattern.search(self.text(row)):
                return row
        return None
