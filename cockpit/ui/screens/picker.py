"""The host/unit picker: every configured unit, plus the `sglang*` units each host has."""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from cockpit.errors import CockpitError
from cockpit.session import Session
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target
from cockpit.ui.failures import said_failure

REFRESH_S = 1.0  # a round asks every host once; 32 hosts cost 2 to 6% of a core a second (issue 14)
_STATE_MARK = {
    "active": ("●", "green"),
    "failed": ("●", "red"),
    "activating": ("◐", "yellow"),
    "inactive": ("○", "grey50"),
}


class UnitList(OptionList):
    """An OptionList whose rows are re-labelled one by one. OptionList's own replacement drops
    the drawn lines of every row, and a fleet's 256 were rebuilt at each screen update; a
    picker row is one line whatever its label, so only that row's drawn lines go (Textual
    keys them by the Option)."""

    def relabel(self, index: int, prompt: Text) -> None:
        option = self.get_option_at_index(index)
        option._set_prompt(prompt)
        drawn = self._option_render_cache
        for key in [key for key in drawn.keys() if key[0] is option]:  # noqa: SIM118 - LRUCache has no __iter__
            drawn.discard(key)
        self.refresh()


class PickerScreen(ModalScreen[Target | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="picker.close")]
    on_worker_state_changed = said_failure  # a worker that ended in error is said (cockpit.ui.failures)

    def __init__(
        self,
        session: Session,
        targets: list[Target],
        hosts: list[str],
        *,
        known: dict[tuple[str, str], UnitStatus] | None = None,
    ) -> None:
        """`known` seeds the states the app already holds (the open unit's last status), so the
        list is useful before the first probe answers."""
        super().__init__()
        self.session = session
        self.targets = list(targets)
        self.hosts = hosts
        self.states: dict[tuple[str, str], UnitStatus | str] = dict(known or {})
        self._drawn: list[str] = []  # the text of each row on screen, in order

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            yield Label("Units: Enter opens one, Esc closes", classes="dialog-title")
            yield UnitList(id="units")

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#units", UnitList).focus()
        self.refresh_states()

    def _label(self, target: Target) -> Text:
        state = self.states.get((target.host, target.unit))
        label = Text()
        if isinstance(state, UnitStatus):
            mark, colour = _STATE_MARK.get(state.active_state, ("?", "grey50"))
            label.append(f"{mark} ", colour)
            label.append(f"{target.host:<20} {target.unit:<36} ")
            label.append(f"{state.active_state} ({state.sub_state})", colour)
        else:
            label.append("… ", "grey50")
            label.append(f"{target.host:<20} {target.unit:<36} ")
            label.append(state or "checking", "grey50")
        return label

    def _fill(self) -> None:
        """Rows change in place and new ones are added in one call: clearing and re-adding
        the list, as each refresh did, cost 67 to 105 ms a round at 256 rows (issue 14)."""
        options = self.query_one("#units", UnitList)
        labels = [self._label(t) for t in self.targets]
        drawn = self._drawn
        for i in range(min(len(drawn), len(labels))):
            if labels[i].plain != drawn[i]:
                options.relabel(i, labels[i])
                drawn[i] = labels[i].plain
        if len(labels) > len(drawn):
            new = range(len(drawn), len(labels))
            options.add_options(Option(labels[i], id=str(i)) for i in new)
            drawn.extend(labels[i].plain for i in new)
        if self.targets and options.highlighted is None:
            options.highlighted = 0

    @work(exclusive=True, exit_on_error=False)
    async def refresh_states(self) -> None:
        while True:
            await asyncio.gather(*(self._host_states(h) for h in self.hosts))
            self._fill()
            await asyncio.sleep(REFRESH_S)

    async def _host_states(self, name: str) -> None:
        try:
            for unit in await self.session.list_units(name):
                if not any(t.host == name and t.unit == unit for t in self.targets):
                    self.targets.append(Target(name, unit))
            units = [t.unit for t in self.targets if t.host == name]
            for status in await self.session.show_units(name, units) if units else []:
                self.states[(name, status.unit)] = status
        except CockpitError as e:
            for t in self.targets:
                if t.host == name:
                    self.states[(name, t.unit)] = str(e)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.targets[int(event.option.id or 0)])
