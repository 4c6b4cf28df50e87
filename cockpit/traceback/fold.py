"""Folding journal lines into records: plain lines and whole traceback blocks.

Lines of several processes interleave in the journal, so each stream (a `_PID`, or the one
stream of plain text) has at most one open traceback, which takes that stream's lines while
they fit Python's traceback grammar. Ranks that share a PID (plain text has none; a launcher
or container runtime that relays its workers' output stamps them all with its own) are told
apart by SGLang's log prefix: a prefixed line of another rank passes by an open traceback
without closing it, and the unprefixed lines after it stay with the traceback.

A traceback closes at the first line of its stream that cannot continue it, at an exit of
its unit (any message of PID 1 about the unit), or on `close()`. journald may read a dying
process's last lines after systemd reported the exit, so a traceback closed by an exit
takes its stream's next line back if that line fits and comes from the same invocation.

A line that looks like a frame while no traceback is open is a plain line, unless the next
line of its stream continues it as a traceback would: then it is the start of a traceback
whose head was cut off (`tail -20`), or of a SyntaxError printed without a header, and the
record changes from a line into a traceback in place.

Per line the common case is three string tests, three empty-dict tests and one small object.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any, NamedTuple

from cockpit.systemd.entry import LEFT_OUT, UNKNOWN_PRIORITY, JournalEntry, parse_entry
from cockpit.traceback import native
from cockpit.traceback.grammar import (
    EXCEPTION,
    FENCE,
    FRAME,
    GROUP_HEADER,
    GROUP_TAILS,
    HEADER,
    RELATIONS,
    UNRAISABLE,
    continues_frames,
    glued_rank,
    headerless_group_at,
    is_border,
    is_caret,
    is_group_closing,
    is_group_line,
    is_log_line,
    is_statement,
    log_rank,
    without_fence,
)
from cockpit.traceback.model import TEXT_SOURCE, Line, Traceback
from cockpit.traceback.prefixes import DOCKER_JSON, HELD, PrefixReader

Record = Line | Traceback

# What an open traceback expects next; NATIVE: a stack of native.py, which says itself what it takes.
FRAMES, GROUP, MESSAGE, AFTER_BLANK, MARKER, MARKER_BLANK, NATIVE = range(7)
_NOT_TEXT = ("", " ", "\t")
RANK_LOOKBACK = 5000  # records looked back through for the rank of a stack printed without one
_CODE, _CARETS = 1, 2  # what may follow a frame line that lost its indentation
_OPENING_TAILS = (HEADER, *GROUP_TAILS)  # how the lines that may open a traceback end


class Change(NamedTuple):
    kind: str  # "appended" or "updated"
    index: int  # type: ignore[assignment]  # into Folder.records; a field named like tuple.index, read by name


class BatchChanges(NamedTuple):
    """What one `feed_batch` did: records[first_new:] are new; `updated` lists older ones
    that changed (a traceback took lines, closed, or a line became a traceback)."""

    first_new: int
    updated: list[int]


# Which stream a line belongs to: its process on its node. A deployment's merged journal holds
# the same PID on two hosts; node 0's key is the PID alone, as a unit's journal has always had.
StreamKey = int | tuple[int, int | None] | None


def stream_key(node: int, pid: int | None) -> StreamKey:
    return pid if not node else (node, pid)


class _Open:
    __slots__ = ("tb", "index", "state", "box_closed", "loose")

    def __init__(self, tb: Traceback, index: int, state: int) -> None:
        self.tb = tb
        self.index = index
        self.state = state
        self.box_closed = False
        self.loose = 0  # _CODE, _CARETS: the last frame came without its indentation (a paste), its code may too


class Folder:
    """Incremental: feed entries as they arrive; `records` grows and updates in place."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._open: dict[StreamKey, _Open] = {}
        self._exited: dict[StreamKey, _Open] = {}  # closed by their unit's exit, may take late lines
        self._frame_like: dict[StreamKey, int] = {}  # stream -> index of a Line that looks like a frame
        self._updated: set[int] = set()

    # --- feeding ------------------------------------------------------------------------

    def feed(self, entry: JournalEntry) -> list[Change]:
        n = len(self.records)
        self._entry(entry)
        return self._changes(n)

    def feed_text(self, line: str) -> list[Change]:
        n = len(self.records)
        self._line(line, TEXT_SOURCE)
        return self._changes(n)

    def feed_batch(self, entries: Iterable[JournalEntry]) -> BatchChanges:
        """Many entries at once, with one summary instead of a change per record.

        A line that no traceback could want (the common case) is appended right here. The
        cyclic garbage collector is paused meanwhile: folding makes no cycles, and with a
        large window of records alive its passes cost more than the folding."""
        n = len(self.records)
        opened, exited, frame_like = self._open, self._exited, self._frame_like
        append = self.records.append
        entry_ = self._entry
        collecting = gc.isenabled()
        gc.disable()
        try:
            for entry in entries:
                text = entry.message
                key = entry.pid if not entry.node else (entry.node, entry.pid)  # stream_key, inlined
                if (
                    text.endswith(_OPENING_TAILS)
                    or text.startswith("  ")
                    or "\n" in text
                    or text.startswith(native.OPENING)
                    or native.WATCHDOG in text
                    or (opened and (key in opened or entry.pid == 1))
                    or (exited and key in exited)
                    or (frame_like and key in frame_like)
                ):
                    entry_(entry)
                else:
                    append(Line(text, entry))
        finally:
            if collecting:
                gc.enable()
        updated = sorted(i for i in self._updated if i < n)
        self._updated.clear()
        return BatchChanges(n, updated)

    def close(self, pid: int | None = None) -> list[Change]:
        """Close the open tracebacks of `pid`, or all of them: the input ended or the
        process is gone. An unfinished one stays a record, with complete=False."""
        n = len(self.records)
        for key, op in list(self._open.items()):
            if pid is None or key == pid:
                self._close(op)
        for key in [k for k in self._frame_like if pid is None or k == pid]:
            del self._frame_like[key]
        return self._changes(n)

    def discard(self, count: int) -> None:
        """Forget the oldest `count` records (a bounded window); later indices shift down
        by `count`. An open traceback among them is forgotten too."""
        if count <= 0:
            return
        del self.records[:count]
        for table in (self._open, self._exited):
            for key, op in list(table.items()):
                if op.index < count:
                    del table[key]
                else:
                    op.index -= count
        self._frame_like = {k: i - count for k, i in self._frame_like.items() if i >= count}
        self._updated = {i - count for i in self._updated if i >= count}

    def prepend(self, older: list[Record]) -> None:
        """Put records folded from older entries (paged back from journald) before these; later
        indices shift up. A traceback cut by the page boundary stays two records."""
        if not older:
            return
        n = len(older)
        self.records[0:0] = older
        for table in (self._open, self._exited):
            for op in table.values():
                op.index += n
        self._frame_like = {k: i + n for k, i in self._frame_like.items()}
        self._updated = {i + n for i in self._updated}

    def settled(self) -> int:
        """How many leading records can no longer change: everything before the first open
        traceback, traceback closed by an exit (it may take a late line back) and line that
        may still become a traceback. A stream printer prints and discards those."""
        pending = [op.index for op in self._open.values()]
        pending += [op.index for op in self._exited.values()]
        pending += self._frame_like.values()
        return min(pending, default=len(self.records))

    def release(self, keep: int) -> None:
        """Stop waiting for what is `keep` records or more behind the end: an exited traceback's
        late line, or the next line of a frame-like line's stream. Late lines come within a few
        entries; a stream that never logs again must not hold a stream printer's output for ever."""
        limit = len(self.records) - keep
        for key in [k for k, op in self._exited.items() if op.index < limit]:
            del self._exited[key]
        for key in [k for k, i in self._frame_like.items() if i < limit]:
            del self._frame_like[key]

    @property
    def open_tracebacks(self) -> list[Traceback]:
        return [op.tb for op in self._open.values()]

    # --- one line -----------------------------------------------------------------------

    def _entry(self, entry: JournalEntry) -> None:
        message = entry.message
        if "\n" in message:  # a MESSAGE sent whole over the native protocol
            for text in message.split("\n"):
                self._line(text, entry)
        else:
            self._line(message, entry)

    def _line(self, text: str, entry: JournalEntry) -> None:
        key = stream_key(entry.node, entry.pid)
        if self._open:
            op = self._open.get(key)
            if op is not None and self._continue(op, text, entry):
                return
        if self._exited and key in self._exited and self._reopen(key, text, entry):
            return
        if self._frame_like:
            index = self._frame_like.pop(key, None)
            if index is not None and continues_frames(text):
                self._promote(index, key, text, entry)
                return
        if entry.pid == 1 and self._open:
            self._exit_of(entry.unit, entry.node)
        kind = native.opener(text)
        if kind is not None:
            self._start(text, entry, NATIVE, kind)
            return
        if text.endswith(HEADER):
            self._start(text, entry, GROUP if text.endswith(GROUP_HEADER) else FRAMES)
            return
        if text.endswith(GROUP_TAILS) and headerless_group_at(text) >= 0:
            self._start(text, entry, GROUP)
            return
        if text.startswith('  File "') and FRAME.match(text):
            self._frame_like[key] = len(self.records)
        self.records.append(Line(text, entry))

    def _continue(self, op: _Open, text: str, entry: JournalEntry) -> bool:
        """Let the open traceback take the line; False when it closed instead."""
        state = op.state
        tb = op.tb
        if state == NATIVE:
            assert isinstance(tb, native.NativeStack)
            if tb.takes(text):
                return self._add(op, text, entry)
        elif state == FRAMES:
            if text.startswith("  "):  # frames, code, carets, `[Previous line repeated ...]`
                op.loose = 0
                return self._add(op, text, entry)
            if text.startswith('File "') and FRAME.match("  " + text):  # a paste that lost the indentation
                op.loose = _CODE
                return self._add(op, text, entry)
            if not text.endswith(HEADER):
                rank = log_rank(text)
                if rank is not None:
                    if (rank or None) != tb.rank:
                        self.records.append(Line(text, entry))  # another rank of a shared PID
                        return True
                elif (
                    text[:1] not in _NOT_TEXT
                    and EXCEPTION.match(without_fence(text))
                    and not (op.loose == _CODE and is_statement(text))
                ):
                    op.state = MESSAGE
                    tb.complete = not tb.truncated
                    return self._add(op, text, entry)
                elif (op.loose == _CODE and text and text != FENCE) or (op.loose and is_caret(text)):
                    op.loose = _CARETS  # the code line of that frame, then its carets
                    return self._add(op, text, entry)
        elif state == GROUP and is_group_line(text):
            op.box_closed = is_group_closing(text)
            tb.complete = op.box_closed and not tb.truncated
            return self._add(op, text, entry)
        elif state == GROUP and not op.box_closed:
            rank = log_rank(text)
            if rank is not None:
                if (rank or None) != tb.rank:
                    self.records.append(Line(text, entry))
                    return True
            elif not (text.endswith(HEADER) or is_log_line(text)):
                # a message line Python 3.11's printer left without the box's margin
                return self._add(op, text, entry)
        elif state in (MESSAGE, GROUP):  # after the last exception line (or box)
            if text in RELATIONS:  # the journal has no blank line before it: journald drops them
                op.state = MARKER
                tb.complete = False
                return self._add(op, text, entry)
            if text == "":
                op.state = AFTER_BLANK
                return self._add(op, text, entry)
            if state == MESSAGE and not (
                text.endswith(HEADER)
                or is_log_line(text)
                or native.ends_a_message(text)
                or text == FENCE
                or is_border(text)
                or text.startswith(UNRAISABLE)
            ):
                return self._add(op, text, entry)
        elif state == AFTER_BLANK:
            if text in RELATIONS:
                op.state = MARKER
                tb.complete = False
                return self._add(op, text, entry)
            if text == "" and tb.lines[-2:-1] != [""]:  # torch's CUDA messages end in a newline: two blanks
                return self._add(op, text, entry)
        elif state == MARKER and text == "":
            op.state = MARKER_BLANK
            return self._add(op, text, entry)
        else:  # MARKER or MARKER_BLANK: the next part of the chain starts
            if text == HEADER:
                op.state = FRAMES
                return self._add(op, text, entry)
            if text == "  " + GROUP_HEADER or headerless_group_at(text) == 0:
                op.state = GROUP
                op.box_closed = False
                return self._add(op, text, entry)
            if text[:1] not in _NOT_TEXT and EXCEPTION.match(text):  # a part that was never raised
                op.state = MESSAGE
                tb.complete = not tb.truncated
                return self._add(op, text, entry)
        self._close(op)
        return False

    def _add(self, op: _Open, text: str, entry: JournalEntry) -> bool:
        tb = op.tb
        tb.lines.append(text)
        tb.times.append(entry.realtime_us)
        if entry.priority != UNKNOWN_PRIORITY and (tb.priority is None or entry.priority < tb.priority):
            tb.priority = entry.priority
        self._updated.add(op.index)
        return True

    def _start(self, text: str, entry: JournalEntry, state: int, kind: str | None = None) -> None:
        """Open a record at this line: a traceback, or with `kind` a stack of native.py's."""
        fields: dict[str, Any] = {
            "pid": entry.pid,
            "rank": glued_rank(text) or None,
            "unit": entry.unit,
            "cursor": entry.cursor,
            "invocation_id": entry.invocation_id,
            "priority": None if entry.priority == UNKNOWN_PRIORITY else entry.priority,
            "open": True,
            "node": entry.node,
        }
        times = [entry.realtime_us]
        if kind and fields["rank"] is None:
            fields["rank"] = self._rank_before(entry)
        tb = native.NativeStack(kind, [text], times, **fields) if kind else Traceback([text], times, **fields)
        self._open[stream_key(entry.node, entry.pid)] = _Open(tb, len(self.records), state)
        self.records.append(tb)

    def _rank_before(self, entry: JournalEntry) -> str | None:
        """The rank the process's own SGLang lines said last: a faulthandler dump, a C++ abort or a
        CUDA error is printed by C code, with no SGLang prefix. Looked up only when such a stack
        starts (rare), so no line pays for it."""
        for record in reversed(self.records[-RANK_LOOKBACK:]):
            node = record.entry.node if isinstance(record, Line) else record.node
            if record.pid == entry.pid and node == entry.node and record.rank:
                return record.rank
        return None

    def _promote(self, index: int, key: StreamKey, text: str, entry: JournalEntry) -> None:
        first = self.records[index]
        assert isinstance(first, Line)
        lines = [first.text, text]
        source = first.entry
        tb = Traceback(
            lines,
            [source.realtime_us, entry.realtime_us],
            pid=source.pid,
            rank=None,
            unit=source.unit,
            cursor=source.cursor,
            invocation_id=source.invocation_id,
            priority=min((p for p in (source.priority, entry.priority) if p != UNKNOWN_PRIORITY), default=None),
            open=True,
            truncated=", in " in first.text,
            node=source.node,
        )
        self.records[index] = tb
        self._open[key] = _Open(tb, index, FRAMES)
        self._updated.add(index)

    def _close(self, op: _Open) -> None:
        tb = op.tb
        tb.open = False
        del self._open[stream_key(tb.node, tb.pid)]
        self._updated.add(op.index)

    def _exit_of(self, unit: str | None, node: int) -> None:
        if unit is None:
            return
        for key, op in list(self._open.items()):
            if op.tb.unit == unit and op.tb.node == node:
                self._close(op)
                self._exited[key] = op

    def _reopen(self, key: StreamKey, text: str, entry: JournalEntry) -> bool:
        op = self._exited.pop(key)
        if entry.invocation_id != op.tb.invocation_id:  # the PID was used again by a later run
            return False
        op.tb.open = True
        self._open[key] = op
        return self._continue(op, text, entry)

    def _changes(self, n: int) -> list[Change]:
        changes = [Change("updated", i) for i in sorted(self._updated) if i < n]
        changes += [Change("appended", i) for i in range(n, len(self.records))]
        self._updated.clear()
        return changes


def feed_lines(folder: Folder, lines: Iterable[bytes], batch: int = 10_000, reader: PrefixReader | None = None) -> int:
    """Feed raw lines, each a journal entry (a JSON object with a MESSAGE) or a line of text, so
    that an export and a log copied from a terminal both fold, mixed or not. A line of text has
    its prefixes read off (journalctl's text formats, collectors', loggers': see prefixes), so it
    folds by the PID and host it names; `reader` carries what spans calls (a streamed input).
    Returns how many entries came without their MESSAGE (an export made without `--all`)."""
    reader = reader or PrefixReader()
    entries: list[JournalEntry] = []
    left_out = 0
    for line in lines:
        entry = parse_entry(line) if line.startswith(b"{") else None
        if entry is not None:
            left_out += entry.message is LEFT_OUT  # the parser's own stand-in, not a look-alike text
            entries.append(entry)
        elif line.startswith(DOCKER_JSON) and (prefix := reader.read_docker(line)) is not None:
            if prefix is not HELD:
                entries.append(reader.entry(prefix))
        else:
            text = line.decode("utf-8", "replace")
            text = text[:-1] if text.endswith("\r") else text
            prefix = reader.read(text)
            if prefix is None:  # bare text: in order with the entries before it
                folder.feed_batch(entries)
                entries = []
                folder.feed_text(text)
                continue
            if prefix is not HELD:
                entries.append(reader.entry(prefix))
        if len(entries) >= batch:
            folder.feed_batch(entries)
            entries = []
    folder.feed_batch(entries)
    return left_out


def end_of_input(folder: Folder, reader: PrefixReader) -> None:
    """The input is over: a partial line still held is a line of its own, and every traceback closes."""
    folder.feed_batch([reader.entry(p) for p in reader.flush()])
    folder.close()


def fold_lines(lines: Iterable[bytes]) -> Folder:
    """Everything read, every traceback closed (a finished export or a pasted log)."""
    folder, reader = Folder(), PrefixReader()
    feed_lines(folder, lines, reader=reader)
    end_of_input(folder, reader)
    return folder


def fold_entries(entries: Iterable[JournalEntry]) -> list[Record]:
    """The records of a finished journal (not a live one): every traceback closed."""
    folder = Folder()
    folder.feed_batch(entries)
    folder.close()
    return folder.records


def last_with_frames(records: Iterable[Record]) -> Traceback | None:
    """The last traceback that has a frame to open: the one a crash report is about."""
    return next((r for r in reversed(list(records)) if isinstance(r, Traceback) and r.sites), None)
