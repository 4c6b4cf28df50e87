"""The incident note's data: plain dataclasses that `gather` fills over a host (or the session
fills from memory) and `render` turns into Markdown, so the note is tested without a host."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cockpit.attempts import ORIGINAL, Attempt
from cockpit.sglang.server.logparse import READY_TEXT, ends_server, parse
from cockpit.sglang.server.startup import Startup
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.stacks import StackCapture
from cockpit.systemd.status import UnitStatus
from cockpit.systemd.suppression import Suppression
from cockpit.traceback import Traceback


@dataclass
class SourceExcerpt:
    """A few lines around the failing statement of the last traceback, and its explanation."""

    host: str
    path: str
    line: int  # the line the traceback names
    function: str | None
    start_line: int  # the failing statement
    end_line: int
    first_line: int  # the number of `lines[0]`
    lines: list[str]
    sentence: str | None = None  # what the statement checks, in terms of the server's flags
    values_from: str | None = None  # whose flag values the sentence quotes
    warning: str | None = None  # the file changed after the crash


@dataclass
class Image:
    label: str
    path: str  # relative to the note
    svg: str | None = None
    text: str | None = None
    converter: str | None = None  # what made the PNG ("rsvg-convert 2.54.7")


@dataclass
class Incident:
    host: str
    unit: str
    written_at: float = field(default_factory=time.time)
    period: str = "the unit's current and previous invocation"
    period_start: float | None = None  # epoch seconds of the first journal entry read
    period_end: float | None = None
    entries: int = 0  # journal entries read for the period
    version: str | None = None
    version_from: str | None = None  # "/server_info", "the installed package"
    standin: str | None = None  # the lab's stand-in says so in /server_info
    status: UnitStatus | None = None
    command: list[str] | None = None  # Unit.exec(): the argv systemd runs
    attempts: list[Attempt] = field(default_factory=list)
    tracebacks: list[Traceback] = field(default_factory=list)
    source: SourceExcerpt | None = None
    load_run: dict[str, Any] | None = None
    images: list[Image] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)  # systemd's messages and readiness, by time
    gpus: list[str] = field(default_factory=list)  # per GPU: used, and who holds it (gpu_use.summary_lines)
    suppressions: list[Suppression] = field(default_factory=list)  # journald dropped lines of the period
    stacks: StackCapture | None = None  # the last py-spy dump of the unit's processes, where one was taken
    startups: list[Startup] = field(default_factory=list)  # each start's phases, latest first
    problems: list[str] = field(default_factory=list)


# -- Markdown helpers ---------------------------------------------------------------------------


def unit_events(entries: Iterable[JournalEntry]) -> list[tuple[float, str]]:
    """systemd's messages about the unit (started, exited, restarting), SGLang's ready line, and
    its lines of a server ending itself: a child that died is the crash of its start, even
    where no traceback says so (a kill -9 of a scheduler at tp 1 prints none)."""
    out = []
    for e in entries:
        if e.realtime_us and (e.pid == 1 or READY_TEXT in e.message or ends_server(parse(e.message))):
            out.append((e.realtime_us / 1e6, e.message))
    return out


def attempts_in(attempts: Iterable[Attempt], start: float | None, end: float | None = None) -> list[Attempt]:
    """The attempts that ran during [start, end] (all of them when start is None): one that
    started just before the period but watched the restart it caused belongs to it."""
    return [
        a
        for a in attempts
        if a.outcome != ORIGINAL  # the way back kept, not something that ran
        and (start is None or a.started_at + (a.seconds or 0.0) >= start)
        and (end is None or a.started_at <= end)
    ]
