"""A SyntaxError's location is not a frame (Python's own traceback has none there), but it is the
failing line: the journal's cursor lands on it and Enter opens it in the source pane."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from cockpit.config import Config, HostConfig
from cockpit.systemd.entry import JournalEntry
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.source import SourcePane


async def test_enter_on_a_syntax_errors_location_opens_it(tmp_path: Path) -> None:
    plugin = tmp_path / "site-packages" / "grammar_backend.py"
    plugin.parent.mkdir()
    plugin.write_text("def ok():\n    x = (1,\n")
    crashed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", f"import runpy; runpy.run_path({str(plugin)!r})"],
        capture_output=True,
        text=True,
    )
    printed = crashed.stderr.splitlines()
    entries = [
        JournalEntry(line, cursor=f"c{k}", realtime_us=1796000000000000 + k, pid=42, priority=3)
        for k, line in enumerate(printed)
    ]
    app = CockpitApp(
        Config(hosts={"here": HostConfig(name="here", local=True)}), Target("here", "x.service"), live=False
    )
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.journal_view
        view.append_entries(entries)
        await pilot.pause()
        [(_, tb)] = view.model.tracebacks()
        assert tb.exception == "SyntaxError" and tb.location.file == str(plugin) and tb.location.line == 2
        assert all(f.function for f in tb.frames)
        view.focus()
        await pilot.press("left_square_bracket", "enter")  # unfold: the cursor on the failing line
        await pilot.pause()
        assert view.model.text(view.cursor).startswith(f'  File "{plugin}", line 2')
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        pane = app.query_one(SourcePane)
        assert pane.view.shown is not None and pane.view.shown.path == str(plugin) and pane.view.shown.line == 2
        assert "the error's location" in str(pane.border_title)
