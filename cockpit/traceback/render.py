"""Records as text a person reads: one-line summaries, and blocks for an incident ticket."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from cockpit.fmt import count
from cockpit.traceback.model import Line, Traceback


def _what(tb: Traceback) -> str:
    if tb.exception is not None:
        return tb.exception
    return "no exception line yet" if tb.open else "no exception line"


def _when(tb: Traceback) -> str | None:
    start = tb.times[0] if tb.times else None
    if start is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start / 1_000_000))


def site_title(tb: Traceback, index: int) -> str:
    """`FILE:LINE · frame 3 of 4 · fn` (or `· the error's location`): the source pane's title."""
    site = tb.sites[index]
    what = "the error's location" if site is tb.location else f"frame {index + 1} of {len(tb.frames)} · {site.function}"
    return f"{site.file}:{site.line} · {what}"


def header(tb: Traceback) -> str:
    """`── TP3 pid 1234 · AssertionError · 23 lines ──`, with what is unusual about it."""
    who = " ".join(p for p in (tb.rank, f"pid {tb.pid}" if tb.pid is not None else None) if p)
    parts = [who] if who else []
    parts.append(_what(tb))
    parts.append(count(len(tb.lines), "line"))
    if tb.chained:
        parts.append(f"{len(tb.chained)} chained")
    if tb.truncated:
        parts.append("start cut off")
    elif not tb.complete:
        parts.append("still open" if tb.open else "incomplete")
    when = _when(tb)
    if when:
        parts.append(when)
    return f"── {' · '.join(parts)} ──"


def summary(tb: Traceback) -> str:
    """One row for a folded traceback: `TP3 AssertionError: the message's first line`."""
    message = tb.message.split("\n", 1)[0].strip()
    text = _what(tb) + (f": {message}" if message else "")
    return f"{tb.rank} {text}" if tb.rank else text


def as_text(records: Iterable[Line | Traceback]) -> Iterator[str]:
    """Every record's lines, each traceback whole under its header, in record order."""
    for record in records:
        if isinstance(record, Traceback):
            yield header(record)
            yield from record.lines
        else:
            yield record.text
