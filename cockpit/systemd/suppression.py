"""journald's own losses: `Suppressed N messages from UNIT`.

journald rate-limits each service (by default 10,000 messages per 30 s, the burst scaled up
with free disk space); eight ranks printing tracebacks at once, or a decode-log flood, can pass
that, and the lines past it are dropped. journald says so only in an entry of its own (its
`OBJECT_SYSTEMD_UNIT` is the unit, so `journalctl -u UNIT` shows it), written just before the
unit's first message after the window. The dropped lines lie in that window, which ends after
the last of the unit's lines journald kept before it: the period marked is that last line's
time less one window, to journald's entry. Every traceback begun in it may have lost lines.
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
    kept_last: float | None = None  # the unit's last line journald kept before it (epoch seconds)

    @property
    def start(self) -> float:
        """The earliest a dropped message can be from (one rate-limit window before the last
        kept line; journald.conf may set a longer window than the default)."""
        return (self.kept_last if self.kept_last is not None else self.at) - DEFAULT_WINDOW_S

    def covers(self, epoch: float) -> bool:
        return self.start <= epoch <= self.at

    def sentence(self) -> str:
        return (
            f"journald dropped {self.dropped} messages from {self.unit} between {_clock(self.start)} and "
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


class SuppressionScan:
    """journald's reports in a unit's journal read in order, batch after batch (the time of
    the unit's last line is carried from one batch to the next)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.kept_last: float | None = None
        self.found: list[Suppression] = []  # every report so far

    def feed(self, entries: list[JournalEntry]) -> list[Suppression]:
        """The reports among `entries` (also added to `found`)."""
        found = []
        for entry in entries:
            if entry.realtime_us is None:
                continue
            m = _SUPPRESSED.match(entry.message) if entry.identifier == JOURNALD else None
            if m is None:
                self.kept_last = entry.realtime_us / 1e6
            elif m.group(2) == self.unit:
                found.append(Suppression(entry.realtime_us / 1e6, int(m.group(1)), self.unit, self.kept_last))
        self.found += found
        return found
