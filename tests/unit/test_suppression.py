"""journald's own losses, read from a real lab journal (tests/data/journal-suppressed.jsonl, the
follower's own `journalctl -u sglang-demo -o json --output-fields=...`): three crashes of the
stand-in's eight ranks, journald rate-limited to 50, then 10, then 20 messages per 30 s, 5 s and
5 s (each scaled up by its free space). journald's reports come in the unit's journal itself."""

from __future__ import annotations

import re

from cockpit.config import Config
from cockpit.incident import Incident, render, tracebacks_in
from cockpit.session import RecordedSession
from cockpit.systemd.entry import parse_json_line
from cockpit.systemd.suppression import SuppressionScan
from cockpit.targets import Target
from tests.conftest import ROOT
from tests.listeners import Notices

UNIT = "sglang-demo.service"
ENTRIES = [
    parse_json_line(line) for line in (ROOT / "tests" / "data" / "journal-suppressed.jsonl").read_text().splitlines()
]


def test_journalds_reports_are_found_with_the_period_they_cover() -> None:
    found = SuppressionScan(UNIT).feed(ENTRIES)
    assert [s.dropped for s in found] == [50, 19, 17]
    for s in found:
        assert s.kept_last is not None and s.start == s.kept_last - 30 and s.kept_last <= s.at
    assert SuppressionScan("other.service").feed(ENTRIES) == []


def test_batches_carry_the_last_kept_line_across() -> None:
    whole = SuppressionScan(UNIT).feed(ENTRIES)
    scan = SuppressionScan(UNIT)
    pieces = [s for k in range(0, len(ENTRIES), 7) for s in scan.feed(ENTRIES[k : k + 7])]
    assert pieces == whole


def test_the_note_marks_the_tracebacks_of_the_period_and_says_how_to_lift_the_limit() -> None:
    note = render(
        Incident(
            "cockpit-lab", UNIT, tracebacks=tracebacks_in(ENTRIES), suppressions=SuppressionScan(UNIT).feed(ENTRIES)
        )
    )
    losses = note.split("## journald's losses\n", 1)[1].split("\n## ", 1)[0]
    assert "journald dropped 50 messages from sglang-demo.service between" in losses
    assert "`systemctl edit sglang-demo.service`, add `[Service]` `LogRateLimitIntervalSec=0`" in losses
    marked = re.findall(r"^### \d+\. .*⚠ possibly incomplete: journald dropped lines then$", note, re.M)
    assert len(marked) >= 8, note  # every traceback of the crash whose lines journald dropped


def test_the_session_says_so_as_the_report_arrives() -> None:
    listener = Notices()
    heard = listener.said

    session = RecordedSession(Config(), Target("cockpit-lab", UNIT))
    session.listener = listener
    session.deliver(ENTRIES[:100])
    session.deliver(ENTRIES[100:])
    assert (
        len(heard) == 3
        and heard[0].startswith("journald dropped 50 messages")
        and "LogRateLimitIntervalSec=0" in heard[0]
    )
    assert [s.dropped for s in session.suppressions] == [50, 19, 17]


def test_journalds_report_belongs_to_the_units_invocation_not_journalds() -> None:
    """OBJECT_SYSTEMD_UNIT and OBJECT_SYSTEMD_INVOCATION_ID name the unit's process it is about:
    read as journald's own invocation, it drew a restart separator in the journal and ended the
    incident's period there."""
    from cockpit.traceback.journal_rows import JournalRows

    [report] = [e for e in ENTRIES if e.message == "Suppressed 50 messages from sglang-demo.service"]
    assert (report.unit, report.identifier, report.pid) == (UNIT, "systemd-journald", 138)
    k = ENTRIES.index(report)  # it names the process whose line set it off: the next start's, after the window
    assert report.invocation_id == next(e.invocation_id for e in ENTRIES[k + 1 :] if e.pid not in (1, 138))
    rows = JournalRows()
    rows.add(ENTRIES)
    starts = {e.invocation_id for e in ENTRIES if e.pid != 1 and e.invocation_id}
    assert len(rows.separators) == len(starts) - 1  # one per restart, none for journald's reports
