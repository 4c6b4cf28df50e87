"""The folding journal pane's row model and display text on recorded lab journals, without an app."""

from __future__ import annotations

import re

import pytest

from cockpit.systemd.entry import parse_json_line
from cockpit.traceback.journal_rows import MAIN, SEPARATOR, Filter, JournalRows
from cockpit.traceback.model import Traceback
from cockpit.ui.panes.journal import display_text
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"


def entries(name: str):
    return [parse_json_line(line) for line in (DATA / name).read_text().splitlines()]


def crash_rows() -> JournalRows:
    rows = JournalRows()
    rows.add(entries("journal-crash8.jsonl"))
    return rows


def test_eight_crashing_ranks_fold_to_eight_rows() -> None:
    rows = crash_rows()
    tbs = [r for r in rows.records if isinstance(r, Traceback)]
    assert sorted(tb.rank for tb in tbs) == [f"TP{k}" for k in range(8)]
    assert all(tb.exception == "StandinCudaError" and tb.complete for tb in tbs)
    assert len({tb.pid for tb in tbs}) == 8  # each rank its own PID in the lab
    folded_rows = [r for r in rows.rows if r[1] == MAIN and isinstance(rows.records[r[0]], Traceback)]
    assert len(folded_rows) == 8
    assert all(part in (MAIN, SEPARATOR) for _, part in rows.rows)  # nothing unfolded yet


def test_unfold_inserts_exactly_the_tracebacks_lines() -> None:
    rows = crash_rows()
    index, tb = rows.tracebacks()[0]
    before = len(rows.rows)
    rows.toggle(index)
    assert len(rows.rows) == before + len(tb.lines)
    head = rows.row_of(index)
    assert [rows.text(head + 1 + k) for k in range(len(tb.lines))] == tb.lines
    rows.toggle(index)
    assert len(rows.rows) == before


def test_restart_separator_names_the_previous_exit() -> None:
    rows = crash_rows()
    assert list(rows.separators.values()) == [next(t for t in rows.separators.values())]  # one restart in the recording
    text = next(iter(rows.separators.values()))
    assert re.fullmatch(r"restart · invocation [0-9a-f]{12} · previous exit: killed 9/KILL", text)
    sep_rows = [r for r in rows.rows if r[1] == SEPARATOR]
    assert len(sep_rows) == 1


def test_longest_is_the_longest_row_text_from_a_row_on() -> None:
    rows = crash_rows()
    index, _ = rows.tracebacks()[0]
    rows.toggle(index)  # unfolded lines are rows too
    for first in (0, 1, rows.row_of(index), rows.row_of(index) + 3, len(rows.rows) - 1, len(rows.rows)):
        assert rows.longest(first) == max((len(rows.text(i)) for i in range(first, len(rows.rows))), default=0)
    assert rows.longest(0) > 0 and any(part == SEPARATOR for _, part in rows.rows)
    assert rows.longest(0, 5) == max(len(rows.text(i)) for i in range(5))  # the first rows alone (a page prepended)


def test_filter_by_rank_priority_pid_and_regex() -> None:
    rows = crash_rows()
    rows.set_filter(Filter.parse("rank:TP3"))
    shown = {rows.record_at(i).rank for i in range(len(rows.rows)) if rows.rows[i][1] != SEPARATOR}
    assert shown == {"TP3"}
    rows.set_filter(Filter.parse("tb"))
    assert all(isinstance(rows.record_at(i), Traceback) for i in range(len(rows.rows)) if rows.rows[i][1] == MAIN)
    rows.set_filter(Filter.parse("Received sigquit"))
    assert [rows.text(i) for i in range(len(rows.rows)) if rows.rows[i][1] == MAIN] == [
        t for t in (r.text for r in rows.records if not isinstance(r, Traceback)) if "Received sigquit" in t
    ]
    with pytest.raises(ValueError, match="not a regular expression"):
        Filter.parse("([")
    pid = next(r.pid for r in rows.records if isinstance(r, Traceback))
    rows.set_filter(Filter.parse(f"pid:{pid}"))
    assert {rows.record_at(i).pid for i in range(len(rows.rows)) if rows.rows[i][1] == MAIN} == {pid}


def test_err_shows_the_lines_that_say_a_failure_whatever_their_priority() -> None:
    """`err` left out systemd's `Main process exited ... FAILURE` and SGLang's `Health check
    failed`, both logged below priority 3."""
    from cockpit.ui.panes.journal import ERROR_TEXTS

    shown: list[str] = []
    for name in ("journal-eagle.jsonl", "journal-dead-detokenizer.jsonl"):
        rows = JournalRows()
        rows.add(entries(name))
        rows.set_filter(Filter.parse("err", error_texts=ERROR_TEXTS))
        shown += [rows.text(i) for i in range(len(rows.rows)) if rows.rows[i][1] == MAIN]
    assert any("Main process exited, code=exited, status=1/FAILURE" in t for t in shown), shown
    assert any("Failed with result 'exit-code'" in t for t in shown)
    assert any("Health check failed" in t for t in shown)
    assert not any("Started " in t or "ready to roll" in t for t in shown)  # nor what is no error


def test_window_stays_bounded_and_rows_follow() -> None:
    rows = JournalRows(window=100)
    batch = entries("journal-restart.jsonl")
    for _ in range(10):
        rows.add(batch)
    assert len(rows.records) <= 100 and rows.discarded > 0
    assert len(rows.rows) == len(rows.records) + len(rows.separators)


def test_side_list_follows_batches_promotions_window_drops_and_pages() -> None:
    """The side list is kept as record numbers; it must equal a scan of the window."""

    def scanned(rows: JournalRows) -> list[tuple[int, Traceback]]:
        return [(rows.discarded + i, r) for i, r in reversed(list(enumerate(rows.records))) if isinstance(r, Traceback)]

    crash = entries("journal-crash8.jsonl")
    rows = JournalRows(window=150)
    for start in range(40, len(crash), 7):  # small batches: tracebacks open in one, grow in the next
        rows.add(crash[start : start + 7])
        assert rows.tracebacks() == scanned(rows)
    for _ in range(3):  # past the window: the oldest records and their tracebacks are dropped
        rows.add(crash[40:])
        assert rows.tracebacks() == scanned(rows)
    assert rows.discarded > 0 and rows.tracebacks()
    paged = JournalRows()
    paged.add(crash[70:])
    paged.prepend(crash[:70])
    assert paged.tracebacks() == scanned(paged) and len(paged.tracebacks()) >= 8  # the page edge may cut some


def test_prepend_puts_older_records_first_and_keeps_numbers_sorted() -> None:
    all_entries = entries("journal-crash8.jsonl")
    rows = JournalRows()
    rows.add(all_entries[70:])
    shown_before = [rows.text(i) for i in range(len(rows.rows))]
    added = rows.prepend(all_entries[:70])
    assert added > 0 and rows.discarded < 0
    assert [rows.text(i) for i in range(added, len(rows.rows))] == shown_before
    assert rows.rows == sorted(rows.rows)
    assert rows.text(0) == all_entries[0].message


def test_display_text_shows_what_a_terminal_would() -> None:
    assert display_text("Loading  10%\rLoading  50%\rLoading 100%") == "Loading 100%"
    assert display_text("a\tb") == "a       b"
    assert display_text("bell\x07 \x1b]2;title\x07") == "bell\\x07 \\x1b]2;title\\x07"  # shown, never acted on


def test_a_windows_lines_are_not_walked_by_the_cyclic_collector() -> None:
    """200,000 tracked lines made each full collection about 100 ms during a flood: a line and
    its entry hold only strings and numbers, so the collector never sees them, and two lines
    of the same text are still two records."""
    import gc

    from cockpit.systemd.entry import JournalEntry
    from cockpit.traceback.journal_rows import JournalRows

    rows = JournalRows(1000)
    rows.add([JournalEntry(f"line {i}", cursor=f"c{i}", pid=7) for i in range(10)] * 2)
    lines = rows.records
    assert len(lines) == 20 and not any(gc.is_tracked(r) or gc.is_tracked(r.entry) for r in lines)
    assert lines[0] is not lines[10] and lines[0] != lines[10] and lines[0].text == lines[10].text
