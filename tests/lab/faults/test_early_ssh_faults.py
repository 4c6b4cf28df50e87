"""The early OpenSSH master (cockpit.remote.mux) when the host breaks: a frozen host costs the
same wait as before it existed and gets the same sentence, an unreachable one the asyncssh
sentence at once, and the app leaves a master that has not logged in after a second."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from cockpit.cli.target import early_reader
from cockpit.config import Config
from cockpit.lab.lab import Lab
from cockpit.lab.network import set_link
from cockpit.remote.base import CONNECT_TIMEOUT
from cockpit.session import Listener, Session
from cockpit.targets import Target
from tests.conftest import LabHandle
from tests.lab.faults.test_network_faults import freeze, thaw

COCKPIT = str(Path(sys.executable).with_name("cockpit"))


def _status(lab: LabHandle) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    out = subprocess.run(
        [COCKPIT, "status", "--host", lab.name, "--unit", "ticker"], capture_output=True, text=True, timeout=120
    )
    return out, time.monotonic() - started


def test_cockpit_status_of_a_frozen_host_waits_once_and_says_so(fault_lab: LabHandle) -> None:
    """The master waits as long as asyncssh would, then says what asyncssh would say, rather
    than handing the same silent host to asyncssh for as long again."""
    freeze(fault_lab)
    try:
        out, took = _status(fault_lab)
    finally:
        thaw(fault_lab)
    assert out.returncode == 2 and out.stderr.strip() == f"cockpit: {fault_lab.name} did not answer within 10 s"
    assert CONNECT_TIMEOUT <= took < 2 * CONNECT_TIMEOUT, took


def test_cockpit_status_of_an_unreachable_host_says_so_as_before(fault_lab: LabHandle) -> None:
    set_link(Lab(fault_lab.name).net(), up=False)
    try:
        out, _ = _status(fault_lab)
    finally:
        set_link(Lab(fault_lab.name).net(), up=True)
    assert out.returncode == 2
    assert out.stderr.strip() == f"cockpit: cannot reach {fault_lab.name} ({fault_lab.name}:22): no route to host"


async def test_the_app_gives_up_on_a_silent_early_master_after_a_second(fault_lab: LabHandle) -> None:
    """A master forked at launch that has not logged in a second after the session starts is
    dropped: the asyncssh connection starts then (and says what is wrong), not ten seconds on."""
    heard: list[tuple[float, str]] = []

    class Heard(Listener):
        def connection(self, state: str, detail: str | None) -> None:
            heard.append((time.monotonic(), state))

    target = Target(fault_lab.name, "ticker.service")
    freeze(fault_lab)
    try:
        session = Session(Config(), target, reader=early_reader(Config(), target))
        try:
            session.listener = Heard()
            started = time.monotonic()
            session.start()
            deadline = started + 30
            while not heard:
                assert time.monotonic() < deadline, "asyncssh never started"
                await asyncio.sleep(0.05)
            assert heard[0][1] == "connecting"
            assert heard[0][0] - started < CONNECT_TIMEOUT / 2, heard[0][0] - started  # about 1 s, not 10
            assert session.reader is None
        finally:
            thaw(fault_lab)
            await session.close()
    finally:
        thaw(fault_lab)
    left = await asyncio.to_thread(subprocess.run, ["pgrep", "-af", "cockpit-mux-"], capture_output=True, text=True)
    assert left.stdout.strip() == ""
