"""The folding journal pane: Pilot tests and snapshots on recorded lab journals (its row model alone:
tests/unit/test_journal_rows.py; paging a real journal: tests/lab/test_journal_pane_lab.py)."""

from __future__ import annotations

import pytest

from cockpit.config import Config
from cockpit.systemd.entry import parse_json_line
from cockpit.targets import Target
from cockpit.traceback.journal_rows import MAIN, SEPARATOR
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.tracebacks import TracebackList
from tests.unit.test_journal_rows import DATA, entries


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
