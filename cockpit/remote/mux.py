"""One-shot reads through the user's own OpenSSH, over one master connection (`ssh -M`).

`cockpit status` is asked of a host by scripts and by people who compare it with `ssh host
systemctl show`: 0.30 s on the lab. Through asyncssh it took 0.83 to 0.94 s, of which 0.37 s
is importing asyncssh and 0.3 s its connection, both on the one core the command has. An `ssh`
started before the cockpit imports its own modules logs in on the other core meanwhile, and
each later read is a client of its master (20 to 30 ms each, no new login). The app starts
one the same way, before Textual is imported, so the unit's state is on screen as soon as
the first screen is (docs/architecture.md, "Start-up").

The reads are the only thing it carries: it never writes a file, follows a journal or
forwards a port (those go through the session's asyncssh connection, whose failures, host
key questions and channel limits the cockpit knows how to word). `BatchMode` keeps OpenSSH
from asking anything; when its master does not come up (an unknown host key, a key with a
passphrase, no `ssh` at all), `ready` says why and the caller uses asyncssh instead.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.config import HostConfig
from cockpit.remote import early_master, ssh_client
from cockpit.remote.base import (
    CONNECT_TIMEOUT,
    ConnectionLost,
    FileMissing,
    FileStat,
    Host,
    HostError,
    LineStream,
    RunResult,
)
from cockpit.remote.early_master import DIR, SOCKET, SSH_CONFIG, STDERR, STDOUT
from cockpit.remote.spawned import Spawned
from cockpit.timeouts import within

if TYPE_CHECKING:
    import asyncio

PERSIST_S = 30  # how long a master whose cockpit died stays, idle, before it ends itself
SSH_FAILED = 255  # ssh's own exit status when the connection, not the command, failed
NO_WORD = "no word from ssh"


def sweep(root: str | None = None) -> list[str]:
    """Remove the master directories of this user's cockpits that are gone: `close` removes its
    own, but a cockpit ended by a signal or a dropped session cannot, and hundreds piled up in
    /tmp on a machine that runs it often. A directory is removed when it was made on this host
    and in this PID namespace (`early_master.where`), the PID in its name runs no process there,
    and no master holds its socket (a master outlives its cockpit by PERSIST_S, and removes its
    socket when it ends; one killed leaves it, and its directory stays). A reused PID only keeps
    a directory until a later sweep. What was removed, for the tests."""
    root = root or tempfile.gettempdir()
    here = early_master.where()
    removed = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            pid = early_master.maker(entry.name, here)
            if pid is None:
                continue
            with contextlib.suppress(OSError, OverflowError):
                if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                if _alive(pid) or os.path.lexists(os.path.join(entry.path, SOCKET)):
                    continue
                shutil.rmtree(entry.path)
                removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: not this user's cockpit, but alive all the same
    return True


class MuxHost(Host):
    """Read-only commands, files and HTTP requests of one host through an OpenSSH master.

    The master is started when the object is made (a plain fork, no event loop needed), so
    the login runs while the caller goes on importing; `ready()` waits for it. `first`, a
    command the caller will surely ask first (the unit's `systemctl show`), runs as soon as
    the login is done, as `ssh host CMD` would: the first answer then costs what plain ssh
    costs. The master leaves the foreground once logged in (`ControlPersist`) and ends at
    `close`, or by itself PERSIST_S after its last client if the cockpit died first."""

    def __init__(
        self, config: HostConfig, files: Sequence[str], jump: HostConfig | None = None, first: Sequence[str] = ()
    ) -> None:
        self.name = config.name
        conf = os.path.join(DIR, SSH_CONFIG)
        self.conf = ssh_client.config_text(files)
        base = ssh_client.options(config, conf, jump)
        socket = os.path.join(DIR, SOCKET)
        client = [*base, "-S", socket, "-o", "ControlMaster=no", config.destination]
        command = ["--", shlex.join(first)] if first else ["-N"]
        # the master's command line, DIR for its directory (cockpit/remote/early_master.py remembers it)
        self.master = [*base, "-M", "-S", socket, "-o", f"ControlPersist={PERSIST_S}", "-T", client[-1], *command]
        self._first = tuple(first)
        self._master: Spawned | None = None
        early = early_master.take(self.master, self.conf)
        if early is not None:
            self._dir, self._master = early
        else:
            self._dir = early_master.new_dir()
        self._socket = os.path.join(self._dir, SOCKET)  # short: a socket path has ~100 bytes
        self._client = early_master.filled(client, self._dir)
        self._out, self._said = os.path.join(self._dir, STDOUT), os.path.join(self._dir, STDERR)
        if early is None and shutil.which("ssh") is not None:
            self._master = early_master.start(self.master, self.conf, self._dir)

    async def ready(self, timeout: float = CONNECT_TIMEOUT) -> None:
        """Once the master has logged in (its control socket exists); HostError with ssh's
        last word when it cannot, ConnectionLost when the host has not answered in `timeout`
        (asyncssh would wait as long again: the caller says so rather than trying it)."""
        import asyncio

        if self._master is None:
            raise HostError("no OpenSSH client (ssh) on this machine")
        deadline = time.monotonic() + timeout
        while not self._logged_in():
            if self._master.poll() is not None:
                raise HostError(f"ssh to {self.name} ended ({self._master.returncode}): {self._last_word()}")
            if time.monotonic() > deadline:
                raise ConnectionLost(f"{self.name} did not answer within {timeout:.0f} s")
            await asyncio.sleep(0.005)

    def _logged_in(self) -> bool:
        return os.path.exists(self._socket)

    def _last_word(self) -> str:
        return ssh_client.last_word(Path(self._said).read_bytes()) or NO_WORD

    async def _first_answer(self) -> RunResult | None:
        """The answer to `first`, once, when ssh ran it (None: ask the normal way). One already
        in (the app's imports outlast the login) is read without handing the loop back, so the
        app draws it with its first frame; else ssh is waited for in a thread."""
        import asyncio

        argv, self._first = self._first, ()
        master = self._master
        if master is None:
            return None
        returncode = master.poll()
        if returncode is None:
            returncode = await asyncio.to_thread(master.wait)
        return self._answer(argv, returncode)

    def first_answer_in(self, timeout: float) -> RunResult | None:
        """The answer to `first`, waited for up to `timeout` s in the calling thread (not the
        loop's), and left for `query` to take as well: the early state line (cockpit/ui/
        early_state.py) draws it while the app is still importing. None: not in by then, or
        ssh failed."""
        master, argv = self._master, self._first
        if master is None or not argv:
            return None
        returncode = master.ended_within(timeout)
        return None if returncode is None else self._answer(argv, returncode)

    def _answer(self, argv: tuple[str, ...], returncode: int) -> RunResult | None:
        """What ssh printed for `first` (two files of a few KB, read at once); None when ssh
        itself failed, not the command."""
        if returncode == SSH_FAILED:
            return None
        return RunResult(argv, returncode, Path(self._out).read_bytes() + Path(self._said).read_bytes(), b"")

    async def _process(self, remote: Sequence[str], *, stdin: int) -> asyncio.subprocess.Process:
        import asyncio

        from cockpit.remote.local import spawn

        return await spawn(
            remote, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=1 << 24
        )

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = 30.0) -> RunResult:
        return await self._ssh([*self._client, "--", shlex.join(argv)], argv, input, timeout)

    async def _ssh(
        self, ssh: Sequence[str], argv: Sequence[str], input: bytes | None, timeout: float | None
    ) -> RunResult:
        import asyncio

        from cockpit.remote.local import communicate

        stdin = asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL
        proc = await self._process(ssh, stdin=stdin)
        out, err = await communicate(proc, input, timeout, f"`{argv[0]}` on {self.name}")
        if proc.returncode == SSH_FAILED:
            raise HostError(f"ssh to {self.name} failed: {ssh_client.last_word(err) or NO_WORD}")
        return RunResult(tuple(argv), proc.returncode or 0, out, err)

    async def query(self, argv: Sequence[str], *, timeout: float = 10.0) -> RunResult:
        if self._first and tuple(argv) == self._first and (answer := await self._first_answer()) is not None:
            return answer
        result = await self.run(argv, timeout=timeout)
        return RunResult(result.argv, result.returncode, result.stdout + result.stderr, b"")

    def stream(self, argv: Sequence[str]) -> contextlib.AbstractAsyncContextManager[LineStream]:
        from cockpit.remote.local import process_lines

        return process_lines([*self._client, "--", shlex.join(argv)])

    async def _file(self, path: str, argv: Sequence[str], doing: str) -> bytes:
        result = await self.run(["env", "LC_ALL=C", *argv])
        if result.ok:
            return result.stdout
        said = result.error_text
        if "No such file" in said:
            raise FileMissing(f"{path} does not exist on {self.name}")
        if "Permission denied" in said:
            raise HostError(f"permission denied {doing} {path} on {self.name}")
        raise HostError(f"{doing} {path} on {self.name} failed: {said.splitlines()[-1] if said else result.returncode}")

    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        return await self._file(path, ["head", "-c", str(limit), "--", path], "reading")

    async def stat(self, path: str) -> FileStat:
        out = await self._file(path, ["stat", "-L", "-c", "%s %Y %f %u", "--", path], "reading")
        size, mtime, mode, uid = out.split()
        return FileStat(int(size), float(mtime), int(mode, 16), int(uid))

    async def realpath(self, path: str) -> str:
        return (await self._file(path, ["realpath", "-e", "--", path], "reading")).decode().rstrip("\n")

    def _reads_only(self, doing: str) -> HostError:
        return HostError(f"{doing} on {self.name}: the one-shot OpenSSH connection only reads")

    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        raise self._reads_only(f"writing {path}")

    async def rename(self, source: str, target: str) -> None:
        raise self._reads_only(f"renaming {source}")

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        raise self._reads_only(f"removing {path}")

    def forward_port(self, host: str, port: int) -> contextlib.AbstractAsyncContextManager[int]:
        raise self._reads_only(f"forwarding {host}:{port}")

    async def http_request(
        self, method: str, host: str, port: int, path: str, *, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        """Through `ssh -W host:port` (a client of the master whose stdin and stdout are the
        connection), so it reaches what the host's loopback reaches."""
        import asyncio

        from cockpit.remote import http
        from cockpit.remote.local import signal_child

        client = [*self._client[:-1], "-W", f"{host}:{port}", self._client[-1]]
        proc = await self._process(client, stdin=asyncio.subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        exchange = http.exchange(proc.stdout, proc.stdin, method, host, port, path, body)
        try:
            return await within(exchange, timeout)
        finally:
            signal_child(proc)
            await proc.wait()

    async def close(self) -> None:
        import asyncio

        if self._master is not None and self._master.poll() is None:
            self._master.kill()  # only before its login (or while `first` ran): ssh, not the master
        if self._logged_in():
            with contextlib.suppress(HostError):
                await self._ssh([*self._client[:-1], "-O", "exit", self._client[-1]], ["ssh", "-O", "exit"], None, 5)
        shutil.rmtree(self._dir, ignore_errors=True)
        await asyncio.to_thread(sweep)  # /tmp may hold hundreds of entries: off the app's loop
