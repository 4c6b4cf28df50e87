"""Which starts of a unit were stopped and which crashed, and how each ended, from its journal.

After a stop job systemd leaves a unit exactly as after a crash when the server dies badly of
the stop (SGLang under `KillMode=control-group`: `failed`, `Result=signal`, 9/KILL, as after a
kill -9 of a rank: docs/facts.md), and it keeps no record of the job once it is done. Its
journal does: `Stopping UNIT...` with the stopped start's invocation ID, before that start
ends (status.stop_job_began). The status poll, the incident note and the restart watch read
the unit's state through this, so a stop is never drawn as a crash.

systemd also forgets how a start's main process ended once the next one begins (an automatic
restart): ExecMainCode and ExecMainStatus are the new start's. Its journal's `Main process
exited, code=killed, status=9/KILL` of the start before keeps it, and `cockpit status`, which
reads once with no memory of earlier polls, says the previous exit from that line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.status import STOP_JOB, UnitStatus, main_exit_of, stop_job_began

# systemd's lines about a unit that this reads, for journalctl's --grep (PCRE2): a start's
# beginning and the stop job and exit that end it.
PATTERN = "^Started |^Stopping |Main process exited, code="


class Endings:
    """The invocations a stop job ended, who asked where the cockpit did, how each start's main
    process ended, and the start before each start (the journal's order), fed every batch of
    the unit's journal."""

    def __init__(self) -> None:
        self._stopped: set[str] = set()
        self._asked: dict[str, str] = {}  # invocation -> "the cockpit's restart", ...
        self._before: dict[str, str | None] = {}  # invocation -> the one whose lines came before its first
        self._exits: dict[str, tuple[str, float | None]] = {}  # invocation -> (`killed 9/KILL`, when)
        self._last: str | None = None

    def feed(self, entries: Iterable[JournalEntry]) -> Endings:
        """Read a batch; a line costs a comparison or two (a flood of decode lines passes here)."""
        for entry in entries:
            invocation = entry.invocation_id
            if invocation is None:
                continue
            if invocation != self._last:
                if invocation not in self._before:  # a late line of an older start names no new one
                    self._before[invocation] = self._last
                self._last = invocation
            if entry.pid != 1:
                continue
            if stop_job_began(entry.pid, entry.message):
                self._stopped.add(invocation)
            elif (how := main_exit_of(entry.message)) is not None:
                self._exits[invocation] = (how, entry.realtime_us / 1e6 if entry.realtime_us else None)
        return self

    def asked(self, invocation: str | None, who: str) -> None:
        """The cockpit is about to stop `invocation` itself (`who`: "the cockpit's stop")."""
        if invocation is not None:
            self._asked[invocation] = who

    def stopped_by(self, invocation: str | None) -> str | None:
        """Who stopped that start: None when no stop job did (it crashed, or ended by itself)."""
        if invocation is None or invocation not in self._stopped:
            return None
        return self._asked.get(invocation, STOP_JOB)

    def of(self, status: UnitStatus) -> UnitStatus:
        """`status` with who stopped its start and the one before it, and how the one before it
        ended where its journal says (systemd's line of that start's exit, which names the start:
        a poll's memory of the last failed state it saw may be of an earlier one)."""
        invocation = status.invocation_id
        before = self._before.get(invocation) if invocation is not None else None
        status = replace(status, stopped_by=self.stopped_by(invocation), previous_stopped_by=self.stopped_by(before))
        if before in self._exits:
            how, at = self._exits[before]
            status = replace(status, previous_exit=how, previous_exit_at=at)
        return status
