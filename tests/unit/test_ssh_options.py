"""What the SSH transport asks for before it connects: AES-GCM first unless the user's ssh_config
chooses the ciphers, and journalctl's output in large blocks (the figures: issue 14's
benchmarks/bench_ssh_transport.py)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from cockpit.config import HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.systemd.journal import journal_argv


def options_for(tmp_path: Path, text: str):
    config = tmp_path / "ssh_config"
    config.write_text(text)
    host = SSHHost(HostConfig(name="gpu1"), ssh_configs=lambda: [str(config)])
    return host._options()


def test_aes_gcm_is_offered_first_and_every_default_cipher_still_follows(tmp_path: Path) -> None:
    from asyncssh.encryption import get_default_encryption_algs

    algs = list(options_for(tmp_path, "Host gpu1\n  HostName 10.0.0.7\n").encryption_algs)
    assert algs[0] == b"aes128-gcm@openssh.com"
    assert sorted(algs) == sorted(get_default_encryption_algs())  # the same set, another order


def test_the_users_ciphers_are_kept(tmp_path: Path) -> None:
    options = options_for(tmp_path, "Host gpu1\n  Ciphers chacha20-poly1305@openssh.com,aes256-ctr\n")
    assert list(options.encryption_algs) == [b"chacha20-poly1305@openssh.com", b"aes256-ctr"]


def test_journalctl_runs_under_stdbuf_where_there_is_one_and_as_it_is_elsewhere(tmp_path: Path) -> None:
    argv = journal_argv("sglang-demo.service", "-n", "5")
    assert argv[:2] == ["sh", "-c"] and argv[4:7] == ["journalctl", "-u", "sglang-demo.service"]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "journalctl").write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    (fake / "journalctl").chmod(0o755)
    shown = subprocess.run(argv, capture_output=True, text=True, env={"PATH": f"{fake}:/usr/bin:/bin"}, check=True)
    assert shown.stdout.split("|")[:3] == ["-u", "sglang-demo.service", "-o"]  # each argument whole
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "sh").symlink_to(shutil.which("sh") or "/bin/sh")
    (bare / "journalctl").symlink_to(fake / "journalctl")
    plain = subprocess.run(argv, capture_output=True, text=True, env={"PATH": str(bare)}, check=True)  # no stdbuf
    assert plain.stdout == shown.stdout
    assert "exec stdbuf -o 256K" in shlex.join(argv)


def test_a_slow_channel_close_keeps_its_session_slot_until_it_completes() -> None:
    """sshd counts a session until its close completes: the slot goes back only then, or the
    next channel would be an eleventh and MaxSessions would refuse it (seen on a busy CI run)."""
    import asyncio

    from cockpit.remote.ssh import _release_when_closed

    class Closing:
        def __init__(self) -> None:
            self.closed = asyncio.Event()

        async def wait_closed(self) -> None:
            await self.closed.wait()

    async def run() -> None:
        slot = asyncio.Semaphore(1)
        await slot.acquire()
        slow = Closing()
        await _release_when_closed(slow, slot, wait_s=0.05)  # type: ignore[arg-type]
        assert slot.locked()  # the close is still under way: the slot stays taken
        slow.closed.set()
        await asyncio.sleep(0.01)
        assert not slot.locked()
        fast = Closing()
        fast.closed.set()
        await slot.acquire()
        await _release_when_closed(fast, slot, wait_s=1.0)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert not slot.locked()

    asyncio.run(run())


def test_an_openssh_forward_that_cannot_connect_is_one_sentence(tmp_path: Path) -> None:
    """`ssh -L` to a port where nothing listens ends at once: the caller gets a HostError naming
    the host and ssh's own last word, and falls back to its asyncssh connection."""
    import asyncio
    import socket

    import pytest

    from cockpit.remote import openssh
    from cockpit.remote.base import HostError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # free again once the socket closes: nothing listens there

    async def run() -> None:
        config = HostConfig(name="gpu9", hostname="127.0.0.1", port=closed, user="nobody")
        async with openssh.forward(config, [], "127.0.0.1", 30000):
            raise AssertionError("a forward came up through a closed port")

    with pytest.raises(HostError) as e:
        asyncio.run(run())
    if shutil.which("ssh") is None:
        assert str(e.value) == "no OpenSSH client (ssh) on this machine"
    else:
        assert str(e.value).startswith("ssh -L to gpu9 ended (255): ")
        assert "refused" in str(e.value).lower()


def test_an_ssh_config_gone_while_it_is_read_is_one_sentence(tmp_path: Path) -> None:
    """A lab brought down while a command connects takes its ssh_config with it: between the
    cockpit finding the file and asyncssh opening it (here asyncssh's own `Match exec`, on the
    line before, removes it at that moment). `cockpit stacks` printed asyncssh's FileNotFoundError
    as a traceback."""
    import os
    import sys

    lab_config = tmp_path / "lab_ssh_config"
    lab_config.write_text("Host gone-lab\n  HostName 10.213.99.2\n")
    first = tmp_path / "ssh_config"
    first.write_text(f'Match exec "rm -f {lab_config}"\n')
    out = subprocess.run(
        [str(Path(sys.executable).with_name("cockpit")), "stacks", "--host", "gone-lab", "--unit", "x.service"],
        capture_output=True,
        text=True,
        env={**os.environ, "COCKPIT_SSH_CONFIG": f"{first}:{lab_config}"},
        timeout=60,
    )
    assert not lab_config.exists()  # it did go away mid-read
    said = f"cockpit: cannot read the ssh_config {lab_config} for gone-lab: No such file or directory\n"
    assert (out.returncode, out.stderr) == (2, said)
