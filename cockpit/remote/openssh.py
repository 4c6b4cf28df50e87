"""A local port forwarded by the user's own OpenSSH client (`ssh -N -L`), for load runs.

asyncssh encrypts and frames every packet in Python on the cockpit's one event loop: at 256
streams against a server of 10,240 tok/s, a forward through asyncssh read 0.69 (default cipher)
to 0.92 (AES-GCM) of what a raw-socket client read, and one through `ssh -L` 0.99 to 1.01
(benchmarks/bench_ssh_transport.py, three rounds each). OpenSSH reads the user's ssh_config
itself, ControlMaster included; the files the cockpit adds (the labs') are included by a config
written for the call, and the config's own host settings become options. `BatchMode` keeps it
from asking anything: a host key it does not know, or a key that needs a passphrase, makes it
fail, and the caller falls back to asyncssh's forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import IO

from cockpit.config import HostConfig
from cockpit.remote.base import HostError
from cockpit.remote.local import end_child, spawn
from cockpit.remote.ssh_client import config_text, last_word, options

READY_S = 10.0  # how long `ssh -L` may take to connect and listen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def command(
    config: HostConfig, config_file: str, local: int, host: str, port: int, jump: HostConfig | None = None
) -> list[str]:
    """The `ssh` argv that listens on 127.0.0.1:`local` and reaches `host`:`port` from the host."""
    argv = options(config, config_file, jump) + ["-N", "-T", "-o", "ExitOnForwardFailure=yes"]
    argv += ["-o", "ServerAliveInterval=5", "-L", f"127.0.0.1:{local}:{host}:{port}"]
    return [*argv, config.destination]


@contextlib.asynccontextmanager
async def forward(
    config: HostConfig, files: Sequence[str], host: str, port: int, jump: HostConfig | None = None
) -> AsyncIterator[int]:
    """A local port through `ssh -L`; HostError when there is no `ssh` or it does not come up."""
    if shutil.which("ssh") is None:
        raise HostError("no OpenSSH client (ssh) on this machine")
    with (
        tempfile.NamedTemporaryFile("w", prefix="cockpit-ssh-", suffix=".config") as conf,
        tempfile.TemporaryFile() as said,  # not a pipe: one that nobody reads would stall ssh once full
    ):
        conf.write(config_text(files))
        conf.flush()
        local = _free_port()
        proc = await spawn(
            command(config, conf.name, local, host, port, jump),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=said,
        )
        try:
            await _until_listening(proc, local, config.name, said)
            yield local
        finally:
            await end_child(proc, 5)


async def _until_listening(proc: asyncio.subprocess.Process, local: int, name: str, stderr: IO[bytes]) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            stderr.seek(0)
            raise HostError(f"ssh -L to {name} ended ({proc.returncode}): {last_word(stderr.read())}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", local)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return
    raise HostError(f"ssh -L to {name} did not listen within {READY_S:.0f} s")
