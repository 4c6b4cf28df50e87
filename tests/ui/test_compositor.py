"""cockpit.ui.compositor held to Textual's own compositor: for an update of any part of the
cockpit's screen (each widget, the journal with the status pane, a toast over the journal), the
cells the terminal is sent are the same, and the journal's update renders fewer widgets."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator

import pytest
from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from cockpit.config import Config
from cockpit.systemd.entry import JournalEntry
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.compositor import CroppedCompositor
from tests.unit.test_journal_rows import entries


def _sent(comp: Compositor, crop: Region, monkeypatch: pytest.MonkeyPatch, textuals: bool) -> dict:
    """What a partial update of `crop` writes: each cut of each row within it, as (text, style)
    pairs (ChopsUpdate writes a row's cuts that meet the update and nothing else)."""
    with monkeypatch.context() as m:
        if textuals:
            m.setattr(CroppedCompositor, "_get_renders", Compositor._get_renders)
        chops = comp._render_chops(crop, lambda y: crop.y <= y < crop.bottom)
    sent = {}
    for y in range(crop.y, crop.bottom):
        ends = comp.cuts[y][1:]
        for end, (x, strip) in zip(ends, chops[y].items(), strict=True):
            if x >= crop.right or end <= crop.x:
                continue  # outside the update: never written
            assert strip is not None, f"row {y}, cut {x}: nothing drawn"
            sent[y, x] = [(s.text, s.style) for s in strip]
    return sent


def _drawn(sent: str) -> str:
    """What the terminal shows of an update: without a cursor move that writes nothing (Textual
    sends one for a cut starting where a changed part ends, `ChopsUpdate`'s `x > x2`, when a
    widget rendered there; the bands leave that widget out)."""
    return re.sub(r"\x1b\[[0-9]+;[0-9]+H(?=\x1b\[[0-9]+;[0-9]+H|\n|$)", "", sent)


async def test_every_update_sends_what_textuals_compositor_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(120, 34)) as pilot:
        app.journal_view.append_entries(entries("journal-crash8.jsonl"))
        app.notify("a toast over the journal", timeout=30)
        await pilot.pause()
        comp = app.screen._compositor
        assert isinstance(comp, CroppedCompositor)
        shown = {w: region.intersection(clip) for w, (region, clip) in comp.visible_widgets.items()}
        journal = shown[app.journal_view]
        crops = [r for r in shown.values() if r] + [
            journal.union(shown[app.status_pane]),  # one rectangle over both, as Textual makes it
            Region(journal.x + 3, journal.y + 2, 20, 5),  # a few cells in the middle of the rows
            app.screen.region,
        ]
        assert len(crops) > 10
        for crop in crops:
            ours = _sent(comp, crop, monkeypatch, textuals=False)
            assert ours and ours == _sent(comp, crop, monkeypatch, textuals=True), crop

        # The journal's update: the widgets behind the view and those beside it are not rendered.
        rendered: list[str] = []
        for widget in comp.visible_widgets:

            def counted(crop: Region, w: Widget = widget) -> list:
                rendered.append(type(w).__name__)
                return type(w).render_lines(w, crop)

            monkeypatch.setattr(widget, "render_lines", counted)
        comp._render_chops(journal, lambda y: True)
        assert "JournalView" in rendered
        assert not {"StatusPane", "Footer", "TracebackList", "PacedScreen", "Horizontal"} & set(rendered), rendered


@pytest.mark.parametrize("case", ["the journal and the status pane", "two rows of the side list"])
async def test_an_update_of_several_parts_writes_what_textual_writes_and_renders_only_those_parts(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Textual draws the journal and the status pane changed together as one rectangle around
    both, rendering the side list of tracebacks within it too; and two rows of the side list (its
    title's count, a relabelled row) as the rows from one to the other. The terminal must get
    the same; here the side list is not rendered in the first, and renders its two rows alone
    in the second."""
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(120, 34)) as pilot:
        app.journal_view.append_entries(entries("journal-crash8.jsonl"))
        await pilot.pause()
        comp = app.screen._compositor
        shown = {w: region.intersection(clip) for w, (region, clip) in comp.visible_widgets.items()}
        side = next(w for w in shown if type(w).__name__ == "TracebackList")
        box = shown[side]
        if case == "the journal and the status pane":
            parts = {shown[app.journal_view], shown[app.status_pane]}
            assert Region.from_union(list(parts)).overlaps(box)  # the rectangle spans the side list
        else:
            parts = {Region(box.x, box.y, box.width, 1), Region(box.x + 2, box.y + 6, box.width - 4, 1)}

        def update(textuals: bool) -> tuple[str, list[tuple[str, int]]]:
            rendered: list[tuple[str, int]] = []
            with monkeypatch.context() as m:
                if textuals:
                    m.setattr(CroppedCompositor, "_get_renders", Compositor._get_renders)
                    m.setattr(CroppedCompositor, "render_partial_update", Compositor.render_partial_update)
                for widget in comp.visible_widgets:

                    def counted(crop: Region, w: Widget = widget) -> list:
                        rendered.append((type(w).__name__, crop.height))
                        return type(w).render_lines(w, crop)

                    m.setattr(widget, "render_lines", counted)
                comp._dirty_regions.update(parts)
                chops = comp.render_partial_update()
                assert chops is not None
                return chops.render_segments(app.console), rendered

        ours, ours_rendered = update(textuals=False)
        textuals, textuals_rendered = update(textuals=True)
        assert _drawn(ours) == _drawn(textuals) and len(ours) > 100
        assert "TracebackList" in {name for name, _ in textuals_rendered}  # all its rows
        side_rendered = [rows for name, rows in ours_rendered if name == "TracebackList"]
        if case == "the journal and the status pane":
            assert not side_rendered and {"JournalView", "StatusPane"} <= {name for name, _ in ours_rendered}
        else:
            assert side_rendered == [1, 1], ours_rendered


async def test_the_rows_of_a_frame_are_freed_without_the_cyclic_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A followed journal's frames leave no Strip in a reference cycle: each frame's rows were
    garbage only a collection frees (`Strip.divide` keeps `[self]` for a strip divided whole),
    whose collections took 12 to 28 ms in a 10k lines/s flood."""
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        comp = app.screen._compositor
        renders = comp._get_renders
        drawn: set[int] = set()  # the strips this screen handed its compositor (alive till the end)

        def recording(crop: Region | None = None) -> Iterator[tuple[Region, Region, list[Strip]]]:
            for render in renders(crop):
                drawn.update(map(id, render[2]))
                yield render

        monkeypatch.setattr(comp, "_get_renders", recording)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable stays in gc.garbage
        try:
            for frame in range(20):
                app.journal_view.append_entries(
                    [JournalEntry(f"frame {frame} line {k}", pid=7, realtime_us=1) for k in range(40)]
                )
                await pilot.pause()
            assert "frame 19 line 39" in app.journal_view.model.text(len(app.journal_view.model.rows) - 1)
            gc.collect()
            # This screen's strips that kept themselves: the garbage also holds whatever any cycle
            # held, such as an app of an earlier test that something let go of meanwhile (in CI
            # 113 journal rows of another app, most likely a modal screen's: Textual's own
            # compositor draws those, and keeps the cycles).
            cycled = [o for o in gc.garbage if isinstance(o, Strip) and id(o) in drawn and _holds_itself(o)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert cycled == [], f"{len(cycled)} strips in reference cycles after 20 frames of 40 new rows"


def _holds_itself(strip: Strip) -> bool:
    """Whether a strip's divide cache holds the strip itself (`Strip.divide` at its own width)."""
    return any(any(piece is strip for piece in pieces) for pieces in strip._divide_cache._cache.values())
