"""A screen update renders the rows it draws, of the widgets it draws on, and nothing else.

Textual's compositor (8.2, `Compositor._get_renders`) picks the widgets of a partial update by
their clip, not by where they are: every widget whose container is the screen (the status pane,
the footer, a toast) overlaps every update. And each widget it picks renders all its rows, to
have all but the updated ones thrown away (`_render_chops` keeps the rows the update spans). At
10k journal lines/s nearly every update is the journal view's 43 rows, and the compositor also
rendered the status pane, the footer and all 45 to 50 rows of the screen and the two containers
under the view (docs/facts.md). `CroppedCompositor` picks a widget when its visible part meets
the update and no widget in front of it covers that part, and asks it for the update's rows
alone. An update of several parts (the journal and the status pane) is one rectangle around
them in Textual, and everything in it rendered (the side list of tracebacks, beside the journal
and under the pane); here each widget renders only where a changed part meets it, in bands of
rows (`bands`). What the terminal shows is the same: a row outside the update, a cell outside
every changed part, a widget wholly outside them and a widget wholly behind another were never
written.

And every strip it hands the compositor is freed by its last reference, not by the cyclic
collector: `Strip.divide` of a strip its own width, as `_render_chops` asks of every row a
widget draws whole, answers `[self]` and keeps that in the strip's `_divide_cache`, a cycle. Each
frame's rows were garbage only a collection could free, with all they held: during a 10k lines/s
flood about 5,000 objects a collection, and young collections of 12 to 28 ms (docs/facts.md).

Like cockpit.ui.pacing, this overrides private methods of Textual, pinned by constraints.txt;
tests/ui/test_compositor.py holds it to Textual's own output.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip


class CroppedCompositor(Compositor):
    _parts: list[Region] | None = None  # the changed parts of the partial update being drawn

    def render_partial_update(self) -> ChopsUpdate | None:
        """Textual's, with its changed parts kept for `_get_renders`: the update writes those
        parts' cells only (`ChopsUpdate`'s spans)."""
        self._parts = list(self._dirty_regions)
        try:
            return super().render_partial_update()
        finally:
            self._parts = None

    def _get_renders(self, crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        """The renders `_render_chops` divides (`_cropped_renders`; a whole screen: Textual's
        own), each render's strips uncycled once it has taken their pieces."""
        renders = super()._get_renders(None) if crop is None else self._cropped_renders(crop)
        for render in renders:
            yield render
            uncycle(render[2])

    def _cropped_renders(self, crop: Region) -> Iterable[tuple[Region, Region, list[Strip]]]:
        """(the widget's region cut to the update's rows, its clip, those rows' strips), front
        first, leaving out a widget that one in front of it covers there: the compositor keeps
        the front one's cells (`_render_chops`: the first strip for a cut wins)."""
        drawn: list[Region] = []
        parts = self._parts
        for widget, (region, clip) in self.visible_widgets.items():
            shown = region.intersection(clip)
            here = crop.intersection(shown)  # the cells of it the update writes
            if not here:
                continue
            areas = [here] if parts is None else bands([cells for part in parts if (cells := here.intersection(part))])
            for area in areas:
                if covered(area, drawn):
                    continue
                drawn.append(area)
                rows = Region(shown.x - region.x, area.y - region.y, shown.width, area.height)
                yield Region(region.x, area.y, region.width, area.height), clip, widget.render_lines(rows)


def uncycle(strips: list[Strip]) -> None:
    """Forget how `strips` were divided, once `_render_chops` has taken the pieces (it divides a
    render's strips before it asks for the next render): a strip divided whole kept itself."""
    for strip in strips:
        strip._divide_cache.clear()


def bands(cells: list[Region]) -> list[Region]:
    """The cells of a widget in the changed parts, as bands of rows that touch, each the
    rectangle around its cells: a widget renders each band, not every row from the first changed
    to the last (the side list's count in its title and a relabelled row 8 rows down rendered 9
    rows, 2 ms, once a second in a 10k lines/s flood)."""
    out: list[Region] = []
    for cell in sorted(cells, key=lambda cell: cell.y):
        if out and cell.y <= out[-1].bottom:
            out[-1] = out[-1].union(cell)
        else:
            out.append(cell)
    return out


def covered(area: Region, fronts: list[Region]) -> bool:
    """Whether `fronts` together cover every cell of `area`: each band of rows between their
    top and bottom edges covered from side to side by the fronts that span the band."""
    over = [f for f in fronts if f.overlaps(area)]
    edges = sorted({area.y, area.bottom, *(f.y for f in over), *(f.bottom for f in over)})
    for top, bottom in itertools.pairwise(edges):
        if bottom <= area.y or top >= area.bottom:
            continue
        x = area.x
        for left, right in sorted((f.x, f.right) for f in over if f.y <= top and f.bottom >= bottom):
            if left > x:
                break
            x = max(x, right)
        if x < area.right:
            return False
    return True
