"""A restart loop reads as one thing: the same traceback at every start is one row of the side
list with its count and since when, and the status pane names the loop and the key that stops it."""

from __future__ import annotations

import json
import re
import time

import msgspec

from cockpit.config import Config
from cockpit.systemd.entry import parse_json_line
from cockpit.systemd.gpu_use import Gpu, GpuUse
from cockpit.targets import Target
from cockpit.traceback.groups import crash_loop, group
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.panes.tracebacks import TracebackList
from tests.conftest import ROOT

ONE_START = (ROOT / "tests" / "data" / "journal-eagle.jsonl").read_text().splitlines()


def restart_loop(starts: int, every_s: float = 6.0, end: float | None = None) -> list:
    """The recorded seed-incident start, as if it happened `starts` times, the last just now."""
    end = time.time() if end is None else end
    entries = []
    for k in range(starts):
        shift = int((end - (starts - 1 - k) * every_s) * 1e6) - 1796033591445384
        for n, line in enumerate(ONE_START):
            fields = json.loads(line)
            fields["__REALTIME_TIMESTAMP"] = str(int(fields["__REALTIME_TIMESTAMP"]) + shift)
            fields["__CURSOR"] = f"loop-{k}-{n}"
            if fields.get("_PID") not in (None, "1"):
                fields["_PID"] = str(int(fields["_PID"]) + 100 * k)
            if "_SYSTEMD_INVOCATION_ID" in fields:
                fields["_SYSTEMD_INVOCATION_ID"] = f"{k:032x}"
            entries.append(parse_json_line(msgspec.json.encode(fields)))
    return entries


def test_one_failure_at_every_start_is_one_group_and_a_loop() -> None:
    from cockpit.traceback.fold import fold_entries
    from cockpit.traceback.model import Traceback

    records = fold_entries(restart_loop(5))
    tracebacks = [(i, r) for i, r in reversed(list(enumerate(records))) if isinstance(r, Traceback)]
    [only] = group(tracebacks)
    assert only.count == 5 and only.starts == 5 and only.newest is tracebacks[0][1]
    assert "×5" in only.summary() and "restart loop: 5 starts since" in only.summary()
    assert crash_loop([only]) is only
    assert crash_loop(group(tracebacks[:2])) is None  # two starts are not a loop yet
    assert crash_loop([only], now=time.time() + 3600) is None  # an old loop is over


async def test_the_side_list_has_one_row_and_the_status_pane_names_the_loop() -> None:
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(150, 36)) as pilot:
        app.journal_view.append_entries(restart_loop(12))
        await pilot.pause()
        side = app.query_one(TracebackList)
        assert side.option_count == 1
        row = str(side.get_option_at_index(0).prompt)
        assert "AssertionError ×12" in row and "restart loop: 12 starts since" in row
        text = str(app.query_one(StatusPane).render())
        # The banner says when it was last true: the last crash, by the clock.
        assert re.search(
            r"crash loop: 12 starts in 1m06s, the last at \d\d:\d\d:\d\d, "
            r"the same failure \(AssertionError\) · x stops the unit",
            text,
        ), text


async def test_the_banner_goes_once_a_start_got_ready_and_never_hides_the_readiness_reason() -> None:
    """It never cleared once the unit was fixed and replaced the reason in every later state: a
    hang after the fix read `⟳ crash loop ...` instead of why it is hung."""
    from dataclasses import replace

    from tests.ui.test_app_shell import recorded_status

    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(150, 36)) as pilot:
        app.journal_view.append_entries(restart_loop(12))
        await pilot.pause()
        pane = app.query_one(StatusPane)
        crashing = recorded_status(
            active_state="activating",
            sub_state="auto-restart",
            readiness="down",
            readiness_reason="waiting to restart after exited 1",
            exec_main_start=time.time() - 3,
        )
        pane.show_status(crashing)
        pane.show_gpus(GpuUse([Gpu(i, f"GPU-{i}", 0, 143771) for i in range(8)]))
        await pilot.pause()
        text = str(pane.render())
        assert "down: waiting to restart after exited 1" in text and "⟳ crash loop: 12 starts" in text
        # on screen, not only in the text: state, PID, GPU, reason and banner, five rows (the pane
        # stopped at four, and with a GPU line the banner was never seen)
        assert len(text.splitlines()) == 5 and pane.content_region.height == 5
        fixed = time.time() + 1  # the fixed start begins after the last crash
        pane.show_status(
            replace(crashing, active_state="active", sub_state="running", readiness="ready", exec_main_start=fixed)
        )
        await pilot.pause()
        assert "crash loop" not in str(pane.render())
        pane.show_status(
            replace(
                crashing,
                active_state="active",
                sub_state="running",
                readiness="hung",
                readiness_reason="/health_generate did not answer in 10 s",
                exec_main_start=fixed,
            )
        )
        await pilot.pause()
        text = str(pane.render())
        assert "hung: /health_generate did not answer in 10 s" in text and "crash loop" not in text


async def test_the_banner_expires_with_its_window_without_a_new_traceback() -> None:
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    async with app.run_test(size=(150, 36)) as pilot:
        app.journal_view.append_entries(restart_loop(5, end=time.time() - 590))  # its last crash 590 s ago
        await pilot.pause()
        pane = app.query_one(StatusPane)
        assert "crash loop: 5 starts" in str(pane.render())
        pane.crash_loop = (pane.crash_loop[0], time.time() - 601)  # the same loop, 11 s later
        assert "crash loop" not in str(pane.render())
