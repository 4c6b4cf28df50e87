"""A batch the start scans may pass over (`quiet_run`): the scans read the same from a real
journal fed with the hint as without it, and no line either scan acts on is let through."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.sglang.server import health, startup
from cockpit.sglang.server.health import HealthScan
from cockpit.sglang.server.quiet import quiet_run
from cockpit.sglang.server.startup import StartupScan
from cockpit.systemd.entry import JournalEntry, parse_json_lines

DATA = Path(__file__).parents[1] / "data"
JOURNALS = [
    "journal-startup.jsonl",
    "journal-crash8.jsonl",
    "journal-hang.jsonl",
    "journal-dead-detokenizer.jsonl",
    "journal-restart.jsonl",
    "sglang-0.5.23/real-tp1-start.jsonl",
    "sglang-0.5.23/real-tp2-kill9-scheduler-tp1.jsonl",
    "sglang-0.5.23/real-tp1-restart.jsonl",
]
INVOCATION = "0123456789abcdef0123456789abcdef"
STAMP_US = 1_764_000_000_000_000


def entries(name: str) -> list[JournalEntry]:
    return parse_json_lines((DATA / name).read_text().splitlines())


def line(message: str, pid: int = 4242, invocation: str | None = INVOCATION, us: int = STAMP_US) -> JournalEntry:
    return JournalEntry(message=message, pid=pid, invocation_id=invocation, realtime_us=us)


@pytest.mark.parametrize("name", JOURNALS)
@pytest.mark.parametrize("size", [1, 7, 64])
def test_the_scans_read_the_same_with_the_hint(name: str, size: int) -> None:
    """Fed in batches of `size`, each with its quiet_run, the scans hold what they hold fed
    without it; and the hint was given for some batches (the test compares something): the real
    journal, then a flood of its last start's lines."""
    found = entries(name)
    last = next(e for e in reversed(found) if e.pid != 1 and e.invocation_id)
    stamp = max(e.realtime_us or 0 for e in found)
    prefill = "[2026-12-05 10:00:00 TP0] Prefill batch, #new-seq: {}"
    found += [line(prefill.format(i), last.pid or 0, last.invocation_id, stamp + i) for i in range(1, 300)]
    plain_health, plain_startup = HealthScan(), StartupScan()
    hinted_health, hinted_startup = HealthScan(), StartupScan()
    hinted = 0
    for at in range(0, len(found), size):
        batch = found[at : at + size]
        quiet = quiet_run(batch)
        hinted += quiet is not None
        plain_health.feed(batch)
        plain_startup.feed(batch)
        hinted_health.feed(batch, quiet)
        hinted_startup.feed(batch, quiet)
    assert hinted > 0
    assert dict(hinted_health.starts) == dict(plain_health.starts)
    assert dict(hinted_startup.starts) == dict(plain_startup.starts)
    hinted_starts = [s.timeline.invocation for s in hinted_startup.paired()]
    assert hinted_starts == [s.timeline.invocation for s in plain_startup.paired()]


def test_a_flood_batch_is_quiet() -> None:
    decode = "[2026-12-05 10:00:00 TP0] Decode batch, #running-req: 32, #token: {}, gen throughput (token/s): 4351.94"
    flood = [line(decode.format(i), us=STAMP_US + i) for i in range(500)]
    flood += [line('INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK')]
    assert quiet_run(flood) == INVOCATION


@pytest.mark.parametrize("text", sorted(set(health.WATCHED) | set(startup.WATCHED)))
def test_no_line_a_scan_reads_is_quiet(text: str) -> None:
    """Each text either scan reads after a prefix's `] `, as the last line of a flood's batch."""
    batch = [line("[2026-12-05 10:00:00 TP0] Prefill batch, #new-seq: 1") for _ in range(100)]
    batch.append(line(f"[2026-12-05 10:00:01 TP3] {text} and the rest"))
    assert quiet_run(batch) is None


def test_systemds_lines_another_start_and_no_start_are_not_quiet() -> None:
    base = [line("[2026-12-05 10:00:00 TP0] Prefill batch, #new-seq: 1") for _ in range(10)]
    assert quiet_run([*base, line("Started sglang.service.", pid=1)]) is None
    assert quiet_run([*base, line("[2026-12-05 10:00:00 TP0] Prefill batch", invocation="f" * 32)]) is None
    assert quiet_run([*base, line("a line of no start", invocation=None)]) is None
    assert quiet_run([line("a line of no start", invocation=None), *base]) is None
    assert quiet_run([]) is None
