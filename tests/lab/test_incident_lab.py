"""The incident note in the lab, after the stand-in's eight workers crashed: `cockpit snapshot`
and the live app's `write_incident`."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screenshot import write_incident
from tests.conftest import ROOT, LabHandle
from tests.ui.test_incident_screens import check_png
from tests.unit.test_incident import fences, journal_tracebacks, message_of, section

CRASH = (
    "import urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:30000/standin/crash', data=b'', method='POST'))"
)


@pytest.fixture(scope="module")
def crashed(lab: LabHandle) -> float:
    """The stand-in's eight workers crash; systemd restarts it and it gets ready again."""
    before = float(lab.ssh("date", "+%s.%N").stdout)
    lab.ssh("python3", "-c", CRASH)

    def ready_again() -> bool:
        out = lab.ssh("journalctl", "-u", "sglang-demo", f"--since=@{before:.6f}", "-o", "cat", check=False).stdout
        return "Main process exited" in out and "ready to roll" in out.split("Main process exited")[-1]

    lab.wait_for(ready_again, timeout=60, what="the stand-in to crash and get ready again")
    return before


def lab_period(lab: LabHandle) -> list[dict]:
    """The journal of the crashed invocation and the one after it, read with journalctl here."""
    out = lab.ssh("journalctl", "-u", "sglang-demo", "-o", "json", "--all", "--no-pager").stdout
    objects = [json.loads(line) for line in out.splitlines() if line.strip()]
    inv = [o.get("_SYSTEMD_INVOCATION_ID") for o in objects if "Scheduler hit an exception" in message_of(o)][-1]
    first = next(k for k, o in enumerate(objects) if inv in (o.get("_SYSTEMD_INVOCATION_ID"), o.get("INVOCATION_ID")))
    return objects[first:]


def _snapshot_argv() -> list[str]:
    from cockpit import cli

    if "snapshot" in cli.COMMANDS:
        return [sys.executable, "-m", "cockpit", "snapshot"]
    harness = (
        "import argparse, sys\n"
        "from cockpit.cli import snapshot as snapshot_cli\n"
        "p = argparse.ArgumentParser(); p.add_argument('--config'); s = p.add_subparsers(dest='command')\n"
        "snapshot_cli.add_parser(s)\n"
        "sys.exit(snapshot_cli.run(p.parse_args(['snapshot', *sys.argv[1:]])))\n"
    )
    return [sys.executable, "-c", harness]


def test_cockpit_snapshot_after_the_eight_workers_crashed(lab: LabHandle, crashed: float, tmp_path: Path) -> None:
    out = tmp_path / "incident"
    started = time.monotonic()
    proc = subprocess.run(
        [*_snapshot_argv(), "--host", lab.name, "--unit", "sglang-demo", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    elapsed = time.monotonic() - started
    report = json.loads(proc.stdout)
    assert report["tracebacks"] == 8 and report["problems"] == [], report
    assert sorted(p.name for p in out.iterdir()) == [
        "incident.md",
        "journal.png",
        "journal.svg",
        "journal.txt",
        "source.png",
        "source.svg",
        "source.txt",
    ]
    for name in ("journal", "source"):
        check_png(out, name)
    journal_text = (out / "journal.txt").read_text()
    counted = re.search(r"tracebacks \((\d+)[,)]", journal_text)  # "(14)" or "(14, 8 kinds)"
    assert counted is not None and int(counted.group(1)) >= 8, journal_text  # more if the lab crashed before
    assert '  File "/opt/cockpit/cockpit/lab/standin/worker.py", line 36, in _launch_kernel' in journal_text
    assert "raise StandinCudaError(" in (out / "source.txt").read_text()

    note = (out / "incident.md").read_text()
    expected = journal_tracebacks(lab_period(lab))
    assert len(expected) == 8
    assert fences(section(note, "Tracebacks")) == ["\n".join(lines) + "\n" for lines in expected]
    assert f"- Host: `{lab.name}`" in note and "- Unit: `sglang-demo.service`" in note
    assert "- SGLang: 0.5.23 (from /server_info) · cockpit lab stand-in" in note
    [command] = fences(note, "sh")
    assert command.startswith("/opt/sglang/venv/bin/python -m cockpit.lab.standin \\\n    --model-path ")
    assert "\n    --tp-size 8 \\\n" in command
    source = section(note, "The failing statement")
    assert re.search(r"^> 36  +raise StandinCudaError\($", fences(source)[0], re.M)
    assert "The failing statement: `raise StandinCudaError(" in source
    assert "![The journal at the last traceback" in note and "(journal.png)" in note and "(source.png)" in note
    assert "status=9/KILL" in section(note, "Timeline")
    gpus = section(note, "GPUs")  # the lab's nvidia-smi stand-in: eight H200s
    assert len(re.findall(r"^- GPU [0-7]: \d+ / 143771 MiB", gpus, re.M)) == 8, gpus
    print(f"snapshot took {elapsed:.1f} s")


async def test_write_incident_in_the_live_app_reads_the_host(lab: LabHandle, crashed: float, tmp_path: Path) -> None:
    """What the app's key calls: the screen as it is, the note read over the app's connection,
    here for the period since just before the crash."""
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    async with app.run_test(headless=True, size=(160, 50)):
        deadline = time.monotonic() + 30
        while app.query_one(StatusPane).status is None or len(app.query_one(JournalView).model.tracebacks()) < 8:
            assert time.monotonic() < deadline, "the crash never reached the app"
            await asyncio.sleep(0.2)
        folder = await write_incident(app, app.session, tmp_path, since=f"@{crashed - 1:.0f}")
    assert folder.parent == tmp_path / lab.name / "sglang-demo.service"
    check_png(folder, "screen")
    note = (folder / "incident.md").read_text()
    assert f"Period: since @{crashed - 1:.0f}" in note
    expected = journal_tracebacks(lab_period(lab))
    assert fences(section(note, "Tracebacks")) == ["\n".join(lines) + "\n" for lines in expected]
    assert "## What this note could not include" not in note
