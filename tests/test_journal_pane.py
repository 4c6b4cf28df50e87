"""The folding journal pane: its row model alone, Pilot tests and snapshots on recorded lab journals."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from cockpit.config import Config, HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.systemd import journal
from cockpit.systemd.entry import parse_json_line
from cockpit.targets import Target
from cockpit.traceback.model import Traceback
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.journal_rows import MAIN, SEPARATOR, Filter, JournalRows
from cockpit.ui.panes.tracebacks import TracebackList
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


def test_window_stays_bounded_and_rows_follow() -> None:
    rows = JournalRows(window=100)
    batch = entries("journal-restart.jsonl")
    for _ in range(10):
        rows.add(batch)
    assert len(rows.records) <= 100 and rows.discarded > 0
    assert len(rows.rows) == len(rows.records) + len(rows.separators)


def recorded(size=(140, 40)) -> CockpitApp:
    return CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)


async def load(pilot, name: str = "journal-crash8.jsonl") -> JournalView:
    view = pilot.app.query_one(JournalView)
    view.append_entries(entries(name))
    await pilot.pause()
    return view


async def test_enter_unfolds_then_opens_the_failing_frame() -> None:
    app = recorded()
    opened = []
    async with app.run_test(size=(140, 40)) as pilot:
        app.open_frame = lambda tb, k: opened.append((tb, k))  # the source pane has its own tests
        view = await load(pilot, "journal-eagle.jsonl")
        await pilot.press("left_square_bracket")
        index, part = view.model.rows[view.cursor]
        assert part == MAIN and view.model.record(index).exception == "AssertionError"
        await pilot.press("enter")
        tb = view.model.record(index)
        assert id(tb) in view.model.expanded
        assert view.model.text(view.cursor).startswith(
            '  File "/opt/sglang/venv/lib/python3.11/site-packages/'
            'sglang/srt/arg_groups/speculative_hook.py", line 1162'
        )
        await pilot.press("enter")
        await pilot.pause()
        assert opened and opened[0][0].frames[opened[0][1]].line == 1162


async def test_next_and_previous_traceback_keys() -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        await pilot.press("g")
        seen = []
        for _ in range(9):
            await pilot.press("right_square_bracket")
            seen.append(view.cursor)
        assert len(set(seen)) == 8 and seen == sorted(seen)  # the ninth press stays on the last
        await pilot.press("left_square_bracket")
        assert view.cursor == seen[-3]  # seen[-2] and seen[-1] are both the last one


async def test_search_highlights_and_n_moves() -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        await pilot.press("g", "slash")
        await pilot.press(*"Load weight")
        await pilot.press("enter")
        first = view.cursor
        assert "Load weight" in view.model.text(first)
        await pilot.press("n")
        assert view.cursor > first and "Load weight" in view.model.text(view.cursor)
        await pilot.press("N")
        assert view.cursor == first
        assert view.search is not None and view.search.pattern == "Load weight"


async def test_side_list_jumps_to_a_traceback() -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        side = app.query_one(TracebackList)
        assert side.display and side.option_count == 8
        side.focus()
        side.highlighted = 1
        await pilot.press("enter")
        await pilot.pause()
        second_newest = view.model.tracebacks()[1][0]
        assert view.model.rows[view.cursor] == (second_newest, MAIN)
        assert view.model.expanded == {id(view.model.record(second_newest))}
        assert view.has_focus


@pytest.mark.parametrize(
    "keys",
    [
        (),  # folded
        ("left_square_bracket", "enter"),  # one unfolded, cursor on its failing frame
        ("g", "slash", *"TP3", "enter"),  # search
        ("F", *"rank:TP5", "enter"),  # filter
    ],
    ids=["folded", "unfolded", "search", "filter"],
)
def test_snapshots(snap_compare, keys) -> None:
    async def run_before(pilot) -> None:
        await load(pilot)
        if keys:
            await pilot.press(*keys)
        await pilot.pause()

    assert snap_compare(recorded(), terminal_size=(140, 40), run_before=run_before)


def test_snapshot_restart_separator(snap_compare) -> None:
    async def run_before(pilot) -> None:
        view = await load(pilot)
        view.follow = False
        row = next(i for i, r in enumerate(view.model.rows) if r[1] == SEPARATOR)
        view.scroll_to(y=max(0, row - 10), animate=False, immediate=True)
        await pilot.pause()

    assert snap_compare(recorded(), terminal_size=(140, 40), run_before=run_before)


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


async def test_scrolling_to_the_top_pages_the_whole_history_in_the_lab(lab) -> None:
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    app.backlog = 20  # a small window of the newest entries: the rest must come by paging
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        deadline = time.monotonic() + 20
        while len(view.model.records) < 20:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        view.focus()
        while not view.history_exhausted:
            assert time.monotonic() < deadline + 60, "paging never reached the start"
            await pilot.press("g")
            await asyncio.sleep(0.3)
        host = SSHHost(HostConfig(name=lab.name))
        everything = await journal.tail(host, "sglang-demo.service", 1_000_000)
        await host.close()
        assert view.model.oldest_cursor == everything[0].cursor
        assert "start of the journal" in view.title_text()


async def test_a_burst_of_batches_redraws_the_side_list_once(monkeypatch) -> None:
    calls = []
    show = TracebackList.show
    monkeypatch.setattr(
        TracebackList, "show", lambda self, groups, limit=200: (calls.append(1), show(self, groups, limit))
    )
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        entries = [parse_json_line(line) for line in (DATA / "journal-crash8.jsonl").read_text().splitlines()]
        for k in range(0, len(entries), 5):  # dozens of batches, many with a traceback, no pause between
            view.append_entries(entries[k : k + 5])
        await pilot.pause()
        assert 1 <= len(calls) <= 2  # one message still queued was replaced by the next
        assert app.query_one(TracebackList).option_count == 8
