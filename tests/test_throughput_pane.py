"""The throughput pane with recorded runs (plain decoding and EAGLE-3 on the stand-in), and a
load run started, cancelled and compared from the app against the lab."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from cockpit.config import Config, HostConfig, LoadProfile, UnitConfig
from cockpit.load.results import LevelResult, RequestResult
from cockpit.load.store import compare, load_runs
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.throughput import ThroughputPane
from cockpit.ui.screens.runs import RunPicker
from tests.conftest import ROOT, LabHandle

RUNS = ROOT / "tests" / "data" / "runs"


def run(name: str) -> dict:
    return json.loads((RUNS / f"{name}.json").read_text())


def test_comparison_ratios() -> None:
    rows = {r["concurrency"]: r for r in compare(run("plain"), run("eagle"))}
    assert set(rows) == {1, 2, 4, 8, 16, 32}
    assert rows[1]["per_stream_speedup"] == pytest.approx(66.0 / 40.0, rel=0.02)  # EAGLE-3: 1.65x per stream
    assert rows[32]["speedup"] == pytest.approx(1.0, rel=0.03)  # both at the server's 1200 tok/s capacity


def recorded_app() -> CockpitApp:
    return CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)


async def feed_run(pilot, record: dict) -> ThroughputPane:
    app = pilot.app
    app.action_throughput()
    pane = app.query_one(ThroughputPane)
    ticks = iter(k * 0.4 for k in range(10_000))
    pane.clock = lambda: next(ticks)  # the sparklines must not depend on how fast the test runs
    levels = [LevelResult(**lv) for lv in record["levels"]]
    pane.begin(tuple(lv.concurrency for lv in levels), 8, "recorded run")
    for lv in levels:
        for k in range(4):
            pane.request_done(
                lv.concurrency,
                RequestResult(
                    ok=True, ttft_s=0.025 + k * 0.001, e2e_s=1.6, output_tokens=64, chunk_gaps_s=[0.025] * 63
                ),
            )
        pane.level_done(lv)
    pane.end("done: recorded")
    await pilot.pause()
    return pane


async def test_levels_show_their_throughput_and_the_chart_has_the_points() -> None:
    app = recorded_app()
    async with app.run_test(size=(160, 50)) as pilot:
        pane = await feed_run(pilot, run("plain"))
        assert pane.level_rows[8].shown == "319 tok/s · 39.9/stream"
        assert [lv.concurrency for lv in pane.levels_done] == [1, 2, 4, 8, 16, 32]
        pane.show_comparison(run("plain"), run("eagle"))
        table = str(pane.query_one("#compare-table").render())
        assert "1.65" in table and "EAGLE3" in table


def test_snapshot_run_and_comparison(snap_compare) -> None:
    async def run_before(pilot) -> None:
        pane = await feed_run(pilot, run("plain"))
        pane.show_comparison(run("plain"), run("eagle"))
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(160, 50), run_before=run_before)


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
            await pilot.press("b")
            deadline = time.monotonic() + 60
            while "done:" not in str(pane.query_one("#run-head").render()):
                assert time.monotonic() < deadline, str(pane.query_one("#run-head").render())
                await asyncio.sleep(0.2)
        assert len(load_runs(lab.name, "sglang-demo.service")) == 2
        aborted_before = _stats(lab)["aborted"]
        app.config = Config(
            hosts=config.hosts,
            units=config.units,
            profiles={
                "tiny": LoadProfile(name="tiny", concurrency=(8,), requests=64, warmup=0, input_len=16, output_len=400)
            },
        )
        await pilot.press("b")
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
