"""The Host protocol over one shared asyncssh connection per host.

What asyncssh does not do for us, and why it is here:
- Host keys: asyncssh ignores StrictHostKeyChecking and calls one hook for unknown and for
  changed keys alike. The hook checks known_hosts itself: a host with other keys on record
  is refused outright (changed key); a host with none is offered to the user with its
  SHA256 fingerprint and appended to known_hosts only when they accept.
- ssh_config: ~/.ssh/config plus the ssh_config of every running lab, so an alias, User,
  Port, IdentityFile and ProxyJump work as they do for `ssh`.
- Channels: sshd allows 10 sessions per connection (MaxSessions: shells, commands and
  subsystems; forwarded TCP channels do not count). SFTP and the command channel hold two
  for the connection's life; a semaphore keeps commands and streams within the other eight.
- The hot path (status polls) goes through one long-lived `sh` on the host, so a poll costs
  a systemctl exec, not a login shell start (NOTES.md: 85 to 400 ms on a busy .bashrc).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import shlex
import socket
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence

import asyncssh

from cockpit.config import HostConfig
from cockpit.lab.paths import ssh_configs
from cockpit.remote import http
from cockpit.remote.base import (ConnectionLost, FileStat, Host, HostError, HostKeyChanged, HostKeyUnknown,
                                 LineStream, RunResult, TrustPrompt)

MAX_SESSIONS = 10  # sshd's default MaxSessions
KEEPALIVE_INTERVAL = 2.0
KEEPALIVE_COUNT = 3  # a frozen host is declared dead after about 6 to 8 s
CONNECT_TIMEOUT = 10.0
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)


def config_paths() -> list[str]:
    """~/.ssh/config, the running labs' ssh_config, and any in $COCKPIT_SSH_CONFIG (colon-separated)."""
    extra = [Path(p).expanduser() for p in os.environ.get("COCKPIT_SSH_CONFIG", "").split(":") if p]
    paths = [p for p in (*extra, Path("~/.ssh/config").expanduser()) if p.is_file()]
    return [str(p) for p in paths + ssh_configs()]


def _known_hosts_files(options: asyncssh.SSHClientConnectionOptions) -> list[Path]:
    files = options.known_hosts
    if isinstance(files, (str, Path)):
        files = [files]
    if not files:
        files = [Path("~/.ssh/known_hosts").expanduser()]
    return [Path(str(f)).expanduser() for f in files if isinstance(f, (str, Path))]


def _host_patterns(host: str, port: int) -> list[str]:
    return [host if port == 22 else f"[{host}]:{port}"]


def _has_entry(files: list[Path], names: list[str], port: int) -> bool:
    for f in files:
        try:
            known = asyncssh.read_known_hosts(str(f))
        except (OSError, ValueError):
            continue
        for name in names:
            trusted, _, _, _, _, _, _ = known.match(name, "", port)
            if trusted:
                return True
    return False


class _Client(asyncssh.SSHClient):
    """Decides on keys that known_hosts did not vouch for; never trusts on its own."""

    def __init__(self, owner: SSHHost, files: list[Path], names: list[str], port: int) -> None:
        self.owner, self.files, self.names, self.port = owner, files, names, port

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        fingerprint = key.get_fingerprint("sha256")
        if _has_entry(self.files, self.names + [addr], port):
            self.owner._key_problem = HostKeyChanged(
                f"the host key of {self.owner.name} has CHANGED (now {fingerprint}); refusing to connect. "
                f"If the host was reinstalled, remove its old entry from {self.files[0]} yourself")
        else:
            self.owner._key_problem = HostKeyUnknown(self.owner.name, fingerprint)
            self.owner._unknown_key = (key, self.names[0], port)
        return False


class _ChannelLines(LineStream):
    def __init__(self, process: asyncssh.SSHClientProcess) -> None:
        self.process = process

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for line in self.process.stdout:
            yield line

    @property
    def returncode(self) -> int | None:
        return self.process.exit_status

    async def stderr_text(self) -> str:
        try:
            data = await asyncio.wait_for(self.process.stderr.read(), 1.0)
        except (asyncio.TimeoutError, asyncssh.Error, OSError):
            return ""
        return (data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)).strip()


class SSHHost(Host):
    def __init__(self, config: HostConfig, *, trust_prompt: TrustPrompt | None = None,
                 jump: SSHHost | None = None, on_state: Callable[[str, str | None], None] | None = None,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.config = config
        self.name = config.name
        self.trust_prompt = trust_prompt
        self.jump = jump
        self.on_state = on_state
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._connect_lock = asyncio.Lock()
        self._max_sessions = max_sessions
        self._sessions = asyncio.Semaphore(max_sessions - 2)  # SFTP and the command channel hold two
        self._query_lock = asyncio.Lock()
        self._query_proc: asyncssh.SSHClientProcess | None = None
        self._key_problem: HostError | None = None
        self._unknown_key: tuple[asyncssh.SSHKey, str, int] | None = None
        self._failures = 0
        self._next_attempt = 0.0
        self._last_error: HostError | None = None
        self.state = "disconnected"

    # -- connecting -----------------------------------------------------------------------

    def _set_state(self, state: str, detail: str | None = None) -> None:
        self.state = state
        if self.on_state:
            self.on_state(state, detail)

    def _options(self) -> asyncssh.SSHClientConnectionOptions:
        c = self.config
        kwargs: dict[str, Any] = dict(config=config_paths(), keepalive_interval=KEEPALIVE_INTERVAL,
                                      keepalive_count_max=KEEPALIVE_COUNT, connect_timeout=CONNECT_TIMEOUT)
        if c.user:
            kwargs["username"] = c.user
        if c.port:
            kwargs["port"] = c.port
        if c.identity_file:
            kwargs["client_keys"] = [str(Path(c.identity_file).expanduser())]
        return asyncssh.SSHClientConnectionOptions(host=c.hostname or c.ssh_alias, **kwargs)

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The shared connection, opened (or reopened with backoff) on demand."""
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        async with self._connect_lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            wait = self._next_attempt - time.monotonic()
            if wait > 0 and self._last_error is not None:
                raise self._last_error
            try:
                self._conn = await self._connect()
            except HostError as e:
                self._failures += 1
                if not isinstance(e, (HostKeyChanged, HostKeyUnknown)):
                    self._next_attempt = time.monotonic() + BACKOFF[min(self._failures, len(BACKOFF)) - 1]
                self._last_error = e
                self._set_state("error", str(e))
                raise
            self._failures, self._last_error = 0, None
            self._set_state("connected")
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        if self._failures:
            self._set_state("reconnecting", str(self._last_error) if self._last_error else None)
        else:
            self._set_state("connecting")
        options = self._options()
        target = self.config.hostname or self.config.ssh_alias
        port = options.port or 22
        names = [options.host_key_alias or options.host or target]
        files = _known_hosts_files(options)
        for attempt in range(2):
            self._key_problem, self._unknown_key = None, None
            tunnel = await self.jump.connection() if self.jump is not None else ()
            try:
                conn, _ = await asyncssh.create_connection(
                    lambda: _Client(self, files, names, port), target, options=options,
                    **({"tunnel": tunnel} if tunnel != () else {}))
                return conn
            except (asyncssh.HostKeyNotVerifiable, asyncssh.KeyExchangeFailed, ValueError) as e:
                problem = self._key_problem
                if isinstance(problem, HostKeyUnknown) and attempt == 0 and self.trust_prompt is not None:
                    if await self.trust_prompt(self.name, problem.fingerprint):
                        self._trust(files[0])
                        continue
                if problem is not None:
                    raise problem from None
                raise HostError(f"SSH to {self.name} failed: {e}") from None
            except asyncssh.PermissionDenied:
                user = options.username or os.environ.get("USER", "?")
                raise HostError(f"permission denied on {self.name}: no key of yours is accepted for {user}") from None
            except asyncssh.DisconnectError as e:
                raise ConnectionLost(f"{self.name} closed the connection: {e.reason}") from None
            except socket.gaierror:
                raise HostError(f"unknown host {self.name}: not an alias in your ssh_config and not a DNS name") from None
            except (asyncio.TimeoutError, TimeoutError):
                raise ConnectionLost(f"{self.name} did not answer within {CONNECT_TIMEOUT:.0f} s") from None
            except OSError as e:
                reason = "connection refused" if e.errno == errno.ECONNREFUSED else (e.strerror or str(e))
                raise ConnectionLost(f"cannot reach {self.name} ({target}:{port}): {reason}") from None
        raise HostError(f"SSH to {self.name} failed")

    def _trust(self, known_hosts: Path) -> None:
        assert self._unknown_key is not None
        key, name, port = self._unknown_key
        known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(known_hosts, "a") as f:
            f.write(f"{_host_patterns(name, port)[0]} {key.export_public_key('openssh').decode().strip()}\n")

    def _lost(self, error: BaseException) -> ConnectionLost:
        """Forget a dead connection so the next call reconnects."""
        if self._conn is not None:
            self._conn.abort()
        self._conn, self._sftp, self._query_proc = None, None, None
        self._sessions = asyncio.Semaphore(self._max_sessions - 2)  # the dead connection's slots go with it
        self._set_state("reconnecting", str(error))
        return ConnectionLost(f"lost the connection to {self.name}: {error or type(error).__name__}")

    # -- commands -------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = 30.0) -> RunResult:
        conn = await self.connection()
        async with self._sessions:
            try:
                result = await asyncio.wait_for(
                    conn.run(shlex.join(argv), input=input, encoding=None, check=False), timeout)
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError, ConnectionResetError) as e:
                raise self._lost(e) from None
            except asyncssh.ChannelOpenError as e:
                raise HostError(f"{self.name} refused a new channel: {e.reason}") from None
        rc = result.exit_status if result.exit_status is not None else 255
        return RunResult(tuple(argv), rc, bytes(result.stdout or b""), bytes(result.stderr or b""))

    async def query(self, argv: Sequence[str], *, timeout: float = 10.0) -> RunResult:
        async with self._query_lock:
            try:
                return await asyncio.wait_for(self._query(argv), timeout)
            except asyncio.TimeoutError:
                self._close_query()
                raise HostError(f"`{argv[0]}` on {self.name} did not answer within {timeout:.0f} s") from None
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError, ConnectionResetError,
                    asyncio.IncompleteReadError) as e:
                self._close_query()
                raise self._lost(e) from None

    async def _query(self, argv: Sequence[str]) -> RunResult:
        proc = self._query_proc
        if proc is None or proc.exit_status is not None or proc.is_closing():
            conn = await self.connection()
            proc = await conn.create_process("exec sh", encoding=None)
            self._query_proc = proc
        token = secrets.token_hex(6)
        marker = f"\x1e{token} ".encode()
        proc.stdin.write(f"{shlex.join(argv)} </dev/null 2>&1; printf '\\036{token} %s\\036\\n' \"$?\"\n".encode())
        data = await proc.stdout.readuntil(b"\x1e\n")
        head, _, tail = data.rpartition(marker)
        return RunResult(tuple(argv), int(tail[:-2] or b"255"), head, b"")

    def _close_query(self) -> None:
        if self._query_proc is not None:
            self._query_proc.close()
            self._query_proc = None

    @contextlib.asynccontextmanager
    async def stream(self, argv: Sequence[str]) -> AsyncIterator[LineStream]:
        conn = await self.connection()
        async with self._sessions:
            try:
                process = await conn.create_process(shlex.join(argv), encoding=None)  # never a pty
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, ConnectionResetError) as e:
                raise self._lost(e) from None
            try:
                yield _ChannelLines(process)
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, ConnectionResetError) as e:
                raise self._lost(e) from None
            finally:
                process.close()  # closing the channel ends the remote command (NOTES.md)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(process.wait_closed(), 2)

    # -- files ----------------------------------------------------------------------------

    async def sftp(self) -> asyncssh.SFTPClient:
        if self._sftp is None:
            conn = await self.connection()
            self._sftp = await conn.start_sftp_client()
        return self._sftp

    def _file_error(self, e: asyncssh.SFTPError, path: str, doing: str) -> HostError:
        if isinstance(e, asyncssh.SFTPNoSuchFile):
            return HostError(f"{path} does not exist on {self.name}")
        if isinstance(e, asyncssh.SFTPPermissionDenied):
            return HostError(f"permission denied {doing} {path} on {self.name}")
        return HostError(f"{doing} {path} on {self.name} failed: {e.reason}")

    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        sftp = await self.sftp()
        try:
            async with sftp.open(path, "rb") as f:
                return await f.read(limit)
        except asyncssh.SFTPError as e:
            raise self._file_error(e, path, "reading") from None
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError) as e:
            raise self._lost(e) from None

    async def stat(self, path: str) -> FileStat:
        sftp = await self.sftp()
        try:
            attrs = await sftp.stat(path)
        except asyncssh.SFTPError as e:
            raise self._file_error(e, path, "reading") from None
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError) as e:
            raise self._lost(e) from None
        return FileStat(attrs.size or 0, float(attrs.mtime or 0), attrs.permissions or 0, attrs.uid or 0)

    async def write_file_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        sftp = await self.sftp()
        directory, name = os.path.split(path)
        tmp = f"{directory}/.{name}.{secrets.token_hex(4)}.cockpit-tmp"
        try:
            async with sftp.open(tmp, "wb") as f:
                await f.write(data)
                await f.fsync()
            await sftp.chmod(tmp, mode)
            await sftp.posix_rename(tmp, path)  # plain SFTP rename refuses to replace a file
        except asyncssh.SFTPError as e:
            with contextlib.suppress(asyncssh.SFTPError):
                await sftp.remove(tmp)
            raise self._file_error(e, path, "writing") from None
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError) as e:
            raise self._lost(e) from None

    # -- network --------------------------------------------------------------------------

    async def http_request(self, method: str, host: str, port: int, path: str, *,
                           body: bytes | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
        conn = await self.connection()

        async def go() -> tuple[int, bytes]:
            reader, writer = await conn.open_connection(host, port)  # direct-tcpip: not a session
            try:
                return await http.exchange(reader, writer, method, host, port, path, body)
            finally:
                writer.close()
        try:
            return await asyncio.wait_for(go(), timeout)
        except asyncssh.ChannelOpenError as e:
            raise ConnectionRefusedError(f"{host}:{port} on {self.name}: {e.reason}") from None
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError) as e:
            raise self._lost(e) from None

    @contextlib.asynccontextmanager
    async def forward_port(self, host: str, port: int) -> AsyncIterator[int]:
        conn = await self.connection()
        listener = await conn.forward_local_port("127.0.0.1", 0, host, port)
        try:
            yield listener.get_port()
        finally:
            listener.close()
            with contextlib.suppress(Exception):
                await listener.wait_closed()

    async def close(self) -> None:
        self._close_query()
        self._sessions = asyncio.Semaphore(self._max_sessions - 2)
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.wait_closed(), 2)
        self._conn, self._sftp = None, None
        self._set_state("disconnected")
