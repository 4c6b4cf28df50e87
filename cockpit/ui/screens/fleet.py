"""The fleet view: every configured host and deployment, live, worst first (cockpit.sglang.deployments.fleet).

One row per unit, each deployment as one row with its nodes folded under it; the host's GPU
use on each of its rows. A round a second, over each host's one connection. Sorting by
trouble moves rows at every change of state: a unit that fails jumps to the top and every row
above it moves down. An OptionList re-rendered each moved row (frames of 40 ms at p95 and
115 ms at worst over 256 rows, bench_fleet.py); the Line-API list here builds a row's text
once per change and draws only the rows on screen, so a re-sort costs what a scroll does. The
cursor stays on the same unit when the order changes.
"""

from __future__ import annotations

import asyncio
import time

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Label

from cockpit.errors import CockpitError
from cockpit.fmt import count
from cockpit.session import Session
from cockpit.sglang.deployments.fleet import TROUBLE, FleetRow, rows
from cockpit.targets import Target, resolve
from cockpit.ui.failures import said_failure
from cockpit.ui.panes.cursor import CursorView

REFRESH_S = 1.0
_COLOUR = {
    "failed": "red",
    "broken": "red",
    "hung": "magenta",
    "degraded": "yellow",
    "starting": "cyan",
    "ready": "green",
    "stopped": "grey50",
}


def _key(row: FleetRow) -> tuple[str, str, str]:
    return row.deployment, row.host, row.unit


def label(row: FleetRow) -> Text:
    """`● state  name  GPUs  reason`, the name column as wide for a unit, a deployment and the
    nodes folded under it."""
    colour = _COLOUR.get(row.trouble, "grey50")
    text = Text()
    text.append("● ", colour)
    text.append(f"{row.trouble:<9}", colour)
    if row.deployment and not row.host:
        text.append(f"deployment {row.unit:<47}", "bold")
    elif row.node:
        text.append(f"  └ {row.node:<14} {row.host:<16} {row.unit:<22}")
    else:
        text.append(f"{row.host:<20} {row.unit or '(host)':<37}")
    text.append(f" {row.gpus:<28}", "grey62")
    text.append(f" {row.reason}", "grey62")
    return text


class FleetList(CursorView):
    """The fleet's rows as a Line-API view: a row's Strip is built when it is on screen, and
    kept (by its text) until the row changes."""

    BINDINGS = [
        Binding("j,down", "move(1)", "Down", show=False, id="fleet.down"),
        Binding("k,up", "move(-1)", "Up", show=False, id="fleet.up"),
        Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False, id="fleet.page_down"),
        Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False, id="fleet.page_up"),
        Binding("g,home", "move(-1_000_000)", "First", show=False, id="fleet.first"),
        Binding("G,end", "move(1_000_000)", "Last", show=False, id="fleet.last"),
        Binding("enter", "open", "Open", id="fleet.open"),
    ]
    COMPONENT_CLASSES = {"fleet--cursor"}

    class Opened(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.labels: list[Text] = []
        self._strips: LRUCache[tuple[str, int, bool], Strip] = LRUCache(1024)

    def line_count(self) -> int:
        return len(self.labels)

    def set_labels(self, labels: list[Text]) -> None:
        self.labels = labels
        size = Size(self.scrollable_content_region.width, len(labels))
        if size != self.virtual_size:
            self.virtual_size = size
        if self.cursor >= len(labels):
            self.cursor = max(0, len(labels) - 1)
        self.refresh()

    def action_open(self) -> None:
        if self.labels:
            self.post_message(self.Opened(self.cursor))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = int(self.scroll_y) + y
        if row >= len(self.labels):
            return Strip.blank(width)
        label = self.labels[row]
        cursor = row == self.cursor
        key = (label.plain, width, cursor)
        strip = self._strips.get(key)
        if strip is None:
            text = label.copy()
            text.truncate(width, overflow="ellipsis", pad=True)
            if cursor:  # the background alone: the state keeps its colour
                text.stylize(Style(bgcolor=self.get_component_rich_style("fleet--cursor").bgcolor))
            strip = Strip(list(text.render(self.app.console)), width)
            self._strips[key] = strip
        return strip


class FleetScreen(ModalScreen[Target | str | None]):
    """Dismissed with the unit chosen, or a deployment's name."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="fleet.close")]
    on_worker_state_changed = said_failure  # a worker that ended in error is said (cockpit.ui.failures)

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.rows: list[FleetRow] = []
        self._labels: dict[FleetRow, Text] = {}  # this round's rows' texts: a row unchanged is not built again
        self.rounds = 0
        self.round_ms = 0.0

    def compose(self) -> ComposeResult:
        with Vertical(id="fleet", classes="dialog"):
            title = "Fleet, worst first: Enter opens a unit or a deployment, Esc closes"
            yield Label(title, classes="dialog-title")
            yield Label("asking every host…", id="fleet-summary", markup=False)
            yield FleetList(id="fleet-rows")

    def on_mount(self) -> None:
        self.query_one("#fleet-rows", FleetList).focus()
        self.refresh_rounds()

    @work(exclusive=True, exit_on_error=False)
    async def refresh_rounds(self) -> None:
        while True:
            began = time.monotonic()
            try:
                rounds = await self.session.fleet_round()
            except CockpitError as e:
                self.query_one("#fleet-summary", Label).update(f"the fleet could not be read: {e}")
            else:
                self.round_ms = (time.monotonic() - began) * 1000
                self.rounds += 1
                self.show(rows(self.session.config, rounds), len(rounds))
            await asyncio.sleep(REFRESH_S)

    def show(self, new: list[FleetRow], hosts: int) -> None:
        units = [r for r in new if r.host and r.unit]
        groups = [r for r in new if not r.host and r.deployment]  # a deployment's own line
        counts = {t: sum(1 for r in units if r.trouble == t) for t in TROUBLE}
        said = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
        of_groups = {t: sum(1 for r in groups if r.trouble == t) for t in TROUBLE}
        if groups:  # a broken deployment is one line of its own, whatever its nodes' units say
            said += "; " + ", ".join(f"{count(n, 'deployment')} {t}" for t, n in of_groups.items() if n)
        self.query_one("#fleet-summary", Label).update(
            f"{count(hosts, 'host')}, {count(len(units), 'unit')}: {said or 'none'} (round {self.round_ms:.0f} ms)"
        )
        view = self.query_one("#fleet-rows", FleetList)
        kept = _key(self.rows[view.cursor]) if view.cursor < len(self.rows) else None
        self.rows = new
        self._labels = {r: self._labels.get(r) or label(r) for r in new}
        view.set_labels([self._labels[r] for r in new])
        keys = [_key(r) for r in new]
        if kept in keys:
            view.place_cursor(keys.index(kept))

    def on_fleet_list_opened(self, event: FleetList.Opened) -> None:
        row = self.rows[event.index]
        if not row.unit:
            self.notify(f"{row.host}: {row.reason}", severity="warning")
            return
        if not row.host:  # a deployment's own row: the deployment, as `cockpit --deployment` opens it
            self.dismiss(row.deployment)
            return
        self.dismiss(resolve(self.session.config, row.host, row.unit))
