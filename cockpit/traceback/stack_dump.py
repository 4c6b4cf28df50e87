"""py-spy dumps folded like tracebacks: one record per process, its rank's label in front, so the
journal's own view folds, unfolds and opens them (Enter on a frame opens its source).

Each process's main thread is written out as Python writes a traceback (`File "…", line N, in
f`, outermost first), under a first line with SGLang's log prefix (so the fold reads the rank
from it, as from a crash) and closed by one `PySpyDump: …` line that names where the thread
waits: the innermost frame outside the standard library. The other threads of a process are
in `thread_text` (the incident note, `cockpit stacks`).
"""

from __future__ import annotations

import re
import time

from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.processes import rank_of
from cockpit.systemd.stacks import ProcessStack, StackFrame, ThreadStack
from cockpit.traceback.journal_rows import JournalRows

TRACEBACK = "Traceback (most recent call last):"
DUMP = "PySpyDump"  # the closing line's name: what the side list shows, never an exception of the server
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)")


def where(thread: ThreadStack) -> StackFrame | None:
    """The innermost frame outside the standard library (where the program itself waits)."""
    return next((f for f in thread.frames if not _STDLIB.search(f.file)), thread.frames[0] if thread.frames else None)


def headline(stack: ProcessStack) -> str:
    """`TP3 sglang::scheduler_TP3 (PID 4242): MainThread in _wait_for_peers (/path/worker.py:92)`."""
    rank = rank_of(stack.title)
    main = stack.main
    spot = where(main) if main is not None else None
    at = f": {main.name} in {spot.function} ({spot.file}:{spot.line})" if main is not None and spot else ""
    return f"{rank + ' ' if rank else ''}{stack.named}{at}"


def thread_text(stack: ProcessStack, thread: ThreadStack) -> list[str]:
    """The thread as Python writes a traceback, with its closing PySpyDump line."""
    state = "running" if thread.active else "idle"
    lines = [TRACEBACK]
    lines += [f'  File "{f.file}", line {f.line}, in {f.function}' for f in reversed(thread.frames)]
    spot = where(thread)
    at = f" in {spot.function} ({spot.file.rsplit('/', 1)[-1]}:{spot.line})" if spot is not None else ""
    lines.append(f"{DUMP}: {state}{at}, {thread.name} of {stack.named}")
    return lines


def stack_entries(stacks: list[ProcessStack], at: float | None = None) -> list[JournalEntry]:
    """Journal-like entries of each process's main thread (or its error), one process after the
    other, stamped `at` (when the dump was taken)."""
    when = time.time() if at is None else at
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    realtime = int(when * 1e6)
    out = []
    for stack in stacks:
        rank = rank_of(stack.title)
        head = f"[{stamp}{' ' + rank if rank else ''}] {stack.named}, "
        main = stack.main
        if main is None:
            lines = [head + f"no stack: {stack.error or 'py-spy found no thread'}"]
        else:
            first, *rest = thread_text(stack, main)  # the header line opens the traceback, as a crash's does
            lines = [head + f"{len(stack.threads)} thread(s); {main.name}, as py-spy dumped it: {first}", *rest]
        out += [JournalEntry(message=line, realtime_us=realtime, pid=stack.pid) for line in lines]
    return out


def folded(stacks: list[ProcessStack], at: float | None = None) -> JournalRows:
    """The dumps as journal rows: one folded record per process."""
    rows = JournalRows()
    rows.add(stack_entries(stacks, at))
    return rows
