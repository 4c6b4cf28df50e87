"""The throughput pane with recorded runs (plain decoding and EAGLE-3 on the stand-in); a load run
started, cancelled and compared from the app against the lab: tests/lab/test_throughput_pane_lab.py."""

from __future__ import annotations

from cockpit.config import Config
from cockpit.load.results import LevelResult, RequestResult
from cockpit.load.store import comparison
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.throughput import ThroughputPane
from tests.unit.test_run_compare import run


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
        pane.show_comparison(comparison(run("plain"), run("eagle")))
        table = str(pane.query_one("#compare-table").render())
        assert "1.65" in table and "EAGLE3" in table


def test_snapshot_run_and_comparison(snap_compare) -> None:
    async def run_before(pilot) -> None:
        pane = await feed_run(pilot, run("plain"))
        pane.show_comparison(comparison(run("plain"), run("eagle")))
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(160, 50), run_before=run_before)
