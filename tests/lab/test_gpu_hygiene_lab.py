"""GPU hygiene against the lab, through the real cockpit: a process started outside the unit
that holds memory on its GPUs (the nvidia-smi stand-in reports it) is named by PID in
`cockpit preflight --json`, in `cockpit status --json`, and in the write modal, which ends the
ones chosen, each only while it is still the process it listed (its start time and cgroup)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import SelectionList, Static

from cockpit.config import Config, HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.systemd import gpu_use
from cockpit.systemd.control import UnitControl
from cockpit.systemd.process_end import Ending, Identity
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.write import WriteModal
from tests.conftest import LabHandle, until
from tests.listeners import Notices

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
        assert gpu["used_mib"] == min(sum(p["used_mib"] for p in procs.values()), gpu["total_mib"])


async def _write_modal(app: CockpitApp, pilot, after: WriteModal | None = None) -> WriteModal:
    """The write modal on screen (a new one, where `after` is the one before)."""
    end = time.monotonic() + 30
    while not isinstance(app.screen, WriteModal) or app.screen is after:
        assert time.monotonic() < end, "no write modal"
        await pilot.pause(0.1)
    await pilot.pause()
    return app.screen


async def _open_write(app: CockpitApp, pilot, target: Target) -> WriteModal:
    await until(lambda: app.session.unit is not None and app.session.status is not None, 30)
    loaded = app.session.unit
    app.open_write(target, loaded, loaded.set_flag("--log-level", "info"), [])
    return await _write_modal(app, pilot)


async def _end_chosen(app: CockpitApp, pilot, modal: WriteModal) -> WriteModal:
    """k, then y in the confirmation: the write modal opens again once they are ended."""
    await pilot.press("k")
    await until(lambda: isinstance(app.screen, ConfirmModal), 10)
    await pilot.press("y")
    return await _write_modal(app, pilot, after=modal)


async def test_the_write_modal_lists_another_units_holder_unchosen_and_ends_it_when_chosen(
    lab: LabHandle, holder: int
) -> None:
    target = Target(lab.name, UNIT)
    app = CockpitApp(Config(), target)
    async with app.run_test(size=(140, 48)) as pilot:
        first = await _open_write(app, pilot, target)
        assert [h.pid for h in first.holders] == [holder]
        assert any(f"PID {holder}" in f.message and f.severity == "error" for f in first.findings)
        choices = first.query_one("#holders", SelectionList)
        assert choices.selected == []  # it is part of a running unit: not chosen for the operator
        await pilot.press("k")
        await pilot.pause()
        assert app.screen is first  # nothing chosen, nothing ended
        choices.select(holder)
        await pilot.pause()
        warning = str(first.query_one("#holders-warning", Static).render())
        assert (
            f"ends PID {holder} (/usr/bin/sleep) of cockpit-test-holder.service, a running unit: that unit goes down"
            in warning
        )
        again = await _end_chosen(app, pilot, first)
        assert again.holders == [] and not [f for f in again.findings if f.rule == "gpu-held-by-other"]
        gone = lab.ssh("test", "-e", f"/proc/{holder}", check=False)
        assert gone.returncode == 1  # the process is gone from the host
        await pilot.press("n")  # nothing is written


LOOSE = """exec >/dev/null 2>&1 </dev/null
for root in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  [ -e "$root/cgroup.procs" ] && mkdir -p "$root/cockpit-loose" && echo $$ > "$root/cockpit-loose/cgroup.procs"
done
echo $$ > /run/cockpit-loose.pid
exec env COCKPIT_STANDIN_GPU_MIB=70000 sleep 600
"""
# In a unit of its own: remount /proc/sys writable in a mount namespace of its own (nspawn
# mounts it read-only), say the last PID handed out was $1 - 1, and fork `sleep`: it gets $1.
REUSE = """mount -o remount,rw /proc/sys && echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid || exit
{ sleep 600 & } ; echo $! > /run/cockpit-innocent.pid; wait"""
INNOCENT = "cockpit-test-innocent.service"


@pytest.fixture
def loose_holder(lab: LabHandle) -> Iterator[int]:
    """`sleep 600` holding 70000 MiB on each of the 8 GPUs in a cgroup of no unit, as a rank that
    outlived a crash is: the write modal chooses it at first."""
    lab.ssh("setsid", "-f", "sh", "-c", LOOSE)
    lab.wait_for(lambda: lab.ssh("test", "-s", "/run/cockpit-loose.pid", check=False).returncode == 0)
    pid = int(lab.ssh("cat", "/run/cockpit-loose.pid").stdout)
    yield pid
    lab.ssh("sh", "-c", "kill -9 $(cat /sys/fs/cgroup/unified/cockpit-loose/cgroup.procs)", check=False)
    lab.ssh("rm", "-f", "/run/cockpit-loose.pid", "/run/cockpit-innocent.pid", check=False)
    lab.ssh("systemctl", "stop", INNOCENT, check=False)


def _hand_on(lab: LabHandle, pid: int) -> None:
    """End `pid` and give its number to an innocent `sleep` in a unit of its own (PID reuse,
    forced where it would otherwise take the kernel going round pid_max)."""
    lab.ssh("kill", "-9", str(pid))
    lab.wait_for(lambda: lab.ssh("test", "-e", f"/proc/{pid}", check=False).returncode == 1)
    for _ in range(5):  # another fork in the lab may take the number first
        lab.ssh("systemd-run", f"--unit={INNOCENT}", "--collect", "unshare", "-m", "sh", "-c", REUSE, "sh", str(pid))
        lab.wait_for(lambda: lab.ssh("test", "-s", "/run/cockpit-innocent.pid", check=False).returncode == 0)
        if int(lab.ssh("cat", "/run/cockpit-innocent.pid").stdout) == pid:
            return
        lab.ssh("systemctl", "stop", INNOCENT)
        lab.ssh("rm", "-f", "/run/cockpit-innocent.pid")
    raise AssertionError(f"PID {pid} could not be handed to a new process")


async def test_a_pid_another_process_took_after_the_listing_is_not_signalled(lab: LabHandle, loose_holder: int) -> None:
    target = Target(lab.name, UNIT)
    app = CockpitApp(Config(), target)
    async with app.run_test(size=(140, 48)) as pilot:
        first = await _open_write(app, pilot, target)
        assert any(f"PID {loose_holder} (/usr/bin/sleep)" in f.message for f in first.findings), first.findings
        _hand_on(lab, loose_holder)  # between the listing and k, the PID became an innocent sleep's
        await _end_chosen(app, pilot, first)  # the loose holder is chosen at first
        innocent = lab.ssh("cat", f"/proc/{loose_holder}/cmdline", check=False)
        assert innocent.stdout.split("\0")[0] == "sleep", "the innocent process was ended"
        unit = lab.ssh("systemctl", "show", "-p", "MainPID", "--value", INNOCENT).stdout.strip()
        assert unit != "0"  # its unit still runs
        said = [n.message for n in app._notifications]
        assert any(f"not signalled: PID {loose_holder} is no longer the process listed" in m for m in said), said
        await pilot.press("n")


async def test_a_sudo_login_ends_a_root_process_by_sudo_kill_after_the_same_check(
    lab: LabHandle, loose_holder: int
) -> None:
    """The README's sudo host: kill, not a root shell, is what the login may run as root."""
    root = SSHHost(HostConfig(name=lab.name))
    config = HostConfig(name=f"{lab.name}-operator", user="operator", sudo=True)
    operator = SSHHost(config)
    try:
        listed = next(p for p in (await gpu_use.read(root)).processes if p.pid == loose_holder)
        assert listed.start_ticks is not None and listed.cgroup == "/cockpit-loose"
        identity = Identity(loose_holder, listed.start_ticks, listed.cgroup)
        control = UnitControl(operator, config)
        stale = Identity(loose_holder, listed.start_ticks + 1, listed.cgroup)  # as a PID reused would read
        assert await control.end_processes([stale]) == Ending(changed=[loose_holder])
        assert lab.ssh("test", "-e", f"/proc/{loose_holder}", check=False).returncode == 0
        assert await control.end_processes([identity]) == Ending(ended=[loose_holder])
        assert lab.ssh("test", "-e", f"/proc/{loose_holder}", check=False).returncode == 1
    finally:
        await root.close()
        await operator.close()


@pytest.fixture
def orphaning_unit(lab: LabHandle) -> Iterator[None]:
    """The demo unit with two ranks that, at a crash, leave its cgroup and live on."""
    dropin = "/etc/systemd/system/sglang-demo.service.d/orphans.conf"
    lab.ssh("mkdir", "-p", "/etc/systemd/system/sglang-demo.service.d")
    lab.ssh("tee", dropin, input="[Service]\nEnvironment=COCKPIT_STANDIN_ORPHANS=2\n")
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "restart", UNIT)
    yield
    lab.ssh("rm", "-f", dropin)
    lab.ssh(
        "sh",
        "-c",
        "for p in $(cat /sys/fs/cgroup/unified/cockpit-orphans/cgroup.procs); do kill -9 $p; done",
        check=False,
    )
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "restart", UNIT)
    lab.wait_for(lambda: "ready to roll" in lab.ssh("journalctl", "-u", UNIT, "-n", "5", "-o", "cat").stdout)


async def test_an_orphan_crash_is_named_after_the_stop_and_before_the_next_start(
    lab: LabHandle, orphaning_unit: None
) -> None:
    from cockpit.lab.lab import Lab, crash
    from cockpit.session import Session

    listener = Notices()
    notices = listener.said

    session = Session(Config(), Target(lab.name, UNIT))
    session.listener = listener
    session.start()
    try:
        await until(lambda: session.status is not None and session.status.ready and session.unit is not None, 60)
        crashed = session.status.invocation_id
        await until(lambda: session.journal.state == "following", 60)
        assert crash(Lab(lab.name)) == 6  # two of the eight ranks do not crash: they are left behind

        def survivors() -> list[str]:  # other notices may come first: journald's drops in the crash's burst
            return [n for n in notices if "out of the unit's cgroup" in n]

        await until(survivors, 60, "no notice of the survivors")
        orphans = [int(p) for p in lab.ssh("cat", "/sys/fs/cgroup/unified/cockpit-orphans/cgroup.procs").stdout.split()]
        assert len(orphans) == 2, orphans
        said = survivors()[0]
        assert all(f"PID {pid} (/cockpit-orphans)" in said for pid in orphans), notices
        assert f"ended start {crashed[:12]}" in said, notices
        # Before the next start (RestartSec=5): the write's pre-flight names both, as the unit's own.
        findings = await session.host_findings(session.unit)
        named = {f.pid: f for f in findings if f.rule == "gpu-held-by-other"}
        assert set(named) == set(orphans), findings
        assert all(
            f"from {UNIT}'s earlier invocation {crashed[:12]}, out of its cgroup" in f.message for f in named.values()
        )
        # The automatic restart reaches ready beside them; ending them frees their memory.
        await until(lambda: session.status.invocation_id != crashed and session.status.ready, 60, "no new start")
        listed = {f.pid: f.holder for f in findings if f.holder is not None}
        identities = [listed[pid].identity for pid in orphans]
        assert await session.end_processes(identities) == Ending(ended=orphans)
        use = await gpu_use.read(session.host)
        assert not {p.pid for p in use.processes} & set(orphans)
    finally:
        await session.close()


def test_preflight_names_the_process_that_holds_the_port(lab: LabHandle) -> None:
    """A listener on the unit's --port (127.0.0.2:30000 beside the server's 127.0.0.1:30000)."""
    name = "cockpit-test-squatter"
    lab.ssh(
        "systemd-run",
        f"--unit={name}",
        "/opt/sglang/venv/bin/python",
        "-m",
        "http.server",
        "30000",
        "--bind",
        "127.0.0.2",
    )
    try:
        lab.wait_for(lambda: "127.0.0.2:30000" in lab.ssh("ss", "-Hltn").stdout, what="the squatter's listener")
        pid = int(lab.ssh("systemctl", "show", "-p", "MainPID", "--value", f"{name}.service").stdout)
        findings = json.loads(_cockpit(lab, "preflight").stdout)
        held = [f for f in findings if f["rule"] == "port-held-by-other"]
        assert [(f["pid"], f["severity"], f["flags"]) for f in held] == [(pid, "error", ["--port"])], findings
        assert f"owner: unit {name}.service" in held[0]["message"]
    finally:
        lab.ssh("systemctl", "stop", f"{name}.service", check=False)
