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


def _decode_lines(n: int) -> list:
    from cockpit.systemd.entry import parse_json_line

    return [
        parse_json_line(
            f'{{"MESSAGE":"[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 32, #token: {k}, token usage: 0.13, '
            f'cuda graph: True, gen throughput (token/s): {1000 + k}.00, #queue-req: 3","PRIORITY":"6","_PID":"142",'
            f'"__REALTIME_TIMESTAMP":"{1796032472855077 + k * 1_000_000}","__CURSOR":"c{k}"}}'  # a second apart
        )
        for k in range(n)
    ]


async def test_a_batch_of_decode_lines_is_drawn_once_and_a_hidden_pane_not_at_all() -> None:
    """Every value is kept; what is drawn is the batch's last, once, and only while the pane shows."""
    from textual.widgets import Sparkline

    from cockpit.ui.panes.throughput import SparkRow

    app = recorded_app()
    async with app.run_test(size=(150, 50)) as pilot:
        row = app.query_one("#row-passive", SparkRow)
        spark = row.query_one(Sparkline)
        draws = []
        original = row._draw
        row._draw = lambda: (draws.append(bool(row.region.area)), original())[1]  # type: ignore[method-assign]
        app.session.deliver(_decode_lines(500))  # the pane is hidden: nothing is drawn
        await pilot.pause()
        assert len(row.values) == 240 and row.values[-1] == 1499.0  # the row's window, filled
        assert draws == [False] and list(spark.data or []) == []
        app.action_throughput()  # shown: drawn once, with everything kept meanwhile
        for _ in range(50):
            await pilot.pause(0.02)
            if spark.data:
                break
        assert list(spark.data or []) == list(row.values)
        assert "1,499 tok/s" in str(row.query(".spark-value").last().render())
        before = len(draws)
        app.session.deliver(_decode_lines(300)[-100:])  # one more batch while shown: one draw
        await pilot.pause()
        assert len(draws) == before + 1 and draws[-1] is True


async def test_the_server_row_says_which_source_it_shows() -> None:
    from pathlib import Path

    from cockpit.load.passive import point_from_reading
    from cockpit.sglang.server.metrics import reading
    from cockpit.ui.panes.throughput import SparkRow

    now = reading((Path(__file__).parents[1] / "data" / "metrics-standin.txt").read_text(), 100.0)
    assert now is not None
    app = recorded_app()
    async with app.run_test(size=(150, 50)) as pilot:
        app.action_throughput()
        row = app.query_one("#row-passive", SparkRow)
        app.session.deliver(_decode_lines(3))
        await pilot.pause()
        assert str(row.query_one(".spark-name").render()) == "server (log)"
        app.throughput_pane.passive([point_from_reading(now, now.cache_hit_rate(None))])
        await pilot.pause()
        assert str(row.query_one(".spark-name").render()) == "server (/metrics)"
        assert str(row.query(".spark-value").last().render()).strip().endswith("tok/s")
        # its other figures whole, on their own line: in the row's value they were cut (`… accept`)
        words = str(app.query_one("#passive-words").render())
        assert "prefix cache hit 40%" in words and "…" not in words, words


async def test_a_run_is_not_compared_with_itself() -> None:
    """Compare accepted a run against itself (all deltas 0, a table that says nothing)."""
    from cockpit.load.store import SavedRun
    from cockpit.ui.screens.runs import RunPicker

    runs = [SavedRun("plain", {"levels": []}), SavedRun("eagle3", {"levels": []})]
    picked: list = []
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunPicker(runs), picked.append)
        await pilot.pause()
        await pilot.press("enter", "enter")  # the newest, twice
        await pilot.pause()
        assert picked == [] and isinstance(app.screen, RunPicker)
        assert "B must be another run" in str(app.screen.query_one("#runs-title").render())
        await pilot.press("down", "enter")
        await pilot.pause()
    assert picked == [(runs[1], runs[0])]


async def test_the_run_head_says_the_sweeps_time_left_by_its_levels() -> None:
    from cockpit.fmt import duration

    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(ThroughputPane)
        pane.begin((1, 4), 8, "profile tiny")
        await pilot.pause()
        head = pane.query_one("#run-head")
        assert "left" not in str(head.render())  # no request ended: nothing to go on
        pane.request_done(1, RequestResult(ok=True, ttft_s=0.1, e2e_s=2.0, output_tokens=16))
        await pilot.pause()
        assert f"about {duration((7 + 2) * 2.0)} left" in str(head.render())  # 7 more at 1, 2 rounds at 4


async def test_the_servers_figures_lay_the_screen_out_only_when_their_height_changes() -> None:
    """Each journal batch of a flood brings new figures; a Label's update laid the whole screen
    out for each (331 layouts in 10 s at 10k lines/s). Same height: repainted only."""
    from textual.widgets import Label

    from cockpit.load.passive import ThroughputPoint

    app = recorded_app()
    async with app.run_test(size=(150, 50)) as pilot:
        app.action_throughput()
        await pilot.pause()
        pane = app.throughput_pane
        label = app.query_one("#passive-words", Label)
        layouts: list[bool] = []
        real = label.refresh

        def counted(*regions, **kwargs):
            layouts.append(bool(kwargs.get("layout")))
            return real(*regions, **kwargs)

        label.refresh = counted  # type: ignore[method-assign]

        def point(running: int, hit: float | None = None) -> ThroughputPoint:
            return ThroughputPoint(0.0, 4000.0, running, None, "metrics", 3, 0.13, None, hit)

        pane.passive([point(32)])
        await pilot.pause()
        pane.passive([point(31)])
        await pilot.pause()
        assert str(label.render()) == "running 31 · queued 3 · KV 13%"
        pane.passive([point(31)])  # the same figures: nothing to draw
        await pilot.pause()
        assert layouts.count(False) >= 2 and True not in layouts, layouts
        width = label.content_size.width
        long = ThroughputPoint(0.0, 4000.0, 31, 2.71, "metrics", 3, 0.13, 0.68, 0.5)
        assert len(long.words()) > width + len("4,000 tok/s · ")  # two lines now
        pane.passive([long])
        await pilot.pause()
        assert True in layouts and label.size.height == 2, (layouts, label.size)
