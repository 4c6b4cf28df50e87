"""The app shell and the status pane: Pilot tests, snapshots of recorded states, and the lab."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from cockpit.config import Config, HostConfig
from cockpit.systemd.entry import parse_json_line
from cockpit.systemd.status import fetch, parse_show
from cockpit.targets import Target
from cockpit.traceback.model import Line
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView, display_text
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from tests.conftest import ROOT, LabHandle

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


def test_display_text_shows_what_a_terminal_would() -> None:
    assert display_text("Loading  10%\rLoading  50%\rLoading 100%") == "Loading 100%"
    assert display_text("a\tb") == "a       b"
    assert display_text("bell\x07") == "bell\ufffd"


async def test_live_pane_follows_a_restart_in_the_lab(lab: LabHandle) -> None:
    target = Target(lab.name, "sglang-demo.service")
    app = CockpitApp(Config(), target)
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        deadline = time.monotonic() + 20
        while pane.status is None or not pane.status.ready:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        before = pane.status.main_pid
        host = app.pool.get(lab.name)
        assert before == (await fetch(host, "sglang-demo.service")).main_pid
        await pilot.press("r")
        await pilot.press("y")
        deadline = time.monotonic() + 30
        while pane.status.main_pid == before or not pane.status.ready:
            assert time.monotonic() < deadline, "the pane never showed the new PID"
            await asyncio.sleep(0.2)
        assert pane.status.main_pid == (await fetch(host, "sglang-demo.service")).main_pid
        assert f"pid {pane.status.main_pid}" in str(pane.render())
        view = app.query_one(JournalView)
        deadline = time.monotonic() + 10
        while not any(isinstance(r, Line) and "ready to roll" in r.text for r in view.model.records[-30:]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)


async def test_picker_lists_the_hosts_sglang_units_with_state(lab: LabHandle) -> None:
    from textual.widgets import OptionList

    from cockpit.ui.screens.picker import PickerScreen

    cfg = Config(hosts={lab.name: HostConfig(name=lab.name)})
    app = CockpitApp(cfg, None, live=False)
    async with app.run_test(size=(130, 30)) as pilot:
        app.action_pick()
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        deadline = time.monotonic() + 20
        while not any(getattr(s, "active_state", None) == "active" for s in picker.states.values()):
            assert time.monotonic() < deadline, picker.states
            await asyncio.sleep(0.2)
        await pilot.pause()
        options = picker.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("sglang-demo.service" in label and "active (running)" in label for label in labels)
        await pilot.press("enter")
        await pilot.pause()
        assert app.target == Target(lab.name, "sglang-demo.service")


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


async def test_unknown_host_key_asks_in_a_modal(tmp_path, lab: LabHandle, monkeypatch) -> None:
    from cockpit.lab.lab import Lab

    info = Lab(lab.name).info()
    (tmp_path / "known_hosts").write_text("")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host keytest\n  HostName {info.address}\n  User root\n"
        f"  IdentityFile {Lab(lab.name).client_key}\n  UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
    )
    monkeypatch.setenv("COCKPIT_SSH_CONFIG", str(cfg))
    app = CockpitApp(Config(), Target("keytest", "sglang-demo.service"))
    async with app.run_test(size=(130, 30)) as pilot:
        deadline = time.monotonic() + 20
        while not isinstance(app.screen, ConfirmModal):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert "SHA256:" in app.screen.body and app.screen.title_text == "Unknown host key for keytest"
        await pilot.press("y")
        pane = app.query_one(StatusPane)
        deadline = time.monotonic() + 20
        while pane.status is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        assert pane.status.active_state == "active"
    assert info.address in (tmp_path / "known_hosts").read_text()


async def test_stale_data_says_its_age_and_never_ready() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(StatusPane)
        await _feed(pilot, recorded_status())
        assert "ready ✓" in str(pane.render()) and pane.trouble() is None and pane.size.height == 2
        later = pane.received + 12.4
        pane.watching = True  # as the live poll does
        pane.clock = lambda: later  # the last status arrived 12 s ago: the host stopped answering
        await pilot.pause(0.6)
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
        await pilot.pause(0.6)
        assert "ready ✓" in str(pane.render()) and pane.trouble() is None and pane.size.height == 2


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
        await pilot.pause(0.6)

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


def test_the_previous_exit_outlives_an_automatic_restart() -> None:
    from cockpit.feeds import StatusPoll

    poll = StatusPoll(
        None,
        "sglang-demo.service",
        ("127.0.0.1", 30000),  # type: ignore[arg-type]
        on_status=lambda s: None,
        on_problem=lambda k, s: None,
    )
    died = recorded_status(
        active_state="activating",
        sub_state="auto-restart",
        exec_main_code="exited",
        exec_main_status=1,
        exec_main_exit=1796032480.0,
        invocation_id="a" * 32,
    )
    assert poll._with_previous_exit(died) is died  # systemd still says how it ended
    again = recorded_status(invocation_id="b" * 32, exec_main_code=None, exec_main_exit=None)
    shown = poll._with_previous_exit(again)
    assert (shown.previous_exit, shown.previous_exit_at) == ("exited 1", 1796032480.0)
    poll.note_exit("killed 9/KILL", 1796032999.0)  # systemd's own journal line says it too
    assert poll._with_previous_exit(again).previous_exit == "killed 9/KILL"


async def test_the_status_pane_shows_the_previous_exit_and_no_unknown_memory() -> None:
    app = recorded_app()
    async with app.run_test(size=(130, 30)) as pilot:
        await _feed(pilot, recorded_status(previous_exit="exited 1", previous_exit_at=1796032480.0))
        text = str(app.query_one(StatusPane).render())
        assert "last exit exited 1 at " in text and "mem" not in text
        await _feed(pilot, recorded_status(memory_bytes=3 << 30))
        assert "mem 3.0 GiB" in str(app.query_one(StatusPane).render())
