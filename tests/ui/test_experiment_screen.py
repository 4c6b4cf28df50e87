"""The experiment screen (`E`, issue 30): a finished run as the lab recorded it (three variants:
skipped, crashed on start, measured), a file with a mistake said in one sentence, and a run whose
unit cannot be read failing on screen while the app goes on."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from textual.widgets import Input, Label, Static

from cockpit.config import Config
from cockpit.experiment.plan import parse_plan
from cockpit.experiment.run import ExperimentRun
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.experiment import ExperimentScreen
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "experiment"
TARGET = Target("cockpit-lab", "sglang-demo.service")


def recorded_app() -> CockpitApp:
    return CockpitApp(Config(), TARGET, live=False)


def finished(app: CockpitApp) -> ExperimentRun:
    """The run the lab test recorded (tests/lab/test_experiment_lab.py), as the session holds it."""
    plan = parse_plan((DATA / "three.toml").read_text(), Path("three.toml"))
    run = ExperimentRun(app.session, plan)
    run.record = json.loads((DATA / "three.json").read_text())
    run.lines = (DATA / "three-said.txt").read_text().splitlines()
    app.session.experiment = run
    return run


def screen_text(app: CockpitApp) -> str:
    screen = app.screen
    assert isinstance(screen, ExperimentScreen)
    console = Console(width=160, record=True)
    console.print(screen.query_one("#experiment-table", Static).content)
    return console.export_text() + "\n" + str(screen.query_one("#experiment-log", Label).render())


def test_snapshot_a_finished_experiment(snap_compare) -> None:
    async def run_before(pilot) -> None:
        finished(pilot.app)
        await pilot.press("E")
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "typo" in text and "skipped" in text and "crashed on start" in text
        assert "eight-running" in text and "c1" in text and "c4" in text and "✓" in text
        assert "winner: eight-running" in text
        assert pilot.app.screen.query_one(Input).display  # the run is over: another may be given

    assert snap_compare(recorded_app(), terminal_size=(160, 40), run_before=run_before)


async def test_a_file_with_a_mistake_is_one_sentence_and_nothing_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((DATA / "three.toml").read_text().replace("itl_p95_ms = 500", "itl_p95_ms = -1"))
    app = recorded_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("E")
        await pilot.pause()
        field = app.screen.query_one(Input)
        field.value = str(bad)
        await pilot.press("enter")
        await pilot.pause()
        said = str(app.screen.query_one("#experiment-log", Label).render())
        assert said.startswith(f"{bad}:") and "slo.itl_p95_ms: expected milliseconds > 0, got -1" in said
        assert not isinstance(app.screen, ConfirmModal) and app.session.experiment is None


async def test_a_run_that_fails_is_said_and_the_app_goes_on(tmp_path: Path) -> None:
    """The recorded session has no unit to read: the run fails at once, as a task of the session."""
    good = tmp_path / "three.toml"
    good.write_text((DATA / "three.toml").read_text())
    app = recorded_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("E")
        await pilot.pause()
        app.screen.query_one(Input).value = str(good)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "3 variants (typo, dies-loading, eight-running)" in app.screen.body
        await pilot.press("y")
        for _ in range(50):
            await pilot.pause(0.05)
            run = app.session.experiment
            if run is not None and run.task is not None and run.task.done():
                break
        assert isinstance(app.screen, ExperimentScreen) and app.is_running
        said = str(app.screen.query_one("#experiment-log", Label).render())
        assert "the experiment failed: " in said, said
