"""The write contract under attack: a full unit directory (as root over SFTP, and through sudo),
a read-only one, an edit that lands inside the write window, a connection reset mid-write, the
temp files of earlier failures, backups on a sudo host and under a jump box's clock running
ahead, and two cockpits writing one unit at once. In every case the unit on disk is the old text
or the new one, never half, and nothing is lost silently."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.lab.lab import Lab
from cockpit.remote.replace import FileChanged, replace_file
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


async def test_the_backup_of_a_write_is_kept_and_the_oldest_by_the_hosts_clock_goes(target: LabHandle) -> None:
    """Ten backups whose names carry a jump box's clock years ahead: the one just made sorted
    first by name and was pruned at once. By the host's own mtimes, the oldest of the others goes."""
    lab = target
    ahead = [f"{UNIT}.cockpit-bak.20990101T0000{i:02d}.000000-0000000{i % 10}" for i in range(BACKUPS_KEPT)]
    lab.ssh("sh", "-c", " && ".join(f"touch -d '-1 hour' {name}" for name in ahead))
    lab.ssh("touch", "-d", "-3 hours", ahead[5])  # the oldest on the host, not by its name
    host = _hosts(lab)["root"]
    try:
        [backup] = await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT})
        names = lab.ssh("sh", "-c", f"ls {UNIT}.cockpit-bak.*").stdout.split()
        assert sorted(names) == sorted([backup, *ahead[:5], *ahead[6:]])
        assert lab.ssh("cat", backup).stdout == TEXT
    finally:
        await host.close()


@pytest.mark.parametrize("who", ["root", "sudo"])
async def test_two_cockpits_writing_one_unit_never_both_succeed(target: LabHandle, who: str) -> None:
    """Two writers (two connections, as two cockpits) that read the same text, held until both are
    in the last window, then let go together: ten times. Each time one writes and the other is
    refused, and the unit holds the one that wrote (before the lock both said yes and one was lost)."""
    lab = target
    writers = [_hosts(lab)[who], _hosts(lab)[who]]
    both = asyncio.Barrier(2)

    async def write(host: SSHHost, text: str) -> None:
        await replace_file(
            host, UNIT, text.encode(), sudo=host.config.sudo, expect=TEXT.encode(), before_rename=both.wait
        )

    try:
        for round_ in range(10):
            lab.ssh("tee", UNIT, input=TEXT)
            texts = [TEXT + f"# round {round_}, writer {w}\n" for w in (0, 1)]
            results = await asyncio.gather(*map(write, writers, texts), return_exceptions=True)
            won = [w for w, r in enumerate(results) if r is None]
            assert len(won) == 1 and all(isinstance(r, FileChanged) for r in results if r is not None), results
            assert lab.ssh("cat", UNIT).stdout == texts[won[0]]
        assert _leftovers(lab) == []  # no temp file and no lock left behind
    finally:
        for host in writers:
            await host.close()


async def test_a_lock_is_honoured_and_a_dead_cockpits_lock_goes_after_a_minute(target: LabHandle) -> None:
    lab = target
    lock = f"{DIR}/.{NAME}.lock.cockpit-tmp"
    host = _hosts(lab)["sudo"]
    try:
        lab.ssh("sh", "-c", f": > {lock}")  # another cockpit's, in its last window now
        with pytest.raises(ChangedOnHost, match=f"another cockpit is writing {UNIT} on {host.name}"):
            await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT})
        assert lab.ssh("cat", UNIT).stdout == TEXT
        lab.ssh("touch", "-d", "-5 min", lock)  # its cockpit died in the window
        await write_files(host, host.config, NAME, {UNIT: BIGGER}, {UNIT: TEXT})
        assert lab.ssh("cat", UNIT).stdout == BIGGER
        assert _leftovers(lab) == []
    finally:
        await host.close()
