"""On opening, the journal shows the end of the backlog and follows, even on a unit that prints
nothing more (it used to sit at the top of the backlog until the next line arrived)."""

from __future__ import annotations

import asyncio
import time

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from tests.conftest import LabHandle

QUIET = """[Unit]
Description=prints 300 lines, then nothing
[Service]
ExecStart=/usr/bin/python3 -u -c "import time\\nfor i in range(300):\\n    print(f'line {i}')\\ntime.sleep(3600)"
"""


async def test_the_journal_opens_at_the_tail_following(lab: LabHandle) -> None:
    lab.ssh("tee", "/etc/systemd/system/quiet.service", input=QUIET)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "restart", "quiet.service")
    lab.wait_for_line("quiet", "line 299")
    try:
        app = CockpitApp(Config(), Target(lab.name, "quiet.service"), read_only=True)
        async with app.run_test(size=(130, 30)):
            view = app.journal_view
            deadline = time.monotonic() + 20
            while not view.model.rows:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)  # nothing new arrives from this unit
            assert view.follow and view.scroll_y == view.max_scroll_y > 0
            last = view.model.text(len(view.model.rows) - 1)
            assert "line 299" in last or "Started" in last
            assert "following" in view.title_text()
    finally:
        lab.ssh("systemctl", "stop", "quiet.service", check=False)
        lab.ssh("rm", "-f", "/etc/systemd/system/quiet.service", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)
