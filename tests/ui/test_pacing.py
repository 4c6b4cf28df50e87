"""The screen's update pacing (cockpit.ui.pacing): a change is drawn at once after a quiet spell,
and never more often than one update a period. Timed on a clock of the test's own, so a busy
machine cannot move the figures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from textual import _time, timer
from textual._context import active_app
from textual.screen import UPDATE_PERIOD, Screen

from cockpit.config import Config
from cockpit.systemd.entry import JournalEntry
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.pacing import FRAME_PERIOD, FrameTimer, PacedScreen


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def get_time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


class _App:
    """What a Timer's tick reads of the running app."""

    _exit = False
    features: frozenset[str] = frozenset()

    def _handle_exception(self, error: Exception) -> None:
        raise error


class _Target:
    """What a Timer needs of its target: a weak reference to it."""


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    clock = Clock()
    monkeypatch.setattr(_time, "get_time", clock.get_time)
    monkeypatch.setattr(_time, "sleep", clock.sleep)
    monkeypatch.setattr(timer, "sleep", clock.sleep)  # Textual's own Timer imported it by name
    yield clock


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _ticks_of(
    kind: type[timer.Timer], clock: Clock, resumes: list[float], period: Callable[[], float] | None = None
) -> list[float]:
    """Resume a screen-update-like timer (the callback pauses it, as Screen._on_timer_update
    does) at each of `resumes`; the clock's time at each tick."""
    ticks: list[float] = []
    target = _Target()
    active_app.set(_App())  # type: ignore[arg-type]  # this test's task only: the timer's copies it

    def update() -> None:
        ticks.append(clock.now)
        paced.pause()

    paced = kind(target, UPDATE_PERIOD, callback=update, pause=True)  # type: ignore[arg-type]
    if period is not None:
        paced.period = period  # type: ignore[attr-defined]
    paced._start()
    try:
        for at in resumes:
            clock.now = max(clock.now, at)
            paced.resume()
            await _settle()
    finally:
        paced.stop()
    return ticks


async def test_a_change_after_a_quiet_spell_is_drawn_at_once(clock: Clock) -> None:
    ticks = await _ticks_of(FrameTimer, clock, [100.0, 101.0, 105.5])
    assert ticks == [100.0, 101.0, 105.5]


async def test_changes_within_one_period_wait_for_its_end_and_no_longer(clock: Clock) -> None:
    ticks = await _ticks_of(FrameTimer, clock, [100.0, 100.002, 100.010])
    assert ticks[0] == 100.0
    assert ticks[1] == pytest.approx(100.0 + UPDATE_PERIOD)  # not before a period has passed
    assert ticks[2] == pytest.approx(100.0 + 2 * UPDATE_PERIOD)
    assert all(b - a >= UPDATE_PERIOD - 1e-9 for a, b in zip(ticks, ticks[1:], strict=False))


async def test_a_period_that_shortens_during_a_wait_is_kept_within_one_frame(clock: Clock) -> None:
    """A flood's period (a key pressed meanwhile shortens it): the change waiting for the end of
    the long period is drawn a frame after the period shortened, not at the long period's end."""
    ticks = await _ticks_of(
        FrameTimer, clock, [100.0, 100.01], period=lambda: 0.2 if clock.now < 100.05 else UPDATE_PERIOD
    )
    assert ticks[0] == 100.0
    assert 100.05 <= ticks[1] <= 100.05 + UPDATE_PERIOD + 1e-9
    still = await _ticks_of(FrameTimer, clock, [200.0, 200.01], period=lambda: 0.2)
    assert still[1] == pytest.approx(200.2)  # a long period that stays long is waited out


async def test_textuals_own_timer_still_waits_past_the_next_period(clock: Clock) -> None:
    """Why the pacing exists: after a tick, Textual's screen timer skips to one to two periods
    ahead. When this fails, an upgrade of Textual has changed its timer: the pacing may be
    needless, or wrong (read textual/timer.py's `_run` again)."""
    ticks = await _ticks_of(timer.Timer, clock, [100.0, 100.5, 100.502])
    assert ticks[1] == 100.5  # resumed after a quiet spell: at once, as ours
    assert ticks[2] - ticks[1] > 1.5 * UPDATE_PERIOD  # but the next change waited past a whole period


async def test_the_apps_screen_is_drawn_by_the_frame_timer() -> None:
    """The private parts the pacing overrides are still where Textual reads them: the app's
    screen is a PacedScreen, and a repaint runs Screen._on_timer_update from a FrameTimer."""
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, PacedScreen)
        assert isinstance(type(screen).__dict__["_update_timer"], property)
        assert isinstance(Screen.__dict__["_update_timer"], property)  # what PacedScreen overrides
        updates: list[float] = []
        real = screen._on_timer_update

        def counted() -> None:
            updates.append(_time.get_time())
            real()

        screen._frame_timer._callback = counted  # type: ignore[union-attr]
        app.status_pane.refresh()
        await pilot.pause()
        await pilot.pause(0.1)
        assert updates, "the repaint asked for no update from the frame timer"
        assert isinstance(screen._update_timer, FrameTimer)
        assert screen._update_timer in screen._timers  # stopped with the screen


async def test_the_frames_slow_down_while_the_journal_comes_late_and_for_a_while_after() -> None:
    """The app draws BEHIND_PERIOD apart while the journal arrives more than FLOOD_LATE_S late,
    then FLOOD_PERIOD apart until it has been on time for FLOOD_HOLD_S, and FRAME_PERIOD apart
    for INPUT_HOLD_S after a key; the frame timer asks for the period before each tick."""
    from cockpit.ui import app as app_module
    from cockpit.ui.pacing import BEHIND_PERIOD, FLOOD_HOLD_S, FLOOD_LATE_S, FLOOD_PERIOD, INPUT_HOLD_S

    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    late = [0.0]
    now = [1000.0]
    app.session.journal.late_s = lambda: late[0]  # type: ignore[method-assign]
    real = app_module.time.monotonic
    app_module.time.monotonic = lambda: now[0]  # type: ignore[assignment]
    try:
        assert app._frame_period() == FRAME_PERIOD
        late[0] = FLOOD_LATE_S + 0.01
        assert app._frame_period() == BEHIND_PERIOD
        late[0] = 0.0
        now[0] += FLOOD_HOLD_S - 0.1
        assert app._frame_period() == FLOOD_PERIOD  # on time, but not for long enough yet
        now[0] += 0.2
        assert app._frame_period() == FRAME_PERIOD
        late[0] = FLOOD_LATE_S + 0.01
        app._input_at = now[0]  # a key pressed while late: drawn at once for a while
        assert app._frame_period() == FRAME_PERIOD
        now[0] += INPUT_HOLD_S + 0.01
        assert app._frame_period() == BEHIND_PERIOD
    finally:
        app_module.time.monotonic = real  # type: ignore[assignment]
    async with app.run_test(size=(120, 30)) as pilot:
        assert app.screen._update_timer.period == app._frame_period  # type: ignore[attr-defined]
        before = time.monotonic()
        await pilot.press("j")
        assert app._input_at >= before  # a key marks the input that frames hurry for


def test_the_frames_slow_down_while_the_journal_is_written_faster_than_anyone_reads() -> None:
    """On time but written faster than FLOOD_RATE lines a second (journald's stamps, as the
    feed's lag reads them): FLOOD_PERIOD apart before the app falls behind, and FLOOD_HOLD_S
    after the rate drops. A journal that stopped coming has no rate."""
    from cockpit.session.journal_feed import CAUGHT_UP_S
    from cockpit.ui import app as app_module
    from cockpit.ui.pacing import FLOOD_HOLD_S, FLOOD_PERIOD, FLOOD_RATE

    wall = [2_000_000.0]
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    feed = app.session.journal
    feed.host_of, feed._clock = (lambda: None), (lambda: wall[0])  # type: ignore[assignment,return-value]

    def flood(rate: int) -> None:
        """One second of journald's stamps at `rate` lines a second, in 10 batches."""
        for k in range(10):
            at = int((wall[0] - 0.1 * (9 - k)) * 1e6)
            feed.lag.update([JournalEntry("x", realtime_us=at)] * (rate // 10), wall[0])
        feed._delivered_at = wall[0]

    now = [1000.0]
    real = app_module.time.monotonic
    app_module.time.monotonic = lambda: now[0]  # type: ignore[assignment]
    try:
        flood(FLOOD_RATE // 2)
        assert feed.late_s() == 0 and app._frame_period() == FRAME_PERIOD
        wall[0] += 1
        flood(FLOOD_RATE * 2)
        assert feed.late_s() == 0 and feed.rate() > FLOOD_RATE and app._frame_period() == FLOOD_PERIOD
        wall[0] += CAUGHT_UP_S + 0.1  # nothing since
        assert feed.rate() == 0
        now[0] += FLOOD_HOLD_S + 0.1
        assert app._frame_period() == FRAME_PERIOD
    finally:
        app_module.time.monotonic = real  # type: ignore[assignment]


async def test_the_frame_timer_waits_the_period_it_is_given(clock: Clock) -> None:
    class Slow(FrameTimer):
        period = staticmethod(lambda: 0.1)

    ticks = await _ticks_of(Slow, clock, [100.0, 100.002])
    assert ticks == [100.0, pytest.approx(100.1)]
