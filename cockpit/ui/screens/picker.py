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

_STATE_MARK = {
    "active": ("●", "green"),
    "failed": ("●", "red"),
    "activating": ("◐", "yellow"),
    "inactive": ("○", "grey50"),
}


class PickerScreen(ModalScreen[Target | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="picker.close")]

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

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            yield Label("Units: Enter opens one, Esc closes", classes="dialog-title")
            yield OptionList(id="units")

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#units", OptionList).focus()
        self.refresh_states()

    def _fill(self) -> None:
        options = self.query_one("#units", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        for i, t in enumerate(self.targets):
            state = self.states.get((t.host, t.unit))
            label = Text()
            if isinstance(state, UnitStatus):
                mark, colour = _STATE_MARK.get(state.active_state, ("?", "grey50"))
                label.append(f"{mark} ", colour)
                label.append(f"{t.host:<20} {t.unit:<36} ")
                label.append(f"{state.active_state} ({state.sub_state})", colour)
            else:
                label.append("… ", "grey50")
                label.append(f"{t.host:<20} {t.unit:<36} ")
                label.append(state or "checking", "grey50")
            options.add_option(Option(label, id=str(i)))
        if self.targets:
            options.highlighted = highlighted if highlighted is not None and highlighted < len(self.targets) else 0

    @work(exclusive=True, exit_on_error=False)
    async def refresh_states(self) -> None:
        while True:
            await asyncio.gather(*(self._host_states(h) for h in self.hosts))
            self._fill()
            await asyncio.sleep(2.0)

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
