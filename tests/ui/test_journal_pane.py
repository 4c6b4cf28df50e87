"""The folding journal pane: Pilot tests and snapshots on recorded lab journals (its row model alone:
tests/unit/test_journal_rows.py; paging a real journal: tests/lab/test_journal_pane_lab.py)."""

from __future__ import annotations

import pytest
from msgspec.structs import replace
from textual.geometry import Region
from textual.screen import Screen
from textual.scrollbar import ScrollBarRender

from cockpit.config import Config
from cockpit.systemd.entry import JournalEntry, parse_json_line
from cockpit.targets import Target
from cockpit.traceback.journal_rows import MAIN, SEPARATOR
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.tracebacks import TracebackList
from tests.conftest import ROOT
from tests.unit.test_journal_rows import DATA, entries


def recorded(size=(140, 40)) -> CockpitApp:
    return CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)


async def load(pilot, name: str = "journal-crash8.jsonl") -> JournalView:
    view = pilot.app.query_one(JournalView)
    view.append_entries(entries(name))
    await pilot.pause()
    return view


async def layouts_from_now(pilot, monkeypatch) -> list[int]:
    """A list that gets an item at each layout of the screen from now on, once the first load's
    own layouts are done (a busy machine is slower)."""
    for _ in range(3):
        await pilot.pause(0.1)
    layouts: list[int] = []
    refresh_layout = Screen._refresh_layout
    monkeypatch.setattr(
        Screen, "_refresh_layout", lambda self, *a, **k: (layouts.append(1), refresh_layout(self, *a, **k))[1]
    )
    return layouts


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


async def test_the_rows_go_out_as_textuals_style_pass_draws_them() -> None:
    """The view hands its rows to the screen without Textual's style pass, which has nothing to
    add to them: what it returns is Textual's output, cell for cell and style for style, in every
    state a row is drawn in (folded and open tracebacks, frames, the cursor, a search's matches,
    the time column, scrolled sideways, a crop of some columns). Given padding, the view goes
    through Textual's pass, and the padding is drawn."""
    from textual.widget import Widget

    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)

        def drawn(render, crop: Region) -> list[list[tuple[str, object]]]:
            view._styles_cache.clear()
            view._read_frame()
            view._in_frame = True
            try:
                return [[(seg.text, seg.style) for seg in strip.simplify()] for strip in render(crop)]
            finally:
                view._in_frame = False

        def same(*crops: Region) -> list[list[tuple[str, object]]]:
            """The view's rows, whole and in each crop, are Textual's; the whole view's, returned."""
            whole = Region(0, 0, *view.outer_size)
            for crop in (*crops, whole):
                ours = drawn(view.render_lines, crop)
                assert ours == drawn(lambda c: Widget.render_lines(view, c), crop), crop
                assert len(ours) == crop.height
            return ours

        same()
        await pilot.press("g", "right_square_bracket", "enter", "j", "j")  # a traceback open, the cursor in it
        same(Region(3, 2, 50, 10))
        await pilot.press("T", "slash", *"Load weight", "enter")
        await pilot.pause()
        view.scroll_to(x=7, animate=False, immediate=True)
        await pilot.pause()
        assert view.search is not None and view.scroll_x == 7
        same(Region(0, 5, 30, 3), Region(60, 0, 40, 20))
        view.styles.padding = (0, 2)
        await pilot.pause()
        assert not view._bare()
        assert all(row[0][0].startswith("  ") for row in same())  # the padding, drawn


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


async def test_the_same_failure_again_relabels_its_row_without_a_layout(monkeypatch) -> None:
    """A rebuilt side list lays out the whole screen (61 ms under a flood, for each traceback
    that arrived); a failure seen again changes only its row's count, in place, and the row
    then jumps to the newest of them."""

    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        side = app.query_one(TracebackList)
        before = [str(side.get_option_at_index(i).prompt) for i in range(side.option_count)]
        newest_before = view.model.tracebacks()[0][0]
        layouts = await layouts_from_now(pilot, monkeypatch)
        drawn_before = [strip.text for strip in side.render_lines(Region(0, 0, *side.outer_size))]
        whole: list[int] = []
        rows: list[Region] = []
        refresh = side.refresh
        monkeypatch.setattr(
            side, "refresh", lambda *r, **k: (rows.extend(r) if r else whole.append(1), refresh(*r, **k))[1]
        )
        again = entries("journal-crash8.jsonl")
        # the unit started again and failed the same way: a restart loop, a longer label
        view.append_entries([replace(e, cursor=f"again-{k}", invocation_id="start-2") for k, e in enumerate(again)])
        await pilot.pause()
        await pilot.pause()
        after = [str(side.get_option_at_index(i).prompt) for i in range(side.option_count)]
        assert side.option_count == len(before) and after != before  # the counts grew, in the same rows
        assert layouts == []
        assert max(len(row) for row in after) > side.scrollable_content_region.width  # too long for a row:
        assert side.virtual_size.height == side.option_count  # cut with an ellipsis, never wrapped
        # Only the relabelled rows and the title's row were repainted, and what the list's rows
        # now hold (its styles cache: what the screen was sent) is what a whole repaint draws.
        assert whole == [] and {r.y for r in rows} == {-1} | {i for i in range(len(after)) if after[i] != before[i]}
        drawn = [strip.text for strip in side.render_lines(Region(0, 0, *side.outer_size))]
        side._clear_caches()  # what a whole repaint draws, from the options themselves
        assert drawn != drawn_before and drawn == [s.text for s in side.render_lines(Region(0, 0, *side.outer_size))]
        side.focus()
        side.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        newest = view.model.tracebacks()[0][0]
        assert view.model.rows[view.cursor] == (newest, MAIN) and newest > newest_before  # the second copy's


async def test_a_new_kind_of_failure_grows_the_side_list_without_laying_out_the_screen(monkeypatch) -> None:
    """The side list's box is the stylesheet's whatever it holds: a new kind of failure (and
    each rank's traceback while it prints) adds rows inside it with no layout of the screen
    (61 to 66 ms under a flood, twice a crash). Once the rows outgrow the box, its scrollbar
    comes (that one lays it out) and reaches the last row."""

    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        await load(pilot)
        side = app.query_one(TracebackList)
        kinds = side.option_count
        layouts = await layouts_from_now(pilot, monkeypatch)

        def crash(start: int, fault: str) -> list[JournalEntry]:
            return [
                replace(
                    e,
                    cursor=f"{start}-{k}",
                    invocation_id=f"start-{start}",
                    message=e.message.replace(
                        "StandinCudaError: CUDA error: an illegal memory access was encountered", fault
                    ),
                )
                for k, e in enumerate(entries("journal-crash8.jsonl"))
            ]

        app.journal_view.append_entries(crash(2, "AssertionError: device-side"))
        await pilot.pause()
        await pilot.pause()
        assert side.option_count == 2 * kinds and layouts == []
        drawn = [strip.text for strip in side.render_lines(Region(0, 0, *side.outer_size))]
        assert sum("StandinCudaError" in row for row in drawn) == kinds
        assert sum("AssertionError" in row for row in drawn) == kinds  # the new kind, drawn
        assert side.virtual_size.height == 2 * kinds and not side.show_vertical_scrollbar
        for start, fault in enumerate(("MemoryError: a", "ValueError: b", "KeyError: c"), 3):
            app.journal_view.append_entries(crash(start, fault))
            await pilot.pause()
        await pilot.pause()
        assert side.option_count == 5 * kinds > side.scrollable_content_region.height
        assert side.show_vertical_scrollbar and side.max_scroll_y == 5 * kinds - side.scrollable_content_region.height
        laid_out = len(layouts)  # the scrollbar's coming
        app.journal_view.append_entries(crash(6, "OSError: d"))  # a list that scrolls grows again
        await pilot.pause()
        await pilot.pause()
        assert side.option_count == 6 * kinds and len(layouts) == laid_out and side.show_vertical_scrollbar
        assert side.max_scroll_y == 6 * kinds - side.scrollable_content_region.height


async def test_the_title_says_how_far_behind_the_feed_is_until_it_catches_up() -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        await load(pilot)
        box = app.journal_view.parent
        assert "behind" not in str(box.border_title) and "following" in str(box.border_title)
        app.session.listener.journal_behind(12_400)  # what the session's feed says in a flood
        await pilot.pause()
        assert "behind by ~12,400 lines · following" in str(box.border_title)
        app.session.listener.journal_behind(0)
        await pilot.pause()
        assert "behind" not in str(box.border_title)


async def test_following_a_flood_keeps_the_last_row_in_view_without_laying_out_the_screen(monkeypatch) -> None:
    """Rows added while following move the view to the end by a repaint: no layout pass of the
    screen per batch (a flood paid one on every batch), and the scrollbar knows the new size."""
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        layouts = await layouts_from_now(pilot, monkeypatch)
        for k in range(20):
            view.append_entries(
                [
                    JournalEntry(f"[2026-12-01 10:00:00 TP0] Prefill batch {k}.{i}", cursor=f"f{k}.{i}", pid=4100)
                    for i in range(50)
                ]
            )
            await pilot.pause()
        assert view.scroll_y == view.max_scroll_y > 0
        assert view.cursor == len(view.model.rows) - 1
        bar = view.vertical_scrollbar
        drawn = ScrollBarRender.render_bar(bar.size.height, bar.window_virtual_size, bar.window_size, bar.position)
        true = ScrollBarRender.render_bar(bar.size.height, len(view.model.rows), bar.window_size, view.scroll_y)
        assert [(s.text, s.style) for s in drawn.segments] == [
            (s.text, s.style) for s in true.segments
        ]  # the thumb where the true figures put it
        assert bar.window_virtual_size > 0.9 * len(view.model.rows)
        assert len(layouts) <= 2  # not one per batch
        last = view.model.text(len(view.model.rows) - 1)
        screen_text = "\n".join(
            "".join(seg.text for seg in view.render_line(y)) for y in range(view.scrollable_content_region.height)
        )
        assert last[:60] in screen_text


async def test_while_following_each_plain_line_is_drawn_once_not_on_every_batch(monkeypatch) -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        drawn = []
        render_row = JournalView._render_row
        monkeypatch.setattr(JournalView, "_render_row", lambda self, *a: (drawn.append(a[1]), render_row(self, *a))[1])
        for k in range(20):  # 5 new rows a batch; about 37 rows in view, all of them moving up each time
            view.append_entries([JournalEntry(f"line {k}.{i}", cursor=f"l{k}.{i}", pid=4100) for i in range(5)])
            await pilot.pause()
        height = view.scrollable_content_region.height
        assert 100 <= len(drawn) < 20 * 5 + 20 * 3 < 20 * height  # the new rows, and the cursor's old and new row


async def test_a_page_back_and_forth_draws_no_row_twice_on_a_tall_screen(monkeypatch) -> None:
    """The view keeps three screens of drawn rows, however tall the terminal (no more: a kept
    row is what the cyclic collector walks at each young collection, docs/facts.md)."""
    app = recorded()
    async with app.run_test(size=(140, 120)) as pilot:
        view = app.journal_view
        view.append_entries([JournalEntry(f"line {i}", cursor=f"t{i}", pid=41) for i in range(2000)])
        await pilot.pause()
        height = view.scrollable_content_region.height
        assert height > 64
        view.focus()
        await pilot.press("pageup", "pageup")  # the cursor to the top row, then a page back
        back = view.scroll_y
        assert back < view.max_scroll_y - height / 2
        drawn: list[int] = []
        render_row = JournalView._render_row
        monkeypatch.setattr(JournalView, "_render_row", lambda self, *a: (drawn.append(a[0]), render_row(self, *a))[1])
        await pilot.press("end", "pageup", "pageup")
        assert view.scroll_y == back
        assert len(drawn) <= 6, drawn  # the cursor's row, where it leaves and where it lands
        await pilot.press("end")
        for k in range(10):  # following a flood: a screen of new rows a frame, three screens kept
            view.append_entries([JournalEntry(f"more {k}.{i}", cursor=f"m{k}.{i}", pid=41) for i in range(300)])
            await pilot.pause()
        assert view.scroll_y == view.max_scroll_y
        assert 2 * height < len(view._strips) <= 3 * view.size.height


async def test_the_scrollbar_is_at_the_end_after_the_first_backlog() -> None:
    """The backlog is one batch that lands before the scrollbar is laid out: the thumb must
    still be drawn at the end, where the view is (it stayed at the top until the next line)."""
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.journal_view
        app.session.deliver([JournalEntry(f"line {i}", cursor=f"b{i}", pid=41) for i in range(2000)])
        await pilot.pause()
        bar = view.vertical_scrollbar
        assert view.scroll_y == view.max_scroll_y > 0
        drawn = ScrollBarRender.render_bar(bar.size.height, bar.window_virtual_size, bar.window_size, bar.position)
        true = ScrollBarRender.render_bar(bar.size.height, 2000, bar.window_size, view.scroll_y)
        assert [(s.text, s.style) for s in drawn.segments] == [(s.text, s.style) for s in true.segments]


async def test_rows_are_converted_to_truecolor_once_per_style_not_per_frame() -> None:
    """The app's ANSI-to-truecolor filter rewrote every segment of every row on every frame; the
    view converts its few styles once and leaves the filter out. With the ANSI theme and
    `ansi_color` off (the filter on, which restyles nothing), a row's colours are exactly what
    the filter makes of the unconverted style; with the filter off they are left as they are."""
    from textual.filter import ANSIToTruecolor

    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        app.theme = "ansi-dark"
        view = await load(pilot)
        await pilot.pause()
        raw = view.rich_style + view.get_component_rich_style("journal--time")
        assert raw.color is not None and raw.color.triplet is None  # the theme's colour is a system one

        def time_style():
            return next(seg.style for seg in view.render_line(0) if seg.style is not None and seg.text.strip())

        assert not any(isinstance(f, ANSIToTruecolor) for f in app.get_line_filters())  # native ANSI
        assert time_style() == raw
        app.ansi_color = False
        [to_truecolor] = [f for f in app.get_line_filters() if isinstance(f, ANSIToTruecolor)]
        assert not any(isinstance(f, ANSIToTruecolor) for f in view.get_line_filters())
        converted = time_style()
        assert converted == to_truecolor.truecolor_style(raw, view.background_colors[1].rich_color)
        assert converted.color is not None and converted.color.triplet is not None


async def test_a_row_is_as_wide_as_the_view_and_its_text_stops_at_the_scrollbar() -> None:
    """A row shorter than the content width was widened by Textual, one new Strip per row and
    frame; a row now is the width, and the column under the scrollbar holds only padding."""
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = pilot.app.query_one(JournalView)
        view.append_entries([JournalEntry("x" * 500, cursor=f"w{i}", pid=41) for i in range(200)])
        await pilot.pause()
        assert view.scrollable_content_region.width < view.content_region.width  # a scrollbar is shown
        strip = view.render_line(0)
        text = "".join(seg.text for seg in strip)
        assert strip.cell_length == len(text) == view.content_region.width
        under_bar = view.content_region.width - view.scrollable_content_region.width
        assert text.endswith(" " * under_bar) and text[:-under_bar].endswith("x")


async def test_the_title_says_start_of_the_journal_only_while_it_is_in_view() -> None:
    """It said `start of the journal · following` after `g` then `G`, over the newest lines."""
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        view.history_exhausted = True  # paging has reached the journal's first entry
        view.focus()
        await pilot.press("g")
        await pilot.pause()
        assert "start of the journal · paused" in view.title_text()
        await pilot.press("G")
        await pilot.pause()
        assert "start of the journal" not in view.title_text() and view.title_text().endswith("following")
        await pilot.press("g")
        await pilot.pause()
        assert "start of the journal" in str(view.parent.border_title)


async def test_a_node_filter_on_one_units_journal_is_refused_not_a_blank_journal() -> None:
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = await load(pilot)
        rows = len(view.model.rows)
        said = view.set_filter("node:1")
        assert said is not None and said.startswith("node:1: this journal is one unit's")
        assert len(view.model.rows) == rows and not view.model.filter.active  # the journal as it was
        assert view.set_filter("node:0") is None and len(view.model.rows) == rows


async def test_a_faulthandler_dump_in_the_feed_is_one_row_that_opens_its_failing_frame() -> None:
    """Issue 27: a segfaulting scheduler's dump, as journald holds it (no blank lines, one PID)."""
    dump = (ROOT / "tests" / "data" / "fold" / "native" / "faulthandler-segv.txt").read_text().splitlines()
    feed = [JournalEntry("[2026-12-03 12:00:00 TP0] Decode batch. #running-req: 1", cursor="c0", pid=4100)]
    feed += [JournalEntry(text, cursor=f"f{k}", pid=4100, priority=3) for k, text in enumerate(dump) if text]
    app = recorded()
    opened = []
    async with app.run_test(size=(140, 40)) as pilot:
        app.open_frame = lambda tb, k: opened.append((tb, k))
        view = pilot.app.query_one(JournalView)
        view.append_entries(feed)
        await pilot.pause()
        assert len(view.model.rows) == 3  # the log line, the dump's one row, the shell's `Segmentation fault`
        await pilot.press("left_square_bracket")
        index, part = view.model.rows[view.cursor]
        assert part == MAIN and view.model.text(view.cursor) == "Fatal Python error: Segmentation fault"
        await pilot.press("enter")
        assert view.model.text(view.cursor) == '  File "/tmp/segv.py", line 11 in event_loop_overlap'
        await pilot.press("enter")
        await pilot.pause()
        tb, k = opened[0]
        assert (tb.sites[k].file, tb.sites[k].line, tb.sites[k].function) == ("/tmp/segv.py", 11, "event_loop_overlap")


async def test_a_paused_view_keeps_its_lines_while_the_window_drops_older_ones() -> None:
    """Paused under a flood, the rows in view stayed at the same row numbers while the window
    dropped the oldest records above them: the view showed other lines every second (seen in
    tmux at 25,000 lines/s). They stay where they were drawn, and the title counts the new ones."""
    app = recorded()
    async with app.run_test(size=(140, 40)) as pilot:
        view = pilot.app.query_one(JournalView)
        view.model.window = 1000

        def batch(k: int) -> list[JournalEntry]:
            return [JournalEntry(f"line {k}.{i}", cursor=f"c{k}.{i}", pid=4100) for i in range(300)]

        for k in range(3):
            view.append_entries(batch(k))
        await pilot.pause()
        view.action_toggle_follow()
        view.place_cursor(view.scroll_y + 5)
        await pilot.pause()
        shown, under = view.model.text(view.scroll_y), view.model.text(view.cursor)
        top = int(view.scroll_y) + view.model.rows_dropped  # the row number of the view's top line
        for k in range(3, 9):  # 1,800 more lines: the window of 1,000 drops the oldest in chunks
            view.append_entries(batch(k))
            await pilot.pause()
            if view.model.discarded and view.scroll_y > 0:
                assert (view.model.text(view.scroll_y), view.model.text(view.cursor)) == (shown, under)
        assert view.model.rows_dropped > 0 and view.unread == 1800
        # once its lines are dropped too, the view holds the oldest row kept, and says so
        assert view.scroll_y == 0 and view.cursor >= 0
        gone = view.model.rows_dropped - top
        assert gone > 0
        said = f"paused · {gone:,} lines in view dropped: the window keeps 1,000 · ▼ 1,800 new lines · G to follow"
        assert view.title_text().endswith(said)
        view.action_bottom()
        await pilot.pause()
        assert "dropped" not in view.title_text() and view.title_text().endswith("following")
