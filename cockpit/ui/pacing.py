"""When the screen is drawn: at once when something changed, at most once a period (the app's
screen asks CockpitApp._frame_period: FRAME_PERIOD, or longer under a flood; else Textual's 60 Hz).

Textual draws a screen from a 60 Hz interval timer that it pauses after each update and resumes
when a widget asks for a repaint. After an idle stretch its timer (textual/timer.py, `_skip`)
sets its next tick one to two periods ahead, not at the next one: a journal batch that arrives
just after an update waited up to 33 ms for the next, and one in twenty batches of a 10k
lines/s flood waited more than 27 ms (benchmarks/bench_app_flood.py, `frame_to_terminal_parts_ms`,
docs/facts.md). `PacedScreen` draws from `FrameTimer` instead: a resumed update runs at once when
the last one is at least a period old, else a period after it, so no change waits longer than
one period plus the work ahead of it.

This reaches into two private parts of Textual (the screen's `_update_timer` and the Timer's
`_run` loop), pinned by constraints.txt; tests/ui/test_pacing.py fails when an upgrade moves them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from textual import _time
from textual.screen import UPDATE_PERIOD, Screen
from textual.timer import EventTargetGone, Timer

from cockpit.ui.compositor import CroppedCompositor

# At most 120 frames a second while the journal is on time and not a flood. A change waits for
# the end of the period the last frame began (a batch just after a status poll's frame waited up
# to 16.7 ms at Textual's 60): at 10k lines/s the batch's wait before its frame had a p95 of 6 to
# 8 ms against 10 to 12 at 60, for as many frames (the journal's batches, GAP_S apart, and the
# panes' polls are what ask for them; docs/facts.md).
FRAME_PERIOD = 1 / 120
# The journal this late, beyond the link's own delay: the app is not keeping up with it, and its
# frames go down to FLOOD_PERIOD apart until it has been on time for FLOOD_HOLD_S
# (CockpitApp._frame_period): frames back at full rate at once put it behind again. Twice
# journald's own cadence: it wakes its followers at most every 250 ms, so `journalctl -f` in the
# host reads lines up to 250 ms after their stamps at any rate (1k to 30k lines/s, docs/facts.md).
# At 0.25 the app, 0.2 s late all through a 10k flood it kept up with, crossed it on a hiccup and
# drew 5, then 10 frames a second for two to three seconds.
FLOOD_LATE_S = 0.5
FLOOD_PERIOD = 0.1
FLOOD_HOLD_S = 2.0
# While it is late, frames BEHIND_PERIOD apart: a frame costs the same whatever it shows, and a
# screen of lines seconds old helps no one (py-spy at 40,000 to 45,000 lines/s: a fifth to a
# quarter of the app's CPU at 6 to 10 frames a second, docs/facts.md).
BEHIND_PERIOD = 0.2
# What a person did (a key, a click, a wheel) is drawn FRAME_PERIOD apart for INPUT_HOLD_S after
# it, flood or not: a key waits for the next frame, not for the end of a flood's period.
INPUT_HOLD_S = 0.5
# The journal written this fast (lines a second of journald's time): at 60 frames a second each
# frame scrolls over 300 new rows past a pane of 40, as unreadable as at 10, which cost a sixth.
# The frames slow before the app falls behind, not only after (a frame is 5 to 8 ms of a core
# the host's journald and journalctl want at that rate when they share the machine).
FLOOD_RATE = 20_000


class FrameTimer(Timer):
    """A repeating timer that ticks when resumed, never twice within one interval; `period`,
    when given, is asked for the interval before each tick, and again at least every base
    interval of a wait (a period that shortened meanwhile, for a key pressed, is kept)."""

    last_tick = -math.inf
    period: Callable[[], float] | None = None

    async def _run(self) -> None:
        count = 0
        while True:
            await self._active.wait()
            interval = self._interval if self.period is None else self.period()
            wait = self.last_tick + interval - _time.get_time()
            if wait > 0:
                await _time.sleep(min(wait, self._interval))
                continue  # paused meanwhile (a layout drew the screen): wait to be resumed again
            self.last_tick = _time.get_time()
            count += 1
            try:
                await self._tick(next_timer=self.last_tick, count=count)
            except EventTargetGone:
                break


class PacedScreen(Screen):
    """A screen whose updates come from a FrameTimer, `period` apart when given (else 60 a second),
    each rendering only what it draws (cockpit.ui.compositor)."""

    _frame_timer: FrameTimer | None = None

    def __init__(self, *, period: Callable[[], float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self._period = period
        self._compositor = CroppedCompositor()

    @property
    def _update_timer(self) -> Timer:
        if self._frame_timer is None:
            timer = FrameTimer(self, UPDATE_PERIOD, name="screen_update", callback=self._on_timer_update, pause=True)
            timer.period = self._period
            timer._start()
            self._timers.add(timer)
            self._frame_timer = timer
        return self._frame_timer
