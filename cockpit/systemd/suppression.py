"""journald's own losses: `Suppressed N messages from UNIT`.

journald rate-limits each service (by default 10,000 messages per 30 s); eight ranks printing
tracebacks at once, or a decode-log flood, can pass that, and the lines past it are dropped.
journald says so only in an entry of its own, written when the unit's next message after the
window gets through. Every traceback printed in that window may have lost lines, so the period
(the window before that entry) is marked, and the way to lift the limit is said.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from cockpit.systemd.entry import JournalEntry

JOURNALD = "systemd-journald"
DEFAULT_WINDOW_S = 30.0  # journald.conf's RateLimitIntervalSec= default
_SUPPRESSED = re.compile(r"^Suppressed (\d+) messages from (\S+)$")


@dataclass(frozen=True)
class Suppression:
    at: float  # epoch seconds of journald's entry
    dropped: int
    unit: str

    @property
    def start(self) -> float:
        """The earliest a dropped message can be from (one rate-limit window before)."""
        return self.at - DEFAULT_WINDOW_S

    def covers(self, epoch: float) -> bool:
        return self.start <= epoch <= self.at

    def sentence(self) -> str:
        return (
            f"journald dropped {self.dropped} messages from {self.unit} in the {DEFAULT_WINDOW_S:.0f} s before "
            f"{_clock(self.at)} (its rate limit): the tracebacks of that period may be incomplete. {lift(self.unit)}"
        )


def lift(unit: str) -> str:
    return (
        f"To lift the limit for the unit: `systemctl edit {unit}`, add `[Service]` "
        "`LogRateLimitIntervalSec=0`, then restart it (journald.conf's `RateLimitIntervalSec=` and "
        "`RateLimitBurst=` set it for every unit)."
    )


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def suppression_of(entry: JournalEntry, unit: str) -> Suppression | None:
    """The entry as journald's report of messages it dropped from `unit`, or None."""
    if entry.identifier != JOURNALD or entry.realtime_us is None:
        return None
    m = _SUPPRESSED.match(entry.message)
    if m is None or m.group(2) != unit:
        return None
    return Suppression(entry.realtime_us / 1e6, int(m.group(1)), unit)
