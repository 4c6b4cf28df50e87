"""The write contract under attack: a full unit directory (as root over SFTP, and through sudo),
a read-only one, an edit that lands inside the write window, a connection reset mid-write, the
temp files of earlier failures, and backups on a sudo host. In every case the unit on disk is the
old text or the new one, never half, and nothing is lost silently."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.lab.lab import Lab
from cockpit.remote.replace import replace_file
from cockpit.remote.ssh import SSHHost
from cockpit.systemd.deploy import BACKUPS_KEPT, ChangedOnHost, write_files
from tests.conftest import LabHandle

DIR = "/etc/systemd/system"
NAME = "writes.service"
UNIT = f"{DIR}/{NAME}"
TEXT = "[Unit]\nDescription=cockpit write-fault target\n\n[Service]\nExecStart=/bin/sleep infinity\n"
# Over 4,096 bytes: its temp file needs a second page of the tmpfs.
BIGGER = TEXT.replace("infinity", "infinity " + " ".join(f"--pad-{i}" for i in range(600)))


def _hosts(lab: LabHandle) -> dict[str, SSHHost]:
    return {
        "root": SSHHost(HostConfig(name=lab.name)),
        "sudo": SSHHost(HostConfig(name=f"{lab.name}-operator", user="operator", sudo=True)),
    }


@pytest.fixture
def target(fault_lab: LabHandle) -> Iterator[LabHandle]:
    fault_lab.ssh("tee", UNIT, input=TEXT)
    yield fault_lab
    fault_lab.ssh("sh", "-c", f"rm -f {UNIT} {UNIT}.cockpit-bak.* {DIR}/.{NAME}.*.cockpit-tmp", check=False)


def _leftovers(lab: LabHandle) -> list[str]:
    return lab.ssh("sh", "-c", f"ls -A {DIR} | grep -F '.cockpit-tmp' || true").stdout.split()


@pytest.fixture
def small_unit_dir(target: LabHandle) -> Iterator[LabHandle]:
    """/etc/systemd/system on a tmpfs of 1 MiB with its files copied in, filled until two pages
    remain: room for the backup (one page), not for the bigger unit's temp file (two)."""
    lab = target
    lab.ssh(
        "sh",
        "-c",
        f"rm -rf /root/sys-save && cp -a {DIR} /root/sys-save && "
        f"mount -t tmpfs -o size=1m,mode=0755 tmpfs {DIR} && cp -a /root/sys-save/. {DIR}/",
    )
    free_kb = int(lab.ssh("sh", "-c", f"df -Pk {DIR} | tail -n 1 | awk '{{print $4}}'").stdout)
    lab.ssh("fallocate", "-l", f"{(free_kb - 8) * 1024}", f"{DIR}/filler")
    yield lab
    lab.ssh("umount", "-l", DIR, check=False)
    lab.ssh("systemctl", "daemon-reload", check=False)


@pytest.mark.parametrize("who", ["root", "sudo"])
async def test_a_full_unit_directory_leaves_the_unit_whole(small_unit_dir: LabHandle, who: str) -> None:
    lab = small_unit_dir
    host = _hosts(lab)[who]
    try:
        with pytest.raises(CockpitError, match="no space left on device") as e:
            await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT})
        assert "\n" not in str(e.value)
        assert lab.ssh("cat", UNIT).stdout == TEXT  # not a byte cut
        assert _leftovers(lab) == []
    finally:
        await host.close()


async def test_a_read_only_unit_directory_is_named(target: LabHandle) -> None:
    lab = target
    lab.ssh("sh", "-c", f"mount --bind {DIR} {DIR} && mount -o remount,ro,bind {DIR}")
    host = _hosts(lab)["root"]
    try:
        with pytest.raises(CockpitError, match="read-only file system"):
            await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT})
        assert lab.ssh("cat", UNIT).stdout == TEXT
    finally:
        lab.ssh("umount", DIR, check=False)
        await host.close()


@pytest.mark.parametrize("who", ["root", "sudo"])
async def test_an_edit_inside_the_write_window_is_refused_not_lost(target: LabHandle, who: str) -> None:
    lab = target
    host = _hosts(lab)[who]
    theirs = TEXT + "# edited by someone else while the cockpit wrote\n"

    async def someone_else_edits() -> None:  # the window between the last check and the rename
        await asyncio.to_thread(lab.ssh, "tee", UNIT, input=theirs)

    try:
        with pytest.raises(ChangedOnHost, match="changed on .* while it was being written"):
            await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT}, before_rename=someone_else_edits)
        assert lab.ssh("cat", UNIT).stdout == theirs  # their edit stands
        backups = lab.ssh("sh", "-c", f"cat {UNIT}.cockpit-bak.*").stdout
        assert backups == TEXT  # the backup holds what was on disk when the write began
        assert _leftovers(lab) == []
    finally:
        await host.close()


async def test_a_reset_mid_write_leaves_no_temp_file_and_the_next_reads_work(target: LabHandle) -> None:
    lab = target
    host = _hosts(lab)["root"]
    address = Lab(lab.name).info().address

    async def reset() -> None:
        await asyncio.to_thread(subprocess.run, ["ss", "-K", "dst", address, "dport", "=", "22"], check=True)

    try:
        with pytest.raises(CockpitError, match="lost the connection"):
            await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT}, before_rename=reset)
        for _ in range(3):  # a fresh SFTP client on the new connection, not the dead one
            assert (await host.read_file(UNIT)).decode() == TEXT
        assert _leftovers(lab) == []
    finally:
        await host.close()


@pytest.mark.parametrize("who", ["root", "sudo"])
async def test_temp_files_of_earlier_failures_are_removed_by_the_next_write(target: LabHandle, who: str) -> None:
    lab = target
    stale = f"{DIR}/.{NAME}.0badf00d.cockpit-tmp"
    lab.ssh("sh", "-c", f": > {stale} && touch -d '-5 min' {stale}")
    fresh = f"{DIR}/.{NAME}.feedf00d.cockpit-tmp"  # another writer's, in flight: left alone
    lab.ssh("sh", "-c", f": > {fresh}")
    host = _hosts(lab)[who]
    try:
        await replace_file(host, UNIT, BIGGER.encode(), sudo=host.config.sudo)
        assert lab.ssh("cat", UNIT).stdout == BIGGER
        assert _leftovers(lab) == [f".{NAME}.feedf00d.cockpit-tmp"]
    finally:
        await host.close()


async def test_backups_on_a_sudo_host_are_pruned_and_never_share_a_name(target: LabHandle) -> None:
    lab = target
    host = _hosts(lab)["sudo"]
    texts = [TEXT + f"# version {i}\n" for i in range(BACKUPS_KEPT + 3)]
    try:
        current = TEXT
        for text in texts:  # many writes within a few seconds: several in the same second
            await write_files(host, host.config, NAME, {UNIT: text}, {UNIT: current})
            current = text
        names = lab.ssh("sh", "-c", f"ls {UNIT}.cockpit-bak.*").stdout.split()
        assert len(names) == BACKUPS_KEPT == len(set(names))
        kept = [lab.ssh("cat", n).stdout for n in sorted(names)]
        assert kept == ([TEXT] + texts)[-BACKUPS_KEPT - 1 : -1]  # the newest ten, in order
        assert lab.ssh("stat", "-c", "%U %a", UNIT).stdout.strip() == "root 644"
    finally:
        await host.close()
