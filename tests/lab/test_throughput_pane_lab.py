"""A load run started, cancelled and compared from the app against the lab."""

from __future__ import annotations

import asyncio
import json
import time

from cockpit.config import Config, HostConfig, LoadProfile, UnitConfig
from cockpit.load.store import load_runs
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.throughput import ThroughputPane
from cockpit.ui.screens.runs import RunPicker
from tests.conftest import LabHandle


def _stats(lab: LabHandle) -> dict:
    out = lab.ssh(
        "python3",
        "-c",
        "import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/standin/stats').read().decode())",
    ).stdout
    return json.loads(out)


async def test_a_run_from_the_pane_is_cancelled_cleanly_and_runs_compare(lab: LabHandle, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    config = Config(
        hosts={lab.name: HostConfig(name=lab.name)},
        units={"demo": UnitConfig(name="demo", host=lab.name, unit="sglang-demo.service", profile="tiny")},
        profiles={
            "tiny": LoadProfile(name="tiny", concurrency=(1, 4), requests=4, warmup=0, input_len=16, output_len=16)
        },
    )
    app = CockpitApp(config, Target(lab.name, "sglang-demo.service", profile="tiny"))
    async with app.run_test(size=(160, 50)) as pilot:
        pane = app.query_one(ThroughputPane)
        for _ in range(2):  # two complete runs
            await pilot.press("b", "y")  # the load run, confirmed
            deadline = time.monotonic() + 60
            while "done:" not in str(pane.query_one("#run-head").render()):
                assert time.monotonic() < deadline, str(pane.query_one("#run-head").render())
                await asyncio.sleep(0.2)
        assert len(load_runs(lab.name, "sglang-demo.service")) == 2
        aborted_before = _stats(lab)["aborted"]
        app.session.config = Config(
            hosts=config.hosts,
            units=config.units,
            profiles={
                "tiny": LoadProfile(name="tiny", concurrency=(8,), requests=64, warmup=0, input_len=16, output_len=400)
            },
        )
        await pilot.press("b", "y")  # the load run, confirmed
        await asyncio.sleep(3)
        assert _stats(lab)["running"] > 0
        await pilot.press("B")
        deadline = time.monotonic() + 10
        while _stats(lab)["running"] > 0:
            assert time.monotonic() < deadline, "requests are still running on the stand-in"
            await asyncio.sleep(0.2)
        assert _stats(lab)["aborted"] >= aborted_before + 8
        assert "cancelled" in str(pane.query_one("#run-head").render())
        pane.focus()
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, RunPicker)
        await pilot.press("enter", "down", "enter")
        await pilot.pause()
        assert pane.query_one("#compare-table").display
