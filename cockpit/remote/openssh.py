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
import os
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import IO

from cockpit.config import HostConfig
from cockpit.remote.base import HostError

READY_S = 10.0  # how long `ssh -L` may take to connect and listen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _destination(config: HostConfig) -> str:
    return config.hostname or config.ssh_alias


def _jump(config: HostConfig) -> str:
    user = f"{config.user}@" if config.user else ""
    port = f":{config.port}" if config.port else ""
    return f"{user}{_destination(config)}{port}"


def command(
    config: HostConfig, config_file: str, local: int, host: str, port: int, jump: HostConfig | None = None
) -> list[str]:
    """The `ssh` argv that listens on 127.0.0.1:`local` and reaches `host`:`port` from the host."""
    argv = ["ssh", "-F", config_file, "-N", "-T", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes"]
    argv += ["-o", "ServerAliveInterval=5", "-L", f"127.0.0.1:{local}:{host}:{port}"]
    if config.user:
        argv += ["-l", config.user]
    if config.port:
        argv += ["-p", str(config.port)]
    if config.identity_file:
        argv += ["-i", os.path.expanduser(config.identity_file)]
    if jump is not None:
        argv += ["-J", _jump(jump)]
    return [*argv, _destination(config)]


def config_text(files: Sequence[str]) -> str:
    """An ssh_config that reads `files` in order, then the system's (which `-F` would skip)."""
    lines = [f'Include "{f}"' for f in files]
    if os.path.isfile("/etc/ssh/ssh_config"):
        lines.append('Include "/etc/ssh/ssh_config"')
    return "\n".join(lines) + "\n"


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
        proc = await asyncio.create_subprocess_exec(
            *command(config, conf.name, local, host, port, jump),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=said,
        )
        try:
            await _until_listening(proc, local, config.name, said)
            yield local
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except asyncio.TimeoutError:
                    proc.kill()
                    await proc.wait()


async def _until_listening(proc: asyncio.subprocess.Process, local: int, name: str, stderr: IO[bytes]) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            stderr.seek(0)
            said = stderr.read().decode("utf-8", "replace").strip()
            raise HostError(f"ssh -L to {name} ended ({proc.returncode}): {said.splitlines()[-1] if said else ''}")
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
