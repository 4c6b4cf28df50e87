"""Which batches of a unit's journal the start scans (`HealthScan`, `StartupScan`) can pass over.

Both read a start's journal line by line for the few lines they act on: the ready line, an error
marker, a start-up milestone after the prefix's `] `, systemd's own word about the unit, and the
first or last line of each start. A flood's batch holds none of those but its first and last
line: one start's lines, none of systemd's, none read further. Seen once for both scans, in C
(a list of the batch's invocation IDs counted, one search of its joined messages), such a batch
costs them 0.17 us a line against 0.46 for their two loops, of the 6.9 us a line the app spent
at 45,000 lines/s (benchmarks/bench_app_flood.py, docs/facts.md).
"""

from __future__ import annotations

import re

from cockpit.sglang.server import health, startup
from cockpit.systemd.entry import JournalEntry

# A prefix's end, then the start of a line either scan reads further: the scans' own texts, so a
# text a scan comes to watch is never passed over here. It may match a `] ` that is not the
# line's first, which only sends the batch the slow way.
_TEXTS = dict.fromkeys((*health.WATCHED, *startup.WATCHED))  # each once, in a fixed order
_READ = re.compile(r"\] (?:" + "|".join(re.escape(text) for text in _TEXTS) + ")")


def quiet_run(entries: list[JournalEntry]) -> str | None:
    """The invocation ID of a batch that is one run of that start's lines, none of them
    systemd's (PID 1) and none that a start scan reads beyond its stamp; else None."""
    if not entries or (invocation := entries[0].invocation_id) is None:
        return None
    if [e.invocation_id for e in entries].count(invocation) != len(entries):
        return None
    if 1 in [e.pid for e in entries]:
        return None
    if _READ.search("\n".join([e.message for e in entries])):
        return None
    return invocation
