"""The picker over a fleet: rows change in place and new ones arrive in one call (the live
picker over real labs: tests/lab/test_picker_labs.py)."""

from __future__ import annotations

import asyncio

from textual.widgets import OptionList

from cockpit.config import Config
from cockpit.session import RecordedSession
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens import picker
from cockpit.ui.screens.picker import PickerScreen

HOSTS = [f"gpu{k:02d}" for k in range(32)]
UNITS = [f"sglang-{m}.service" for m in range(8)]


class Fleet(RecordedSession):
    """32 hosts of 8 units each, answering at once; `failed` units are shown failed."""

    def __init__(self) -> None:
        super().__init__(Config(), None)
        self.failed: set[tuple[str, str]] = set()
        self.rounds = 0
        self.round_done = asyncio.Event()

    async def rounds_more(self, n: int) -> None:
        """Until `n` more rounds over every host have been answered."""
        for _ in range(n):
            self.round_done.clear()
            await asyncio.wait_for(self.round_done.wait(), 10)

    async def list_units(self, host: str) -> list[str]:
        return list(UNITS)

    async def show_units(self, host: str, units: list[str]) -> list[UnitStatus]:
        if host == HOSTS[-1]:
            self.rounds += 1
            self.round_done.set()
        return [
            UnitStatus(u, host, active_state="failed", sub_state="failed")
            if (host, u) in self.failed
            else UnitStatus(u, host, active_state="active", sub_state="running")
            for u in units
        ]


async def test_a_fleet_of_256_units_refreshes_rows_in_place(monkeypatch) -> None:
    monkeypatch.setattr(picker, "REFRESH_S", 0.05)
    fleet = Fleet()
    app = CockpitApp(Config(), None, session=fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(PickerScreen(fleet, [Target(HOSTS[0], UNITS[0])], HOSTS))
        await pilot.pause()
        options = app.screen.query_one("#units", OptionList)
        await fleet.rounds_more(2)
        await pilot.pause()
        assert options.option_count == 256
        first = [options.get_option_at_index(i) for i in range(256)]
        options.highlighted = 77
        cleared = []
        monkeypatch.setattr(OptionList, "clear_options", lambda self: cleared.append(1))
        fleet.failed.add((HOSTS[9], UNITS[5]))
        await fleet.rounds_more(2)
        await pilot.pause()
        row = 9 * 8 + 5
        assert str(options.get_option_at_index(row).prompt).endswith("failed (failed)")
        assert str(options.get_option_at_index(row - 1).prompt).endswith("active (running)")
        assert [options.get_option_at_index(i) for i in range(256)] == first  # the same rows, updated
        assert not cleared and options.highlighted == 77
