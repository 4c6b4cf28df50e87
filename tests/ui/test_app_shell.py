"""The app shell and the status pane: Pilot tests and snapshots of recorded states (against the lab:
tests/lab/test_app_shell_lab.py)."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace

from textual import events
from textual.message import Message

from cockpit.config import Config, HostConfig
from cockpit.systemd.entry import parse_json_line
from cockpit.systemd.gpu_use import Gpu, GpuProcess, GpuUse
from cockpit.systemd.status import parse_show
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.early_state import EarlyState
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from tests.conftest import ROOT, until
from tests.unit.test_early_state import SHOW, Answer, read_now

DATA = ROOT / "tests" / "data"
TARGET = Target("cockpit-lab", "sglang-demo.service")


def recorded_status(**changes):
    [status] = parse_show((DATA / "show-sglang-demo.txt").read_text(), "cockpit-lab")
    return replace(status, **{"ready": True, "checked_at": status.active_enter + 291, **changes})


def recorded_entries():
    return [parse_json_line(line) for line in (DATA / "journal-restart.jsonl").read_text().splitlines()]


def recorded_app(**kwargs) -> CockpitApp:
    return CockpitApp(Config(), TARGET, live=False, **kwargs)


async def _feed(pilot, status=None, entries=None, connection=None) -> None:
    app = pilot.app
    if status is not None:
        app.query_one(StatusPane).show_status(status)
    if entries is not None:
        app.query_one(JournalView).append_entries(entries)
    if connection is not None:
        app.query_one(StatusPane).show_connection(*connection)
    await pilot.pause()


def test_snapshot_running(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _feed(pilot, recorded_status(), recorded_entries())

    assert snap_compare(recorded_app(), terminal_size=(130, 30), run_before=run_before)


def test_snapshot_failed_and_reconnecting(snap_compare) -> None:
    failed = recorded_status(
        active_state="failed",
        sub_state="failed",
        main_pid=0,
        ready=False,
        exec_main_code="exited",
        exec_main_status=1,
        n_restarts=3,
        exec_main_exit=1796032480.0,
    )

    async def run_before(pilot) -> None:
        await _feed(
            pilot,
            failed,
            recorded_entries(),
            ("reconnecting", "cannot reach cockpit-lab (10.213.0.2:22): Network is unreachable"),
        )

    assert snap_compare(recorded_app(), terminal_size=(130, 30), run_before=run_before)


def test_snapshot_confirm_modal(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _feed(pilot, recorded_status(), recorded_entries())
        await pilot.press("r")

    assert snap_compare(recorded_app(), terminal_size=(130, 30), run_before=run_before)


async def test_restart_asks_first_and_names_unit_and_host() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        await _feed(pilot, recorded_status())
        await pilot.press("r")
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        assert modal.title_text == "Restart sglang-demo.service on cockpit-lab?"
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmModal)


async def test_read_only_hides_and_refuses_changes() -> None:
    app = recorded_app(read_only=True)
    async with app.run_test(size=(130, 30)) as pilot:
        await pilot.press("r")
        assert not isinstance(app.screen, ConfirmModal)
        assert app.check_action("unit_action", ("restart",)) is False
    ro_host = CockpitApp(
        Config(hosts={"cockpit-lab": HostConfig(name="cockpit-lab", read_only=True)}), TARGET, live=False
    )
    assert ro_host.check_action("unit_action", ("stop",)) is False


async def test_status_pane_draws_state_and_connection_trouble() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        await _feed(pilot, recorded_status(), connection=("reconnecting", "lost the connection to cockpit-lab"))
        text = str(app.query_one(StatusPane).render())
        assert "active (running)" in text and "ready ✓" in text and "pid 133" in text and "up 4m51s" in text
        assert "✗ reconnecting cockpit-lab: lost the connection to cockpit-lab" in text


async def test_new_lines_do_not_move_the_view_while_reading() -> None:
    app = recorded_app()
    entries = recorded_entries()
    async with app.run_test(size=(130, 20)) as pilot:
        view = app.query_one(JournalView)
        view.append_entries(entries * 3)
        await pilot.pause()
        assert view.follow and view.scroll_y == view.max_scroll_y
        view.focus()
        await pilot.press("g")
        assert not view.follow and view.scroll_y == 0
        view.append_entries(entries[:7])
        await pilot.pause()
        assert view.scroll_y == 0 and view.unread == 7
        assert "7 new lines" in view.title_text()
        assert "7 new lines" in str(view.parent.border_title)  # where the eye is
        await pilot.press("G")
        await pilot.pause()
        assert view.follow and view.unread == 0 and view.scroll_y == view.max_scroll_y


async def test_unknown_host_shows_in_the_pane_and_the_app_keeps_running() -> None:
    app = CockpitApp(Config(), Target("no-such-host.invalid", "sglang-demo.service"))
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        deadline = time.monotonic() + 20
        while "unknown host" not in str(pane.render()):
            assert time.monotonic() < deadline, str(pane.render())
            await asyncio.sleep(0.2)
        assert app.is_running
        await pilot.press("T")  # keys still work
        assert app.query_one(JournalView).show_time is False


async def _until(pilot, done, timeout: float = 10.0) -> None:
    """Pause until `done()`: the pane's freshness timer ticks every half second, and its new
    height needs a layout after that, later on a busy machine (a fixed 0.6 s failed in CI)."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        await pilot.pause(0.1)


async def test_stale_data_says_its_age_and_never_ready() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        await _feed(pilot, recorded_status())
        assert "ready ✓" in str(pane.render()) and pane.trouble() is None and pane.size.height == 2
        later = pane.received + 12.4
        pane.watching = True  # as the live poll does
        pane.clock = lambda: later  # the last status arrived 12 s ago: the host stopped answering
        await _until(pilot, lambda: "as of 12 s ago" in str(pane.render()) and pane.size.height == 3)
        text = str(pane.render())
        assert "as of 12 s ago" in text and "readiness unknown" in text and "ready ✓" not in text
        assert "✗ no answer from cockpit-lab for 12 s" in text
        assert pane.size.height == 3  # the third line is drawn, not cut off
        pane.show_connection("reconnecting", "lost the connection to cockpit-lab: Connection lost")
        await pilot.pause()
        assert "✗ connection lost 12 s ago, reconnecting: lost the connection" in str(pane.render())
        pane.show_status(recorded_status())  # the host is back
        await pilot.pause()
        pane.show_connection("connected", None)
        pane.clock = lambda: later + 0.5
        await _until(pilot, lambda: "ready ✓" in str(pane.render()) and pane.size.height == 2)
        assert "ready ✓" in str(pane.render()) and pane.trouble() is None and pane.size.height == 2


async def test_a_poll_repaints_the_pane_and_lays_it_out_only_when_its_height_changes() -> None:
    """Issue 29, item 2: a layout costs about 14 ms of a frame; the pane forced one a poll."""
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        await _feed(pilot, recorded_status())
        asked: list[bool] = []
        refresh = pane.refresh

        def recorded(*regions, repaint: bool = True, layout: bool = False, recompose: bool = False):
            asked.append(layout)
            return refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

        pane.refresh = recorded  # type: ignore[method-assign]
        first = recorded_status()
        for later in (1, 2, 3):  # the next polls: the uptime moves, the lines stay two
            pane.show_status(replace(first, checked_at=first.checked_at + later))
            await pilot.pause()
        assert asked and not any(asked), asked
        assert "up 4m54s" in str(pane.render())
        pane.show_status(replace(first, readiness="degraded", readiness_reason="/health_generate answered 503"))
        await pilot.pause()
        assert asked[-1] is True  # the reason's line: a third line, laid out
        await _until(pilot, lambda: pane.size.height == 3)
        assert "degraded: /health_generate answered 503" in str(pane.render())


async def test_a_unit_that_disappears_says_unit_not_found() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        await _feed(pilot, recorded_status())
        pane.show_problem("missing", "unit sglang-demo.service not found on cockpit-lab")
        await pilot.pause()
        text = str(pane.render())
        assert "unit not found" in text and "active (running)" not in text and "ready ✓" not in text


def test_snapshot_stale_and_reconnecting(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _feed(pilot, recorded_status(), recorded_entries())
        pane = pilot.app.query_one(StatusPane)
        now = pane.received + 12.4
        pane.watching = True
        pane.clock = lambda: now  # the snapshot's "12 s ago" must not depend on how fast it is taken
        pane.show_connection("reconnecting", "lost the connection to cockpit-lab: Connection lost")
        pilot.app.journal_view.show_feed("not following (connection lost)")
        await _until(pilot, lambda: "12 s ago" in str(pane.render()) and pane.size.height == 3)
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(130, 30), run_before=run_before)


def test_snapshot_paused_with_unread_lines(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _feed(pilot, recorded_status(), recorded_entries())
        view = pilot.app.query_one(JournalView)
        view.focus()
        await pilot.press("g")  # reading from the top: following stops
        view.append_entries(recorded_entries()[:5])
        await pilot.pause()
        assert view.title_text() == "journal · sglang-demo.service · paused · ▼ 5 new lines · G to follow"

    assert snap_compare(recorded_app(), terminal_size=(130, 30), run_before=run_before)


async def test_the_status_pane_shows_the_previous_exit_and_no_unknown_memory() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        await _feed(pilot, recorded_status(previous_exit="exited 1", previous_exit_at=1796032480.0))
        text = str(app.query_one(StatusPane).render())
        assert "last exit exited 1 at " in text and "mem" not in text
        await _feed(pilot, recorded_status(memory_bytes=3 << 30))
        assert "mem 3.0 GiB" in str(app.query_one(StatusPane).render())


def _gpu_table(invocation: str | None) -> GpuUse:
    """Eight GPUs: the unit's ranks on each, and an orphan of an earlier start on GPUs 2 and 3."""
    gpus = [Gpu(i, f"GPU-{i}", 122205 + (20000 if i in (2, 3) else 0), 143771) for i in range(8)]
    unit = "/system.slice/sglang-demo.service"
    ranks = [GpuProcess(100 + i, "python3", 122205, i, f"GPU-{i}", unit, 62, 300.0, invocation) for i in range(8)]
    orphan = [
        GpuProcess(4242, "python3", 20000, i, f"GPU-{i}", unit, 1, 4000.0, "0123456789abcdef0123") for i in (2, 3)
    ]
    return GpuUse(gpus, ranks + orphan)


async def test_the_status_pane_shows_gpu_use_and_marks_what_is_not_the_units() -> None:
    app = recorded_app()
    async with app.run_test(size=(160, 30)) as pilot:
        status = recorded_status()
        await _feed(pilot, status)
        pane = app.query_one(StatusPane)
        assert "gpu " not in str(pane.render())  # no table yet: no line
        pane.show_gpus(_gpu_table(status.invocation_id))
        await pilot.pause()
        line = str(pane.render()).splitlines()[2]
        assert line.startswith("gpu 0:85% 1:85% 2:99% 3:99% 4:85%"), line
        assert (
            "⚠ PID 4242 19.5 GiB on each of GPUs 2,3 "
            "(PID 1's child from sglang-demo.service's earlier invocation 0123456789ab)" in line
        ), line
        assert "PID 100" not in line  # the unit's own ranks are not named
        assert "as read" not in line  # a table that does not say when it was read says no time
        read = replace(_gpu_table(status.invocation_id), read_at=time.mktime((2026, 5, 25, 19, 34, 29, 0, 0, -1)))
        pane.show_gpus(read)
        await pilot.pause()
        assert str(pane.render()).splitlines()[2].endswith("  as read 19:34:29")  # the warning's time
        pane.show_gpus(GpuUse(missing="no nvidia-smi on cockpit-lab"))
        await pilot.pause()
        assert "gpu" not in str(pane.render())


def test_snapshot_gpu_held_by_an_orphan(snap_compare) -> None:
    async def run_before(pilot) -> None:
        status = recorded_status()
        await _feed(pilot, status, recorded_entries())
        pilot.app.query_one(StatusPane).show_gpus(_gpu_table(status.invocation_id))
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(160, 30), run_before=run_before)


async def test_the_early_state_line_is_drawn_until_the_apps_first_frame_and_never_after() -> None:
    """cockpit/ui/early_state.py: the master's answer coming once Textual has started, while the
    panes mount, is still drawn (the first frame waits for it); one coming after the first frame
    draws nothing over it."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    try:
        mounting = Answer(SHOW.format(unit=TARGET.unit), TARGET.host)
        early = EarlyState(mounting, write)  # type: ignore[arg-type]

        def answer_while_mounting(message: Message) -> None:
            if isinstance(message, events.Mount) and not mounting.release.is_set():
                mounting.release.set()
                early._thread.join(5)

        async with recorded_app(early=early).run_test(message_hook=answer_while_mounting) as pilot:
            await pilot.pause()
        assert mounting.release.is_set() and early.drawn
        assert "● active (running)" in read_now(read).decode()

        late = Answer(SHOW.format(unit=TARGET.unit), TARGET.host)
        early = EarlyState(late, write)  # type: ignore[arg-type]
        app = recorded_app(early=early)
        async with app.run_test() as pilot:
            await pilot.pause()
            await until(lambda: app._early is None, 5, "the first frame did not come through CockpitApp._display")
            late.release.set()
            await asyncio.to_thread(early._thread.join, 5)
            assert not early._thread.is_alive()
        assert not early.drawn and read_now(read) == b""
    finally:
        os.close(read)
        os.close(write)


async def test_a_status_that_changes_one_row_repaints_that_row_and_the_same_status_none(monkeypatch) -> None:
    """Two statuses come a second and the GPU table every few: each repainted the pane's every
    row beside a flood's frames. The screen still shows each change (the row read back)."""
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        status = recorded_status()
        await _feed(pilot, status)
        pane = app.query_one(StatusPane)
        rendered: list[int] = []
        render_lines = StatusPane.render_lines
        monkeypatch.setattr(
            StatusPane, "render_lines", lambda self, crop: (rendered.append(crop.height), render_lines(self, crop))[1]
        )
        await _feed(pilot, replace(status, checked_at=status.checked_at))  # another poll, nothing new
        assert rendered == []
        await _feed(pilot, replace(status, checked_at=status.checked_at + 60))  # a minute more of uptime
        assert rendered == [1]
        shown = "".join(s.text for s in pane.render_line(1))
        assert "up 5m51s" in shown, shown
        rendered.clear()
        await _feed(pilot, replace(status, checked_at=status.checked_at + 60, sub_state="auto-restart"))
        assert rendered == [1]  # the state's row alone
        assert "active (auto-restart)" in "".join(s.text for s in pane.render_line(0))
