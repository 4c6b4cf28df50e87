"""The picker's screen over a fleet (issue 14, item 6): 32 hosts x 8 units, refreshed every
second, with a few units changing state each round. Prints JSON.

The hosts answer from memory (a recorded session), so what is timed is the screen alone: the
data side of a round over real connections is `bench_picker.py`'s. Figures:

- `fill_ms_p50`/`_p95`: the picker's `_fill` (labels built, changed rows replaced in place, new
  rows added in one call), per round.
- `screen_update_ms_p50`/`_p95`/`_max`: Textual's screen update (`Screen._on_timer_update`:
  layout, the visible rows rendered, the compositor) while the picker is open, headless, at
  160x50. Above ~16 ms a frame, keys wait.
- `rows`: the rows on screen at the end (256 expected).

The first rounds (`WARMUP`) are left out of the figures: they draw the picker and add the rows,
which a person sees once; the rounds after them are the steady 1 Hz refresh.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

from _common import emit, pct
from textual.screen import Screen
from textual.widgets import OptionList

from cockpit.config import Config
from cockpit.session import RecordedSession
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens import picker
from cockpit.ui.screens.picker import PickerScreen

WARMUP = 2  # rounds left out: the picker's first draw and the fleet's rows arriving


class Fleet(RecordedSession):
    def __init__(self, hosts: list[str], units: list[str], changes: int) -> None:
        super().__init__(Config(), None)
        self.hosts, self.units, self.changes = hosts, units, changes
        self.failed: set[tuple[str, str]] = set()
        self.rounds = 0
        self.rng = random.Random(14)
        self.enough = asyncio.Event()
        self.wanted = 0

    async def list_units(self, host: str) -> list[str]:
        return list(self.units)

    async def show_units(self, host: str, units: list[str]) -> list[UnitStatus]:
        if host == self.hosts[-1]:
            self.rounds += 1
            if self.rounds >= self.wanted:
                self.enough.set()
            for _ in range(self.changes):  # the next round sees a few units fail or come back
                key = (self.rng.choice(self.hosts), self.rng.choice(self.units))
                self.failed ^= {key}
        return [
            UnitStatus(u, host, active_state="failed", sub_state="failed")
            if (host, u) in self.failed
            else UnitStatus(u, host, active_state="active", sub_state="running")
            for u in units
        ]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    hosts = [f"gpu{k:02d}" for k in range(args.hosts)]
    units = [f"sglang-{m}.service" for m in range(args.units)]
    fleet = Fleet(hosts, units, args.changes)
    fleet.wanted = args.rounds
    updates: list[float] = []
    fills: list[float] = []
    original_update, original_fill = Screen._on_timer_update, PickerScreen._fill

    def timed_update(screen: Screen) -> None:
        start = time.perf_counter()
        original_update(screen)
        if isinstance(screen, PickerScreen) and fleet.rounds > WARMUP:
            updates.append((time.perf_counter() - start) * 1000)

    def timed_fill(screen: PickerScreen) -> None:
        start = time.perf_counter()
        original_fill(screen)
        if fleet.rounds > WARMUP:
            fills.append((time.perf_counter() - start) * 1000)

    Screen._on_timer_update = timed_update  # type: ignore[method-assign]
    PickerScreen._fill = timed_fill  # type: ignore[method-assign]
    picker.REFRESH_S = args.interval
    try:
        app = CockpitApp(Config(), None, session=fleet)
        async with app.run_test(headless=True, size=(160, 50)) as pilot:
            app.push_screen(PickerScreen(fleet, [Target(hosts[0], units[0])], hosts))
            await pilot.pause()
            await fleet.enough.wait()
            await pilot.pause()
            rows = app.screen.query_one("#units", OptionList).option_count
    finally:
        Screen._on_timer_update = original_update  # type: ignore[method-assign]
        PickerScreen._fill = original_fill  # type: ignore[method-assign]
    return {
        "benchmark": "picker_screen",
        "hosts": args.hosts,
        "units_per_host": args.units,
        "rows": rows,
        "rounds": fleet.rounds,
        "refresh_s": args.interval,
        "changes_per_round": args.changes,
        "fill_ms_p50": round(pct(fills, 50), 3),
        "fill_ms_p95": round(pct(fills, 95), 3),
        "screen_update_ms_p50": round(pct(updates, 50), 3),
        "screen_update_ms_p95": round(pct(updates, 95), 3),
        "screen_update_ms_max": round(max(updates), 3),
        "screen_updates": len(updates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--changes", type=int, default=4, help="units that change state each round")
    parser.add_argument("--interval", type=float, default=getattr(picker, "REFRESH_S", 2.0))
    emit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
