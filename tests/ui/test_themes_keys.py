"""Themes, keys, the command palette and read-only mode; every screen in each shipped theme."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.attempts import Attempt
from cockpit.config import Config, HostConfig, UIConfig
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.systemd import stacks
from cockpit.systemd.entry import parse_json_line, parse_json_lines
from cockpit.systemd.stacks import StackCapture
from cockpit.systemd.status import parse_show
from cockpit.systemd.unit import load_unit
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.picker import PickerScreen
from cockpit.ui.screens.stacks import StacksScreen
from cockpit.ui.themes import discover
from tests.conftest import ROOT
from tests.lab.test_rollout_lab import SEED, UNIT

DATA = ROOT / "tests" / "data"
THEMES = ["cockpit-dark", "cockpit-light", "cockpit-high-contrast"]
TARGET = Target("cockpit-lab", "sglang-demo.service")


def test_user_theme_and_bad_theme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    user = tmp_path / ".config" / "cockpit" / "themes"
    user.mkdir(parents=True)
    (user / "night.toml").write_text('name = "night"\nprimary = "#884488"\ndark = true\n')
    (user / "broken.toml").write_text('name = "broken"\nprimary = "#zzzzzz"\n')
    themes, problems = discover()
    assert "night" in {t.name for t in themes}
    assert len(problems) == 1 and problems[0].startswith(f"{user / 'broken.toml'}: ")
    app = CockpitApp(Config(ui=UIConfig(theme="night")), TARGET, live=False)
    assert app.theme == "night"
    fallback = CockpitApp(Config(ui=UIConfig(theme="broken")), TARGET, live=False)
    assert fallback.theme == "cockpit-dark"
    assert any("'broken' is not installed: using cockpit-dark" in p for p in fallback.theme_problems)


def test_theme_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = CockpitApp(Config(), TARGET, live=True)
    app.theme = "cockpit-light"
    assert json.loads((tmp_path / "cockpit" / "ui.json").read_text()) == {"theme": "cockpit-light"}
    assert CockpitApp(Config(), TARGET, live=True).theme == "cockpit-light"


async def test_keymap_override_from_config() -> None:
    app = CockpitApp(Config(ui=UIConfig(keys={"restart": "ctrl+r", "journal.next_traceback": "N"})), TARGET, live=False)
    async with app.run_test(size=(130, 30)) as pilot:
        await pilot.press("r")
        assert not isinstance(app.screen, ConfirmModal)  # r no longer restarts
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, ConfirmModal)


async def test_help_lists_keys_with_their_ids() -> None:
    app = CockpitApp(Config(ui=UIConfig(keys={"restart": "ctrl+r"})), TARGET, live=False)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        from rich.console import Console

        from cockpit.ui.screens.help import bindings_table

        console = Console(width=200, record=True)
        console.print(bindings_table(app.screen.sections, app.screen.keymap))
        text = console.export_text()
        assert "ctrl+r" in text and "journal.next_traceback" in text and "source.stack_up" in text


async def test_read_only_refuses_every_changing_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sglang_root
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    catalog = load_catalog(sglang_root("0.5.23"))
    for app in (
        CockpitApp(Config(), TARGET, read_only=True, live=False),
        CockpitApp(Config(hosts={"cockpit-lab": HostConfig(name="cockpit-lab", read_only=True)}), TARGET, live=False),
    ):
        app.session.use_unit(load_unit({UNIT: SEED}, UNIT, name="sglang-demo.service", catalog=catalog), catalog)
        async with app.run_test(size=(140, 50)) as pilot:
            for key in ("r", "x", "t", "b"):
                await pilot.press(key)
                assert not isinstance(app.screen, ConfirmModal), key
            assert not any(w.name == "load_run_worker" for w in app.workers)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert not {"Restart", "Stop", "Start", "Write flags", "Load run"} & set(titles)
            await pilot.press("e")
            flags = app.query_one(FlagsPane)
            flags.edited = flags.edited.set_flag("--speculative-num-steps", "3")
            assert flags.check_action("write", ()) is False
            app.post_message(FlagsPane.Write(flags.loaded, flags.edited, []))
            await pilot.pause()
            assert not [s for s in app.screen_stack if type(s).__name__ == "WriteModal"]
            app.query_one(AttemptsPane).show(
                [Attempt(1, "cockpit-lab", "sglang-demo.service", 0.0, {}, {}, {UNIT: SEED}, {UNIT: SEED})]
            )
            assert app.query_one(AttemptsPane).check_action("rollback", ()) is False
            app.on_attempts_pane_rollback(AttemptsPane.Rollback(app.query_one(AttemptsPane).attempts[0]))
            await pilot.pause()
            assert len(app.screen_stack) == 1


def _status():
    [status] = parse_show((DATA / "show-sglang-demo.txt").read_text(), "cockpit-lab")
    from dataclasses import replace

    return replace(status, ready=True, checked_at=status.active_enter + 291)


def _show_source(app: CockpitApp, sglang_root) -> None:
    from cockpit.sglang.explain.explain import explain
    from cockpit.ui.panes.source import Shown, SourcePane, highlight

    hook = "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"
    text = (sglang_root("0.5.23") / "sglang/srt/arg_groups/speculative_hook.py").read_text()
    result = explain(text, hook, 1162, exception="AssertionError", catalog=app.session.deployment.catalog)
    pane = app.query_one(SourcePane)
    app.show_detail("source")
    pane.set_title(f"{hook}:1162 · frame 10 of 10 · _handle_eagle_family")
    pane.view.show(
        Shown("cockpit-lab", hook, 0.0, 1162, result.start_line, result.end_line),
        text,
        highlight(text, "monokai" if app.current_theme.dark else "friendly"),
    )
    pane.set_message("AssertionError\n" + result.sentence())
    pane.view.focus()


SCREENS = [
    "main",
    "unfolded",
    "source",
    "flags",
    "write",
    "attempts",
    "throughput",
    "help",
    "confirm",
    "picker",
    "startup",
    "stacks",
]


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("screen", SCREENS)
def test_every_screen_in_each_theme(snap_compare, sglang_root, monkeypatch, theme: str, screen: str) -> None:
    # The picker shows the open unit's known status; its probe of the real host is kept out of
    # the picture, which would otherwise show whatever state the lab is in (or not).
    monkeypatch.setattr(PickerScreen, "refresh_states", lambda self: None)
    catalog = load_catalog(sglang_root("0.5.23"))
    app = CockpitApp(Config(ui=UIConfig(theme=theme)), TARGET, live=False)
    app.session.use_unit(load_unit({UNIT: SEED}, UNIT, name="sglang-demo.service", catalog=catalog), catalog)

    async def run_before(pilot) -> None:
        app.query_one(StatusPane).show_status(_status())
        if screen == "startup":  # a start that reached ready, then one whose TP3 died loading its weights
            app.session.deliver(parse_json_lines((DATA / "journal-startup.jsonl").read_text().splitlines()))
        else:
            app.query_one(JournalView).append_entries(
                [parse_json_line(line) for line in (DATA / "journal-crash8.jsonl").read_text().splitlines()]
            )
        if screen == "stacks":  # the lab's stand-in hung in a collective, as py-spy dumped it
            dumped = stacks.parse((DATA / "py-spy-dump-lab.txt").read_text())
            app.push_screen(StacksScreen(StackCapture(1_796_180_500.0, dumped), "sglang-faults.service"))
        await pilot.pause()
        keys = {
            "main": (),
            "unfolded": ("left_square_bracket", "enter"),
            "flags": ("e",),
            "attempts": ("h",),
            "throughput": ("m",),
            "help": ("question_mark",),
            "confirm": ("r",),
            "picker": ("o",),
            "source": (),
            "write": ("e",),
            "startup": ("p",),
            "stacks": ("j", "j", "j", "j", "enter"),
        }[screen]
        if keys:
            await pilot.press(*keys)
        if screen == "source":
            _show_source(app, sglang_root)
        if screen == "write":
            flags = app.query_one(FlagsPane)
            flags.edited = flags.edited.set_flag("--speculative-num-steps", "3")
            await pilot.press("w")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 44), run_before=run_before)


async def test_b_asks_before_it_sends_load_to_a_server() -> None:
    """`b` started a load run at once, on a production server as anywhere."""
    app = CockpitApp(Config(), TARGET, live=False)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("b")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ConfirmModal) and "Send a load run to sglang-demo.service on cockpit-lab?" in (
            modal.title_text
        )
        assert "concurrency 1, 2, 4, 8, 16, 32" in modal.body
        await pilot.press("n")
        await pilot.pause()
        assert len(app.screen_stack) == 1 and not any(w.name == "load_run_worker" for w in app.workers)
