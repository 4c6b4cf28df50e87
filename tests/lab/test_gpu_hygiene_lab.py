"""GPU hygiene against the lab, through the real cockpit: a process started outside the unit
that holds memory on its GPUs (the nvidia-smi stand-in reports it) is named by PID in
`cockpit preflight --json`, in `cockpit status --json`, and in the write modal, which ends it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.write import WriteModal
from tests.conftest import LabHandle

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
UNIT = "sglang-demo.service"


@pytest.fixture
def holder(lab: LabHandle) -> Iterator[int]:
    """`sleep 600` in a transient unit of its own, holding 70000 MiB on each of the 8 GPUs."""
    name = "cockpit-test-holder"
    lab.ssh("systemd-run", f"--unit={name}", "-E", "COCKPIT_STANDIN_GPU_MIB=70000", "sleep", "600")
    pid = int(lab.ssh("systemctl", "show", "-p", "MainPID", "--value", f"{name}.service").stdout)
    assert pid > 0
    yield pid
    lab.ssh("systemctl", "stop", f"{name}.service", check=False)
    lab.ssh("systemctl", "reset-failed", f"{name}.service", check=False)


def _cockpit(lab: LabHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COCKPIT, *args, "--host", lab.name, "--unit", UNIT, "--json"], capture_output=True, text=True, timeout=120
    )


def test_preflight_and_status_name_the_holder_by_pid(lab: LabHandle, holder: int) -> None:
    pre = _cockpit(lab, "preflight")
    findings = json.loads(pre.stdout)
    held = [f for f in findings if f["rule"] == "gpu-held-by-other"]
    assert [(f["pid"], f["severity"]) for f in held] == [(holder, "error")], findings
    assert "70000 MiB on each of GPUs 0,1,2,3,4,5,6,7" in held[0]["message"]
    assert "owner: unit cockpit-test-holder.service" in held[0]["message"]
    status = json.loads(_cockpit(lab, "status").stdout)
    assert len(status["gpus"]) == 8 and status["gpus_note"] is None
    for gpu in status["gpus"]:
        procs = {p["pid"]: p for p in gpu["processes"]}
        assert procs[holder]["outside"] and procs[holder]["unit"] == "cockpit-test-holder.service"
        ours = [p for p in procs.values() if p["unit"] == UNIT]
        assert len(ours) == 1 and not ours[0]["outside"]  # the rank of this GPU, the unit's own
        assert gpu["used_mib"] == sum(p["used_mib"] for p in procs.values())


async def test_the_write_modal_names_the_holder_and_ends_it(lab: LabHandle, holder: int) -> None:
    target = Target(lab.name, UNIT)
    app = CockpitApp(Config(), target)
    async with app.run_test(size=(140, 48)) as pilot:
        deadline = time.monotonic() + 30
        while app.session.unit is None or app.session.status is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        loaded = app.session.unit
        app.open_write(target, loaded, loaded.set_flag("--log-level", "info"), [])

        async def modal() -> WriteModal:
            end = time.monotonic() + 30
            while not isinstance(app.screen, WriteModal):
                assert time.monotonic() < end, app.screen
                await asyncio.sleep(0.1)
            await pilot.pause()
            return app.screen

        first = await modal()
        assert first.holders == [holder]
        assert any(f"PID {holder}" in f.message and f.severity == "error" for f in first.findings)
        await pilot.press("k")
        end = time.monotonic() + 10
        while not isinstance(app.screen, ConfirmModal):
            assert time.monotonic() < end
            await asyncio.sleep(0.1)
        await pilot.press("y")
        again = await modal()
        end = time.monotonic() + 30
        while again is first:
            assert time.monotonic() < end
            again = await modal()
        assert again.holders == [] and not [f for f in again.findings if f.rule == "gpu-held-by-other"]
        gone = lab.ssh("test", "-e", f"/proc/{holder}", check=False)
        assert gone.returncode == 1  # the process is gone from the host
        await pilot.press("n")  # nothing is written
