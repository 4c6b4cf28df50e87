"""Hostile text from the host: a unit whose Description holds control bytes (the old status
framing split on one of them), and a forged traceback that names a secret file outside the
service's Python roots."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.config import Config, HostConfig
from cockpit.remote.source import OutsideRoots, SourceCache
from cockpit.remote.ssh import SSHHost
from cockpit.systemd.remote_unit import load_remote_unit, service_python
from cockpit.systemd.status import fetch
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.source import SourcePane
from tests.conftest import LAB_PYTHON, LabHandle

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
DIR = "/etc/systemd/system"
HOSTILE = "hostile.service"
FORGED = "forged.service"
SECRET = "DB_PASSWORD=hunter2-do-not-leak"
# A traceback anyone can print: it names a root-only file, with a harmless line of "code".
FORGER = (
    "import time\n"
    "print('Traceback (most recent call last):', flush=True)\n"
    "print('  File \"/root/secret.txt\", line 1, in <module>', flush=True)\n"
    "print('    x = 1', flush=True)\n"
    "print('ValueError: forged', flush=True)\n"
    "time.sleep(3600)\n"
)


@pytest.fixture
def hostile_unit(fault_lab: LabHandle) -> Iterator[str]:
    description = "SGLang \x1b[2Jtricky\x07 unit ends in a record separator\x1e"
    fault_lab.ssh(
        "tee",
        f"{DIR}/{HOSTILE}",
        input=f"[Unit]\nDescription={description}\n[Service]\nExecStart=/bin/sleep infinity\n",
    )
    fault_lab.ssh("systemctl", "daemon-reload")
    fault_lab.ssh("systemctl", "start", HOSTILE)
    yield description
    fault_lab.ssh("systemctl", "stop", HOSTILE, check=False)
    fault_lab.ssh("rm", "-f", f"{DIR}/{HOSTILE}", check=False)
    fault_lab.ssh("systemctl", "daemon-reload", check=False)


def test_a_control_byte_in_the_description_is_shown_not_a_crash(fault_lab: LabHandle, hostile_unit: str) -> None:
    fault_lab.wait_for_line("sglang-demo.service", "ready to roll", 60)  # the port's holder, up
    out = subprocess.run(
        [COCKPIT, "status", "--host", fault_lab.name, "--unit", HOSTILE, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stderr == "" and out.returncode == 1  # not ready: port 30000 is the lab's stand-in's, not its own
    data = json.loads(out.stdout)
    assert data["description"] == hostile_unit and data["active_state"] == "active"
    assert "of sglang-demo.service listens on 127.0.0.1:30000, not hostile.service" in data["readiness_reason"]


async def test_the_app_shows_the_status_of_a_unit_with_a_hostile_description(
    fault_lab: LabHandle, hostile_unit: str
) -> None:
    app = CockpitApp(Config(), Target(fault_lab.name, HOSTILE), read_only=True)
    async with app.run_test(size=(140, 30)):
        pane = app.status_pane
        deadline = time.monotonic() + 20
        while pane.status is None:
            assert time.monotonic() < deadline, str(pane.render())
            await asyncio.sleep(0.2)
        assert pane.status.active_state == "active" and pane.status.description == hostile_unit


@pytest.fixture
def forged_unit(fault_lab: LabHandle) -> Iterator[str]:
    fault_lab.ssh("sh", "-c", f"umask 077 && echo '{SECRET}' > /root/secret.txt")
    fault_lab.ssh("tee", "/usr/local/lib/forger.py", input=FORGER)
    fault_lab.ssh(
        "tee",
        f"{DIR}/{FORGED}",
        input="[Unit]\nDescription=prints a forged traceback\n[Service]\n"
        "ExecStart=/usr/bin/python3 -u /usr/local/lib/forger.py\n",
    )
    fault_lab.ssh("systemctl", "daemon-reload")
    fault_lab.ssh("systemctl", "restart", FORGED)
    fault_lab.wait_for_line(FORGED, "forged")
    yield "/root/secret.txt"
    fault_lab.ssh("systemctl", "stop", FORGED, check=False)
    fault_lab.ssh("rm", "-f", f"{DIR}/{FORGED}", "/root/secret.txt", check=False)
    fault_lab.ssh("systemctl", "daemon-reload", check=False)


async def test_a_file_outside_the_python_roots_is_not_read(fault_lab: LabHandle, forged_unit: str) -> None:
    host = SSHHost(HostConfig(name=fault_lab.name))
    try:
        unit = await load_remote_unit(host, await fetch(host, FORGED))
        facts = await service_python(host, "/usr/bin/python3", unit)
        assert any(d.endswith(f"/{LAB_PYTHON}") for d in facts.roots.dirs)  # the stdlib is a root
        with pytest.raises(OutsideRoots, match="outside the service's Python roots"):
            await SourceCache().get(host, forged_unit, roots=facts.roots)
        # A symlink inside the roots that leads to the secret is refused too.
        await host.run(["ln", "-sf", forged_unit, "/usr/lib/python3/dist-packages/evil.py"])
        with pytest.raises(OutsideRoots):
            await SourceCache().get(host, "/usr/lib/python3/dist-packages/evil.py", roots=facts.roots)
        # Asked for by name (the user pressed O), it is read.
        assert SECRET in (await SourceCache().get(host, forged_unit, roots=None)).text
        # A stdlib frame through Debian's /lib (a symlink to usr/lib) lies inside the roots: read.
        # And a name outside them that leads to the secret stays refused however it is spelled.
        assert (await host.run(["readlink", "/lib"])).text.strip() == "usr/lib"
        stdlib = await SourceCache().get(host, f"/lib/{LAB_PYTHON}/json/__init__.py", roots=facts.roots)
        assert "JSON (JavaScript Object Notation)" in stdlib.text
        with pytest.raises(OutsideRoots):
            await SourceCache().get(host, f"/lib/{LAB_PYTHON}/../../../{forged_unit}", roots=facts.roots)
    finally:
        await host.run(["rm", "-f", "/usr/lib/python3/dist-packages/evil.py"])
        await host.close()


def test_the_incident_note_quotes_nothing_from_outside_the_roots(
    fault_lab: LabHandle, forged_unit: str, tmp_path: Path
) -> None:
    out = subprocess.run(
        [COCKPIT, "snapshot", "--host", fault_lab.name, "--unit", FORGED, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    written = {
        p.name: p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix in (".md", ".txt", ".svg")
    }
    assert "incident.md" in written
    assert not [name for name, text in written.items() if "hunter2" in text]
    assert "outside the service's Python roots" in written["incident.md"]


async def test_the_source_pane_refuses_then_opens_on_request(fault_lab: LabHandle, forged_unit: str) -> None:
    app = CockpitApp(Config(), Target(fault_lab.name, FORGED), read_only=True)
    async with app.run_test(size=(140, 40)) as pilot:
        deadline = time.monotonic() + 30
        while app.session.unit is None or not app.journal_view.model.tracebacks():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        _, tb = app.journal_view.model.tracebacks()[0]  # the newest: each test restarted the unit
        await app.open_frame(tb, 0).wait()
        pane = app.query_one(SourcePane)
        message = str(pane.query_one("#explanation").render())
        assert pane.refused and "Press O to open it anyway" in message and "hunter2" not in message
        assert pane.view.lines == []
        pane.view.focus()
        await pilot.press("O")
        deadline = time.monotonic() + 10
        while not pane.view.lines:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert SECRET in pane.view.lines[0] and not pane.refused


async def test_a_deleted_unit_file_is_said_and_a_gone_unit_is_not_found(fault_lab: LabHandle) -> None:
    path = f"{DIR}/gone.service"
    fault_lab.ssh("tee", path, input="[Service]\nExecStart=/bin/sleep infinity\n")
    fault_lab.ssh("systemctl", "daemon-reload")
    fault_lab.ssh("systemctl", "start", "gone.service")
    app = CockpitApp(Config(), Target(fault_lab.name, "gone.service"), read_only=True)
    try:
        async with app.run_test(size=(160, 30)):
            pane = app.status_pane

            async def until(words: str) -> str:
                deadline = time.monotonic() + 10
                while words not in str(pane.render()):
                    assert time.monotonic() < deadline, str(pane.render())
                    await asyncio.sleep(0.2)
                return str(pane.render())

            await until("active (running)")
            await asyncio.to_thread(fault_lab.ssh, "rm", path)
            assert "active (running)" in await until(f"unit file {path} deleted: it still runs")
            await asyncio.to_thread(fault_lab.ssh, "systemctl", "daemon-reload")
            await asyncio.sleep(1.5)
            assert "deleted: it still runs" in await until("active (running)")
            await asyncio.to_thread(fault_lab.ssh, "systemctl", "stop", "gone.service")
            text = await until("unit not found")
            assert "active" not in text and "ready ✓" not in text
    finally:
        fault_lab.ssh("systemctl", "stop", "gone.service", check=False)
        fault_lab.ssh("rm", "-f", path, check=False)
        fault_lab.ssh("systemctl", "daemon-reload", check=False)
