"""The journal pane against the lab: paging back to the start of a real journal."""

from __future__ import annotations

import asyncio
import time

from cockpit.config import Config, HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.systemd import journal
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView


async def test_scrolling_to_the_top_pages_the_whole_history_in_the_lab(lab) -> None:
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    app.session.journal.backlog = 20  # a small window of the newest entries: the rest must come by paging
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        deadline = time.monotonic() + 20
        while len(view.model.records) < 20:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        view.focus()
        while not view.history_exhausted:
            assert time.monotonic() < deadline + 60, "paging never reached the start"
            await pilot.press("g")
            await asyncio.sleep(0.3)
        host = SSHHost(HostConfig(name=lab.name))
        everything = await journal.tail(host, "sglang-demo.service", 1_000_000)
        await host.close()
        assert view.model.oldest_cursor == everything[0].cursor
        assert "start of the journal" in view.title_text()
