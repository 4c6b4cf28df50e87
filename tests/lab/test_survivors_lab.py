"""After a stop, what is still in the unit's cgroup is named: a unit with KillMode=process whose
main process leaves a child behind (as a launcher script that backgrounds a worker does)."""

from __future__ import annotations

import asyncio
import re

from cockpit.config import Config
from cockpit.session import Session
from cockpit.targets import Target
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit
from tests.listeners import Notices

UNIT = "leaves-a-child.service"
TEXT = """[Unit]
Description=cockpit lab test: a launcher whose worker outlives it

[Service]
KillMode=process
ExecStart=/bin/sh -c 'sleep 600 & exec sleep 601'
"""


async def test_a_process_left_in_the_cgroup_after_a_stop_is_named(lab: LabHandle) -> None:
    listener = Notices()
    heard = listener.said

    lab.ssh("tee", f"/etc/systemd/system/{UNIT}", input=TEXT)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "start", UNIT)
    session = Session(Config(), Target(lab.name, UNIT))
    session.listener = listener
    session.start()
    try:
        await until(lambda: session.status is not None and session.status.active_state == "active", 30)
        child = lab.ssh("pgrep", "-x", "-f", "sleep 600").stdout.split()[0]
        lab.ssh("systemctl", "stop", UNIT)
        await until(lambda: any("still in leaves-a-child.service's cgroup" in h for h in heard), 30, heard)
        said = next(h for h in heard if "still in" in h)
        assert re.match(
            rf"1 process\(es\) still in {UNIT}'s cgroup after its start \w+ ended: PID {child} \(sleep\);", said
        )
        assert "KillMode=control-group ends them" in said
    finally:
        await session.close()
        lab.ssh("systemctl", "kill", "--signal=KILL", UNIT, check=False)
        lab.ssh("systemctl", "stop", UNIT, check=False)
        lab.ssh("rm", "-f", f"/etc/systemd/system/{UNIT}", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


async def test_a_restart_under_the_default_kill_mode_names_no_survivor(lab: LabHandle) -> None:
    """SGLang's stop under KillMode=control-group takes about 6 s, its processes ending all the
    while: the check 1.5 s after the start ended read them in the cgroup and named each restart's
    processes survivors. It waits for the stop to be done now."""
    listener = Notices()
    with standin_unit(lab, "sglang-restarted.service", 30115, restart=False) as unit:
        session = Session(Config(), Target(lab.name, unit))
        session.listener = listener
        session.start()
        try:
            await until(lambda: session.status is not None and session.status.readiness == "ready", 60)
            first = session.status.invocation_id
            await asyncio.to_thread(lab.ssh, "systemctl", "restart", unit, timeout=60)  # the poll goes on meanwhile
            await until(
                lambda: session.status.invocation_id != first and session.status.readiness == "ready",
                60,
                lambda: session.status,
            )
            await asyncio.sleep(3)  # the check's 1.5 s, and more
            said = [h for h in listener.said if "still in" in h or "still hold GPU memory" in h]
            assert said == [], said
        finally:
            await session.close()
