"""The picker over several hosts: four labs, every unit's state, updated live."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.config import Config, HostConfig
from cockpit.lab.lab import Lab
from cockpit.systemd.status import UnitStatus
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.picker import PickerScreen
from tests.conftest import TEST_LAB, LabHandle


@pytest.fixture(scope="module")
def four_labs(lab: LabHandle):
    extra = [Lab(f"{TEST_LAB}-p{k}") for k in range(1, 4)]
    for other in extra:
        other.up(progress=lambda m: None)
    yield [lab.name] + [other.name for other in extra]
    for other in extra:
        other.down()


async def test_picker_shows_every_unit_of_four_hosts_live(four_labs: list[str]) -> None:
    config = Config(hosts={name: HostConfig(name=name) for name in four_labs})
    app = CockpitApp(config, None, live=False)
    async with app.run_test(size=(140, 40)) as pilot:
        app.action_pick()
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, PickerScreen)

        def states() -> dict[str, str]:
            return {
                h: s.active_state
                for (h, u), s in picker.states.items()
                if u == "sglang-demo.service" and isinstance(s, UnitStatus)
            }

        deadline = time.monotonic() + 60
        while set(states()) != set(four_labs) or set(states().values()) != {"active"}:
            if time.monotonic() > deadline:
                bad = [h for h, s in states().items() if s != "active"]
                logs = {
                    h: (
                        await app.session.pool.get(h).run(["journalctl", "-u", "sglang-demo", "-n", "15", "-o", "cat"])
                    ).text
                    for h in bad
                }
                raise AssertionError(f"{states()}\n{logs}")
            await asyncio.sleep(0.3)
        stopped = four_labs[2]
        host = app.session.pool.get(stopped)
        deadline = time.monotonic() + 30
        while "ready to roll" not in (await host.run(["journalctl", "-u", "sglang-demo", "-o", "cat"])).text:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.3)
        await host.run(["systemctl", "stop", "sglang-demo"])
        try:
            deadline = time.monotonic() + 10
            # The picker refreshes on its own. The stand-in stops as 0.5.23 does under the default
            # KillMode (the demo unit's): its ranks die of SIGTERM and it ends `failed`, 9/KILL.
            while states().get(stopped) not in ("inactive", "failed"):
                if time.monotonic() > deadline:
                    log = (await host.run(["journalctl", "-u", "sglang-demo", "-n", "12", "-o", "cat"])).text
                    raise AssertionError(f"{states()}\n{log}")
                await asyncio.sleep(0.2)
            assert all(states()[h] == "active" for h in four_labs if h != stopped)
        finally:
            await host.run(["systemctl", "start", "sglang-demo"])
        assert len({id(app.session.pool.get(h)) for h in four_labs}) == 4  # one connection per host
