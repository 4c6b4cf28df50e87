"""The app shell against the lab: the live status pane through a restart, the picker of a real
host's units, an unknown host key asked in a modal."""

from __future__ import annotations

import asyncio
import time

from cockpit.config import Config, HostConfig
from cockpit.systemd.status import fetch
from cockpit.targets import Target
from cockpit.traceback.model import Line
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from tests.conftest import LabHandle


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
        host = app.session.pool.get(lab.name)
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
