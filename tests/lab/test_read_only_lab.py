"""Read-only holds on every path: each subcommand and each app key that would change a host, run
against a launch over two labs whose hosts are read-only (by `--read-only`; by `read_only = true`
through sudo; on node 1 alone), and both labs counted for changes after: no unit file written or
added beside it, no systemd job or reload, no request sent to the server, no sudo command: none."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cockpit.config import load
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmModal
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit
from tests.lab.test_multinode_standin_lab import journal, launch
from tests.unit.test_preflight import COCKPIT

NODES = ("sglang-ro-node0.service", "sglang-ro-node1.service")
PORT = 30150
DIR = "/etc/systemd/system"
SMALL_RUN = ("--concurrency", "1", "--requests", "2", "--warmup", "0", "--input-len", "8", "--output-len", "4")


@dataclass
class Ledger:
    """What one lab changed since the ledger was opened, from the lab's own records: its journal
    (systemd's jobs and reloads, sudo's commands, the server's requests) and its unit directory."""

    lab: LabHandle
    unit: str
    cursor: str
    files: str

    @classmethod
    def open(cls, lab: LabHandle, unit: str) -> Ledger:
        last = json.loads(lab.ssh("journalctl", "-n", "1", "-o", "json").stdout)
        return cls(lab, unit, last["__CURSOR"], cls._files(lab, unit))

    @staticmethod
    def _files(lab: LabHandle, unit: str) -> str:
        """Every name in the unit directory, and the unit's own bytes (a backup, a temp file, a lock,
        a rewrite all show)."""
        return lab.ssh("sh", "-c", f"ls -A {DIR} && sha256sum {DIR}/{unit}").stdout

    def changes(self) -> list[str]:
        out = self.lab.ssh(
            "journalctl",
            f"--after-cursor={self.cursor}",
            "-o",
            "json",
            "--output-fields=MESSAGE,SYSLOG_IDENTIFIER,_PID,_SYSTEMD_UNIT",
        ).stdout
        seen = []
        for line in out.splitlines():
            entry = json.loads(line)
            message = entry.get("MESSAGE")
            if not isinstance(message, str):
                continue
            if entry.get("SYSLOG_IDENTIFIER") == "sudo" and "COMMAND=" in message:
                seen.append(f"sudo: {message}")
            elif entry.get("_PID") == "1" and (self.unit in message or message.startswith("Reload")):
                seen.append(f"systemd: {message}")
            elif entry.get("_SYSTEMD_UNIT") == self.unit and '"POST /v1/' in message:
                seen.append(f"load: {message}")
        if self._files(self.lab, self.unit) != self.files:
            seen.append(f"files: {self._files(self.lab, self.unit)}")
        return seen


@pytest.fixture(scope="module")
def launched(lab: LabHandle, node1: LabHandle) -> Iterator[None]:
    """Node 0 in the test lab and node 1 in the second, running and ready."""
    with (
        standin_unit(lab, NODES[0], PORT, flags=launch(lab, 0), restart=False),
        standin_unit(node1, NODES[1], PORT, flags=launch(lab, 1), restart=False),
    ):
        lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 90, "node 0's ready line")
        yield


def config(path: Path, hosts: tuple[str, str], settings: tuple[str, str]) -> Path:
    """[deployments.ro]: node 0 on hosts[0], node 1 on hosts[1], each host with its settings."""
    text = "".join(f'[hosts."{h}"]\n{s}\n' for h, s in zip(hosts, settings, strict=True))
    text += "".join(
        f'[units.ro-node{rank}]\nhost = "{h}"\nunit = "{unit}"\n'
        for rank, (h, unit) in enumerate(zip(hosts, NODES, strict=True))
    )
    path.write_text(text + '[deployments.ro]\nnodes = ["ro-node0", "ro-node1"]\n')
    return path


def cockpit(cfg: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COCKPIT, "--config", str(cfg), *words], capture_output=True, text=True, timeout=240)


def refused(out: subprocess.CompletedProcess[str], *said: str) -> None:
    """Exit 2 and one sentence that says the host is read-only here."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("cockpit: "), out.stdout + out.stderr
    assert "read-only here" in lines[0] and all(s in lines[0] for s in said), lines[0]


async def _press_every_changing_key(cfg: Path, read_only: bool) -> list[str]:
    """r, x, t, b, the flag editor's w and s, each question answered yes but py-spy's (no): the
    titles of the questions the app asked."""
    app = CockpitApp(load(cfg), None, group="ro", read_only=read_only)
    asked: list[str] = []
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: app.session.unit is not None and app.session.status is not None, 60, "node 0 read")
        for key in ("r", "x", "t", "b", "e", "w", "escape", "escape"):
            await pilot.press(key)
            if isinstance(app.screen, ConfirmModal):
                asked.append(app.screen.title_text)
                await pilot.press("y")
        await pilot.press("s")
        stacks = [w for w in app.workers if w.group == "stacks"]
        await until(lambda: isinstance(app.screen, ConfirmModal) or all(w.is_finished for w in stacks), 30)
        if isinstance(app.screen, ConfirmModal):
            asked.append(app.screen.title_text)
            await pilot.press("n")
        await asyncio.sleep(3)  # what a key set going has had its time to reach a host
    return asked


async def test_read_only_by_the_flag(lab: LabHandle, node1: LabHandle, launched: None, tmp_path: Path) -> None:
    cfg = config(tmp_path / "cockpit.toml", (lab.name, node1.name), ("", ""))
    ledgers = [Ledger.open(lab, NODES[0]), Ledger.open(node1, NODES[1])]
    refused(cockpit(cfg, "--read-only", "deployment", "set", "ro", "--flag", "mem-fraction-static=0.8", "--restart"))
    refused(cockpit(cfg, "--read-only", "deployment", "restart", "ro"))
    refused(cockpit(cfg, "--read-only", "bench", "--deployment", "ro", *SMALL_RUN), "no load was sent")
    refused(cockpit(cfg, "--read-only", "bench", "--host", lab.name, "--unit", NODES[0], *SMALL_RUN))
    assert await _press_every_changing_key(cfg, read_only=True) == []
    assert [ledger.changes() for ledger in ledgers] == [[], []]


async def test_read_only_in_the_config_through_sudo(
    lab: LabHandle, node1: LabHandle, launched: None, tmp_path: Path
) -> None:
    """The operator accounts, whose every change would be a sudo command the lab's journal keeps;
    py-spy through sudo is root's ptrace: refused headless with the flag that allows it, asked
    in the app."""
    operators = (f"{lab.name}-operator", f"{node1.name}-operator")
    cfg = config(tmp_path / "cockpit.toml", operators, ("sudo = true\nread_only = true",) * 2)
    ledgers = [Ledger.open(lab, NODES[0]), Ledger.open(node1, NODES[1])]
    refused(cockpit(cfg, "deployment", "set", "ro", "--flag", "mem-fraction-static=0.8", "--restart"))
    refused(cockpit(cfg, "deployment", "restart", "ro"))
    refused(cockpit(cfg, "bench", "--deployment", "ro", *SMALL_RUN), "no load was sent")
    refused(cockpit(cfg, "stacks", "--deployment", "ro"), "py-spy would run there as root", "--root-ptrace")
    asked = await _press_every_changing_key(cfg, read_only=False)
    assert asked == [f"py-spy as root on {operators[0]}?"]
    assert [ledger.changes() for ledger in ledgers] == [[], []]


async def test_one_read_only_node_holds_the_group(
    lab: LabHandle, node1: LabHandle, launched: None, tmp_path: Path
) -> None:
    """Node 1's host alone read-only: a change to the group changes every node, so node 0 (which
    may be changed) is neither written nor stopped alone."""
    cfg = config(tmp_path / "cockpit.toml", (lab.name, node1.name), ("", "read_only = true"))
    ledgers = [Ledger.open(lab, NODES[0]), Ledger.open(node1, NODES[1])]
    refused(cockpit(cfg, "deployment", "set", "ro", "--flag", "mem-fraction-static=0.8", "--restart"), node1.name)
    refused(cockpit(cfg, "deployment", "restart", "ro"), node1.name)
    assert await _press_every_changing_key(cfg, read_only=False) == []
    assert [ledger.changes() for ledger in ledgers] == [[], []]
