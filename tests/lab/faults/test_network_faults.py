"""Network faults against the real app: what the screen says while the host is gone, that it
recovers on its own, and that the journal it shows lost and duplicated nothing (counted against
`journalctl -o json` inside the lab).

Each attack runs the whole app (Pilot) on the fault lab's ticker unit (20 lines a second and a
/health that answers 200), samples the status pane and the journal's title every 0.2 s, and
adds a row to the table of the note (`fault_report`)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from cockpit.config import Config
from cockpit.lab.lab import Lab
from cockpit.lab.network import set_link
from cockpit.session.feeds import POLL_S
from cockpit.targets import Target
from cockpit.traceback.model import Line
from cockpit.ui.app import CockpitApp
from tests.conftest import LAB_RELEASE, LabHandle
from tests.lab.faults.conftest import TICKER, TICKER_PORT, FaultRow, journal_cursors, lost_and_duplicated

# The pane turns stale two poll intervals after the last status it got, and is redrawn every
# quarter second; a loaded CI machine may add half a second to that.
STALE_WITHIN_S = 2 * POLL_S + 1.0


@dataclass
class Sample:
    at: float  # seconds since the attack
    status: str
    title: str

    @property
    def troubled(self) -> bool:
        """The screen admits that what it shows is not live."""
        return (
            "✗" in self.status
            or self.status.startswith("○")
            or not self.title.endswith("following")
            or "not following" in self.title
        )


def _ss(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=30)


def client_reset(lab: LabHandle) -> None:
    _ss("ss", "-K", "dst", Lab(lab.name).info().address, "dport", "=", "22")


def server_reset(lab: LabHandle) -> None:
    _ss("ip", "netns", "exec", Lab(lab.name).net().netns, "ss", "-K", "sport", "=", "22")


def sshd_restart(lab: LabHandle) -> None:
    lab.ssh(
        "systemd-run",
        "--on-active=1",
        "--timer-property=AccuracySec=10ms",
        f"--unit=sshd-bounce-{time.monotonic_ns()}",
        "sh",
        "-c",
        # OpenSSH 9.8 and later serve each session from an `sshd-session` process
        "systemctl stop ssh; pkill -KILL -x sshd; pkill -KILL -x sshd-session; sleep 1; systemctl start ssh",
    )


def _freezer(lab: LabHandle) -> str:
    return f"/sys/fs/cgroup/unified/cockpit-lab-{lab.name}/cgroup.freeze"


def freeze(lab: LabHandle) -> None:
    with open(_freezer(lab), "w") as f:
        f.write("1\n")


def thaw(lab: LabHandle) -> None:
    with open(_freezer(lab), "w") as f:
        f.write("0\n")


def link_down(lab: LabHandle) -> None:
    set_link(Lab(lab.name).net(), up=False)


def link_up(lab: LabHandle) -> None:
    set_link(Lab(lab.name).net(), up=True)


def lab_down(lab: LabHandle) -> None:
    Lab(lab.name).down(keep_state=True)  # a reboot keeps the host key and the units


def lab_up(lab: LabHandle) -> None:
    Lab(lab.name).up(progress=lambda m: None, release=LAB_RELEASE)


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.1)
    return time.monotonic() - start


def _live(app: CockpitApp) -> bool:
    pane, view = app.status_pane, app.journal_view
    return (
        pane.status is not None and pane.status.ready is True and pane.trouble() is None and view.feed_trouble is None
    )


def _delivered(app: CockpitApp) -> list[str]:
    return [r.entry.cursor for r in app.journal_view.model.records if isinstance(r, Line) and r.entry.cursor]


async def run_attack(
    lab: LabHandle,
    name: str,
    attack: Callable[[LabHandle], None],
    restore: Callable[[LabHandle], None] | None,
    hold_s: float,
) -> tuple[FaultRow, list[Sample], float]:
    """Attack while the app follows the ticker, hold, restore, wait for live data, count lines;
    returns the row, the screen samples and when the restore began (seconds after the attack)."""
    app = CockpitApp(Config(), Target(lab.name, TICKER, url=f"http://127.0.0.1:{TICKER_PORT}"), read_only=True)
    samples: list[Sample] = []
    async with app.run_test(size=(150, 30)):
        await _until(lambda: _live(app) and len(_delivered(app)) > 20, 30, "live data before the attack")
        # The old boot's truth, for the reboot: its journal lives in /run and dies with it, so it
        # is read now and the attack waits until the app has all of it.
        before = await asyncio.to_thread(journal_cursors, lab, TICKER)
        await _until(lambda: before[-1] in set(_delivered(app)), 10, "the app to catch up before the attack")
        t0 = time.monotonic()
        sampling = True

        async def sample() -> None:
            while sampling:
                samples.append(
                    Sample(time.monotonic() - t0, str(app.status_pane.render()), app.journal_view.title_text())
                )
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        await asyncio.to_thread(attack, lab)
        await asyncio.sleep(hold_s)
        restore_at = time.monotonic() - t0
        if restore is not None:
            await asyncio.to_thread(restore, lab)
        recovered = await _until(lambda: _live(app), 60, f"live data after {name}")
        await asyncio.sleep(3 * POLL_S)  # let the follower catch up with what was written meanwhile
        sampling = False
        await sampler
        delivered = _delivered(app)
        truth = await asyncio.to_thread(journal_cursors, lab, TICKER)
    if name == "lab rebooted":  # the journal is new after a boot: the old one is what was read before it
        truth = before + [c for c in truth if c not in set(before)]
    anchor = truth.index(delivered[0])
    lost, dup = lost_and_duplicated(delivered, truth[anchor:])
    trouble = [s for s in samples if s.troubled]
    said: list[str] = []
    for s in trouble:
        words = " | ".join(line for line in s.status.splitlines() if "✗" in line or "○" in line) or s.title
        words = re.sub(r"\b\d+ s\b", "N s", words)  # one row per kind of message, not per second
        if words not in said:
            said.append(words)
    row = FaultRow(
        name, lost, dup, len(delivered), said[:4], round(trouble[0].at, 2) if trouble else None, round(recovered, 2)
    )
    return row, samples, restore_at


NETWORK_ATTACKS = [
    # name, attack, restore, hold seconds, whether the data goes stale (the host is really gone)
    ("client-side reset (ss -K)", client_reset, None, 0.5, False),
    ("server-side reset (ss -K in the lab)", server_reset, None, 0.5, False),
    ("sshd restarted, sessions killed", sshd_restart, None, 3.0, False),
    ("link down 12 s", link_down, link_up, 12.0, True),
    ("lab frozen 12 s (cgroup freezer)", freeze, thaw, 12.0, True),
    ("lab rebooted", lab_down, lab_up, 3.0, True),
]


@pytest.mark.parametrize("name,attack,restore,hold,goes_stale", NETWORK_ATTACKS, ids=[a[0] for a in NETWORK_ATTACKS])
async def test_network_fault(
    fault_lab: LabHandle,
    fault_report: list[FaultRow],
    name: str,
    attack: Callable[[LabHandle], None],
    restore: Callable[[LabHandle], None] | None,
    hold: float,
    goes_stale: bool,
) -> None:
    row, samples, restore_at = await run_attack(fault_lab, name, attack, restore, hold)
    fault_report.append(row)
    assert (row.lost, row.duplicated) == (0, 0), row
    assert row.delivered > 20 * hold * 0.5, row  # the lines written meanwhile did arrive
    if goes_stale:
        assert row.stale_after_s is not None and row.stale_after_s <= STALE_WITHIN_S, row
        held = [s for s in samples if STALE_WITHIN_S <= s.at <= restore_at]  # the host is gone meanwhile
        assert held and all(s.troubled for s in held), [s for s in held if not s.troubled][:2]
        assert not any("ready ✓" in s.status for s in held), "ready ✓ was shown on stale data"
        assert any("connection lost" in s.status or "no answer from" in s.status for s in held), row.screen
        assert any("not following" in s.title for s in held), row.screen
