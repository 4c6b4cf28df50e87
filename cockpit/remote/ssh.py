"""The Host protocol over one shared asyncssh connection per host.

What asyncssh does not do for us, and why it is here:
- Host keys, as strictly as OpenSSH checks them. asyncssh reads only the user's known_hosts,
  turns checking off altogether for `UserKnownHostsFile none`, and calls one hook for
  unknown and changed keys alike. So the cockpit reads the user's files and the global ones
  (`UserKnownHostsFile`, `GlobalKnownHostsFile`, OpenSSH's defaults when unset) itself and
  hands asyncssh the keys; no config setting switches checking off. A host that any of those
  files knows under another key is refused outright (changed key); a host none of them knows
  is offered to the user with its SHA256 fingerprint, and appended to the first user file only
  when they accept. A declined key is not offered again while the process runs.
- ssh_config: ~/.ssh/config plus the ssh_config of every running lab, so an alias, User,
  Port, IdentityFile and ProxyJump work as they do for `ssh`.
- Channels: sshd allows 10 sessions per connection (MaxSessions: shells, commands and
  subsystems; forwarded TCP channels do not count). SFTP and the command channel hold two
  for the connection's life; a semaphore keeps commands and streams within the other eight.
  sshd counts a session until its command has exited, which on a busy host comes after the
  channel has closed both ways: a refused open is tried again for a few seconds (the command
  never started, so trying again is safe).
- The hot path (status polls) goes through one long-lived `sh` on the host, so a poll costs
  a systemctl exec, not a login shell start (85 to 400 ms on a busy .bashrc, docs/facts.md).
- Failures: every error of the transport (asyncssh's, and any OSError of its socket, such
  as the ConnectionAbortedError of a reset) becomes a ConnectionLost and the connection is
  forgotten, so the next call reconnects; a dead SFTP client is dropped on its first error.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import posixpath
import secrets
import shlex
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from cockpit.config import HostConfig
from cockpit.remote import http, openssh
from cockpit.remote.base import (
    CHUNK,
    CONNECT_TIMEOUT,
    ConnectionLost,
    FileMissing,
    FileStat,
    Host,
    HostError,
    HostKeyChanged,
    HostKeyUnknown,
    LineStream,
    RunResult,
    SshConfigs,
    TrustPrompt,
)
from cockpit.remote.ssh_client import config_paths
from cockpit.remote.sudo import disk_trouble
from cockpit.timeouts import within

MAX_SESSIONS = 10  # sshd's default MaxSessions
KEEPALIVE_INTERVAL = 2.0
KEEPALIVE_COUNT = 3  # a frozen host is declared dead after about 6 to 8 s
SFTP_TIMEOUT = 30.0
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)
REFUSED_RETRY_S = (0.1, 0.2, 0.4, 0.8, 1.6)  # pauses before opening a refused channel again
CHANNEL_CLOSE_WAIT_S = 2.0  # how long a stream's end waits for sshd to close its channel too
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")  # OpenSSH's defaults
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
# What a broken transport raises: asyncssh's own errors and the socket's (a reset is a
# ConnectionResetError or, after `ss -K`, a ConnectionAbortedError); EOFError covers a
# stream cut mid-read (asyncio.IncompleteReadError).
TRANSPORT_ERRORS = (asyncssh.Error, OSError, EOFError)

T = TypeVar("T")
# ssh_config files beyond the user's, asked for at each connect: a lab brought up after the
# cockpit started is reachable without a restart.


# AES-GCM first, then asyncssh's own order: asyncssh does chacha20-poly1305 in Python around a
# new cipher object per packet, and AES-GCM in one call of `cryptography`'s AEAD. Following
# 500,000 entries cost 20% less CPU per entry, and a 256-stream load run through a forward read
# 0.92 of the raw socket against 0.69 (issue 14's transport benchmark). A `Ciphers` line in the
# user's ssh_config is kept as it is.
PREFERRED_CIPHERS = "^aes128-gcm@openssh.com"


def _as_bytes(data: bytes | str | None) -> bytes:
    """A process's output as bytes (asyncssh types it `bytes | str` whatever the encoding asked)."""
    return data.encode() if isinstance(data, str) else bytes(data or b"")


def _append_known_host(known_hosts: Path, line: str) -> None:
    known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(known_hosts, "a") as f:
        f.write(line + "\n")


def _expand(name: str, user: str | None) -> Path:
    home = str(Path("~").expanduser())
    return Path(name.replace("%d", home).replace("%u", user or os.environ.get("USER", ""))).expanduser()


def known_hosts_files(config: Any, user: str | None = None) -> tuple[list[Path], list[Path]]:
    """(user files, global files) as OpenSSH would read them for this host; `none` is an empty list."""

    def files(option: str, default: tuple[str, ...]) -> list[Path]:
        value = config.get(option, None)
        names = default if value is None else [v for v in value if v.lower() != "none"]
        return [_expand(n, user) for n in names]

    return files("UserKnownHostsFile", USER_KNOWN_HOSTS), files("GlobalKnownHostsFile", GLOBAL_KNOWN_HOSTS)


def load_known_hosts(files: Sequence[Path], extra: str = "") -> asyncssh.SSHKnownHosts:
    """Every readable file's entries in one set; a line asyncssh cannot read is skipped, as
    OpenSSH skips it, instead of voiding the whole file."""
    texts = [extra]
    for f in files:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            texts.append(f.read_text())
    text = "\n".join(texts)
    try:
        return asyncssh.import_known_hosts(text)
    except ValueError:
        good = []
        for line in text.splitlines():
            try:
                asyncssh.import_known_hosts(line)
            except ValueError:
                continue
            good.append(line)
        return asyncssh.import_known_hosts("\n".join(good))


def _pattern(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class _Client(asyncssh.SSHClient):
    """Decides on keys that no known_hosts file vouched for; never trusts on its own."""

    def __init__(
        self, owner: SSHHost, known: asyncssh.SSHKnownHosts, files: list[Path], names: list[str], port: int
    ) -> None:
        self.owner, self.known, self.files, self.names, self.port = owner, known, files, names, port

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        fingerprint = key.get_fingerprint("sha256")
        matches = [self.known.match(name, addr, None if port == 22 else port) for name in self.names]
        recorded = any(m[0] or m[1] for m in matches)  # host keys or CA keys on record for it
        if recorded:
            where = ", ".join(str(f) for f in self.files if f.is_file()) or "your known_hosts"
            self.owner._key_problem = HostKeyChanged(
                f"the host key of {self.owner.name} has CHANGED (now {fingerprint}); refusing to connect. "
                f"If the host was reinstalled, remove its old entry from {where} yourself"
            )
        else:
            self.owner._key_problem = HostKeyUnknown(self.owner.name, fingerprint)
            self.owner._unknown_key = (key, self.names[0], port)
        return False


async def _release_when_closed(process: asyncssh.SSHClientProcess, slot: asyncio.Semaphore, wait_s: float) -> None:
    """Give the session slot back once sshd has closed the channel too. A close still under way
    after `wait_s` (a busy host) keeps its slot until it completes: given back at once, the next
    channel made the eleventh sshd holds, and MaxSessions refused it."""
    closing = asyncio.ensure_future(process.wait_closed())

    def done(task: asyncio.Future[None]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: a connection lost meanwhile closed the channel too
        slot.release()

    try:
        await asyncio.wait({closing}, timeout=wait_s)
    finally:
        closing.add_done_callback(done)


async def _opened(open_channel: Callable[[], Awaitable[T]]) -> T:
    """Open a channel, trying again while sshd refuses it: a session whose channel has closed
    both ways still counts against MaxSessions until its command exits, which a busy host may
    take a second over (ci: a follower's journalctl outlived its channel and the next command's
    open failed)."""
    for pause in REFUSED_RETRY_S:
        try:
            return await open_channel()
        except asyncssh.ChannelOpenError:
            await asyncio.sleep(pause)
    return await open_channel()


class _ChannelLines(LineStream):
    def __init__(self, owner: SSHHost, conn: asyncssh.SSHClientConnection, process: asyncssh.SSHClientProcess) -> None:
        self.owner, self.conn, self.process = owner, conn, process

    async def read_chunk(self) -> bytes:
        with self.owner._transport(self.conn):
            data: bytes = await self.process.stdout.read(CHUNK)
        return data

    @property
    def returncode(self) -> int | None:
        return self.process.exit_status

    async def stderr_text(self) -> str:
        try:
            data = await within(self.process.stderr.read(), 1.0)
        except (asyncio.TimeoutError, *TRANSPORT_ERRORS):
            return ""
        return (data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)).strip()


class SSHHost(Host):
    def __init__(
        self,
        config: HostConfig,
        *,
        trust_prompt: TrustPrompt | None = None,
        jump: SSHHost | None = None,
        on_state: Callable[[str, str | None], None] | None = None,
        max_sessions: int = MAX_SESSIONS,
        ssh_configs: SshConfigs = lambda: (),
    ) -> None:
        self.config = config
        self.ssh_configs = ssh_configs
        self.name = config.name
        self.trust_prompt = trust_prompt
        self.jump = jump
        self.on_state = on_state
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_lock = asyncio.Lock()
        self._connect_lock = asyncio.Lock()
        self._max_sessions = max_sessions
        self._sessions = asyncio.Semaphore(max_sessions - 2)  # SFTP and the command channel hold two
        self._query_lock = asyncio.Lock()
        self._query_proc: asyncssh.SSHClientProcess | None = None
        self._key_problem: HostError | None = None
        self._unknown_key: tuple[asyncssh.SSHKey, str, int] | None = None
        self._declined: set[str] = set()  # fingerprints the user said no to: never asked again
        self._session_keys: list[str] = []  # trusted for this process where no user file can keep them
        self._failures = 0
        self._next_attempt = 0.0
        self._last_error: HostError | None = None
        self._connected_once = False
        self.state = "disconnected"

    # -- connecting -----------------------------------------------------------------------

    def _set_state(self, state: str, detail: str | None = None) -> None:
        self.state = state
        if self.on_state:
            self.on_state(state, detail)

    def _options(self, **extra: Any) -> asyncssh.SSHClientConnectionOptions:
        """The connection's options, read from the ssh_config files now. A file found and gone
        before asyncssh opened it (a lab brought down meanwhile takes its ssh_config with it)
        and one asyncssh cannot parse are a sentence, never the parser's traceback."""
        try:
            return self._read_options(**extra)
        except OSError as e:
            which = f" {e.filename}" if e.filename else ""
            raise HostError(f"cannot read the ssh_config{which} for {self.name}: {e.strerror or e}") from None
        except ValueError as e:  # asyncssh's ConfigParseError (file and line), or undecodable text
            raise HostError(f"cannot read the ssh_config for {self.name}: {e}") from None

    def _read_options(self, **extra: Any) -> asyncssh.SSHClientConnectionOptions:
        c = self.config
        kwargs: dict[str, Any] = dict(
            config=config_paths(self.ssh_configs()),
            keepalive_interval=KEEPALIVE_INTERVAL,
            keepalive_count_max=KEEPALIVE_COUNT,
            connect_timeout=CONNECT_TIMEOUT,
        )
        if c.user:
            kwargs["username"] = c.user
        if c.port:
            kwargs["port"] = c.port
        if c.identity_file:
            kwargs["client_keys"] = [str(Path(c.identity_file).expanduser())]
        options = asyncssh.SSHClientConnectionOptions(host=c.destination, **kwargs, **extra)
        if list(options.encryption_algs) == get_default_encryption_algs():  # no `Ciphers` in ssh_config
            options = asyncssh.SSHClientConnectionOptions(
                host=c.destination, encryption_algs=PREFERRED_CIPHERS, **kwargs, **extra
            )
        return options

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
                self._next_attempt = time.monotonic() + BACKOFF[min(self._failures, len(BACKOFF)) - 1]
                self._last_error = e
                self._set_state("error", str(e))
                raise
            self._failures, self._last_error, self._connected_once = 0, None, True
            self._set_state("connected")
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        if self._failures or self._connected_once:  # after a loss it is a reconnect, whatever the count
            self._set_state("reconnecting", str(self._last_error) if self._last_error else None)
        else:
            self._set_state("connecting")
        base = self._options()
        target = self.config.destination
        port = base.port or 22
        names = [base.host_key_alias or base.host or target]
        user_files, global_files = known_hosts_files(base.config, base.username)
        for attempt in range(2):
            known = load_known_hosts([*user_files, *global_files], "\n".join(self._session_keys))
            options = self._options(known_hosts=known)  # checking stays on whatever ssh_config says
            self._key_problem, self._unknown_key = None, None
            tunnel = await self.jump.connection() if self.jump is not None else None
            client = functools.partial(_Client, self, known, [*user_files, *global_files], names, port)
            try:
                if tunnel is not None:
                    conn, _ = await asyncssh.create_connection(client, target, options=options, tunnel=tunnel)
                else:
                    conn, _ = await asyncssh.create_connection(client, target, options=options)
                return conn
            except (asyncssh.HostKeyNotVerifiable, asyncssh.KeyExchangeFailed, ValueError) as e:
                problem = self._key_problem
                if isinstance(problem, HostKeyUnknown) and attempt == 0 and await self._ask_trust(problem, user_files):
                    continue
                if problem is not None:
                    raise problem from None
                raise HostError(f"SSH to {self.name} failed: {e}") from None
            except asyncssh.PermissionDenied:
                user = options.username or os.environ.get("USER", "?")
                raise HostError(f"permission denied on {self.name}: no key of yours is accepted for {user}") from None
            except asyncssh.ChannelOpenError as e:  # through a jump host that cannot reach it
                via = self.jump.name if self.jump is not None else "the jump host"
                raise ConnectionLost(f"cannot reach {self.name} through {via}: {e.reason}") from None
            except asyncssh.ConnectionLost as e:
                raise ConnectionLost(
                    f"the connection to {self.name} dropped while connecting: {e.reason or 'no answer'}"
                ) from None
            except asyncssh.DisconnectError as e:
                raise ConnectionLost(f"{self.name} closed the connection: {e.reason}") from None
            except socket.gaierror:
                raise HostError(
                    f"unknown host {self.name}: not an alias in your ssh_config and not a DNS name"
                ) from None
            except (asyncio.TimeoutError, TimeoutError):
                raise ConnectionLost(f"{self.name} did not answer within {CONNECT_TIMEOUT:.0f} s") from None
            except OSError as e:
                reason = {
                    errno.ECONNREFUSED: "connection refused",
                    errno.EHOSTUNREACH: "no route to host",
                    errno.ENETUNREACH: "network unreachable",
                }.get(e.errno or 0, e.strerror or str(e))
                raise ConnectionLost(f"cannot reach {self.name} ({target}:{port}): {reason}") from None
        raise HostError(f"SSH to {self.name} failed")

    async def _ask_trust(self, problem: HostKeyUnknown, user_files: list[Path]) -> bool:
        """Offer an unknown key once; a key the user declined is refused from then on."""
        if self.trust_prompt is None or problem.fingerprint in self._declined:
            return False
        if not await self.trust_prompt(self.name, problem.fingerprint):
            self._declined.add(problem.fingerprint)
            return False
        assert self._unknown_key is not None
        key, name, port = self._unknown_key
        line = f"{_pattern(name, port)} {key.export_public_key('openssh').decode().strip()}"
        if not user_files:  # `UserKnownHostsFile none`: nowhere to keep it but this process
            self._session_keys.append(line)
            return True
        await asyncio.to_thread(_append_known_host, user_files[0], line)
        return True

    def _lost(self, error: BaseException, conn: asyncssh.SSHClientConnection | None) -> ConnectionLost:
        """Forget a dead connection so the next call reconnects; a newer one that another call
        opened meanwhile is kept."""
        if conn is not None and conn is self._conn:
            conn.abort()
            self._conn, self._sftp, self._query_proc = None, None, None
            self._sessions = asyncio.Semaphore(self._max_sessions - 2)  # the dead connection's slots go with it
            self._set_state("reconnecting", str(error) or type(error).__name__)
        return ConnectionLost(f"lost the connection to {self.name}: {error or type(error).__name__}")

    @contextlib.contextmanager
    def _transport(self, conn: asyncssh.SSHClientConnection) -> Iterator[None]:
        """Every failure of the transport inside becomes one ConnectionLost (and a reconnect)."""
        try:
            yield
        except asyncssh.ChannelOpenError as e:
            raise HostError(f"{self.name} refused a new channel: {e.reason}") from None
        except (asyncio.TimeoutError, TimeoutError):
            raise
        except TRANSPORT_ERRORS as e:
            raise self._lost(e, conn) from None

    # -- commands -------------------------------------------------------------------------

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = 30.0) -> RunResult:
        conn = await self.connection()
        async with self._sessions:
            try:
                with self._transport(conn):
                    command = shlex.join(argv)
                    result = await within(
                        _opened(lambda: conn.run(command, input=input, encoding=None, check=False)), timeout
                    )
            except (asyncio.TimeoutError, TimeoutError):
                raise HostError(f"`{argv[0]}` on {self.name} did not finish within {timeout:.0f} s") from None
        rc = result.exit_status if result.exit_status is not None else 255
        return RunResult(tuple(argv), rc, _as_bytes(result.stdout), _as_bytes(result.stderr))

    async def query(self, argv: Sequence[str], *, timeout: float = 10.0) -> RunResult:
        async with self._query_lock:
            try:
                return await within(self._query(argv), timeout)
            except (asyncio.TimeoutError, TimeoutError):
                self._close_query()
                raise HostError(f"`{argv[0]}` on {self.name} did not answer within {timeout:.0f} s") from None
            except HostError:
                self._close_query()
                raise

    async def _query(self, argv: Sequence[str]) -> RunResult:
        conn = await self.connection()
        with self._transport(conn):
            proc = self._query_proc
            if proc is None or proc.exit_status is not None or proc.is_closing():
                proc = await _opened(lambda: conn.create_process("exec sh", encoding=None))
                self._query_proc = proc
            # The end marker holds a token made for this call, which the command (its stdin is
            # /dev/null) cannot see: no output, whatever bytes it holds, can end the frame early.
            token = secrets.token_hex(8)
            end = f"\x1e{token}:".encode()
            proc.stdin.write(f"{shlex.join(argv)} </dev/null 2>&1; printf '\\036{token}:%s\\n' \"$?\"\n".encode())
            data = await proc.stdout.readuntil(end)
            status = await proc.stdout.readuntil(b"\n")
        try:
            rc = int(status.strip() or b"255")
        except ValueError:
            rc = 255
        return RunResult(tuple(argv), rc, data[: -len(end)], b"")

    def _close_query(self) -> None:
        if self._query_proc is not None:
            self._query_proc.close()
            self._query_proc = None

    @contextlib.asynccontextmanager
    async def stream(self, argv: Sequence[str]) -> AsyncIterator[LineStream]:
        conn = await self.connection()
        sessions = self._sessions
        await sessions.acquire()
        try:
            with self._transport(conn):
                command = shlex.join(argv)
                process = await _opened(lambda: conn.create_process(command, encoding=None))  # never a pty
        except BaseException:
            sessions.release()
            raise
        try:
            yield _ChannelLines(self, conn, process)
        finally:
            process.close()  # closing the channel ends the remote command (docs/facts.md)
            await _release_when_closed(process, sessions, 0.0 if self.closing else CHANNEL_CLOSE_WAIT_S)

    # -- files ----------------------------------------------------------------------------

    async def _sftp_client(self) -> tuple[asyncssh.SFTPClient, asyncssh.SSHClientConnection]:
        conn = await self.connection()
        async with self._sftp_lock:
            if self._sftp is None or conn is not self._conn:
                with self._transport(conn):
                    self._sftp = await _opened(conn.start_sftp_client)
            return self._sftp, conn

    def _drop_sftp(self, sftp: asyncssh.SFTPClient) -> None:
        if self._sftp is sftp:
            self._sftp = None
            sftp.exit()

    async def _file_op(self, path: str, doing: str, op: Callable[[asyncssh.SFTPClient], Awaitable[T]]) -> T:
        """One SFTP operation: its answers (no such file, permission denied) as HostErrors, and
        any other failure drops the client, so the next operation starts a fresh one."""
        sftp, conn = await self._sftp_client()
        try:
            with self._transport(conn):
                try:
                    return await within(op(sftp), SFTP_TIMEOUT)
                except asyncssh.SFTPNoSuchFile:
                    raise FileMissing(f"{path} does not exist on {self.name}") from None
                except asyncssh.SFTPPermissionDenied:
                    raise HostError(f"permission denied {doing} {path} on {self.name}") from None
                except (asyncssh.SFTPConnectionLost, asyncssh.SFTPNoConnection) as e:  # "Connection not open"
                    self._drop_sftp(sftp)
                    raise self._lost(e, conn) from None
                except asyncssh.SFTPError as e:
                    self._drop_sftp(sftp)
                    reason = await self._why(path, doing, e.reason)
                    raise HostError(f"{doing} {path} on {self.name} failed: {reason}") from None
        except (asyncio.TimeoutError, TimeoutError):
            self._drop_sftp(sftp)
            raise HostError(f"{doing} {path} on {self.name} got no answer within {SFTP_TIMEOUT:.0f} s") from None
        except ConnectionLost:
            self._drop_sftp(sftp)
            raise

    async def _why(self, path: str, doing: str, reason: str) -> str:
        """SFTP says only "Failure" for a full or read-only file system: ask the host which."""
        if doing != "writing" or reason.lower() not in ("failure", ""):
            return reason
        directory = posixpath.dirname(path) or "/"
        try:
            result = await self.run(
                ["sh", "-c", 'df -Pk -- "$1" | tail -n 1; findmnt -no OPTIONS -T "$1"', "sh", directory], timeout=10
            )
        except HostError:
            return reason
        lines = result.text.splitlines()
        df = lines[0].split() if lines else []
        if len(lines) > 1 and "ro" in lines[1].strip().split(","):
            return f"{disk_trouble('read-only file system')} ({directory})"
        if len(df) >= 4 and df[3] == "0":
            return f"{disk_trouble('no space left on device')} ({directory} is full)"
        return reason

    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        async def op(sftp: asyncssh.SFTPClient) -> bytes:
            async with sftp.open(path, "rb") as f:
                # Exactly the file's size: asking for more runs parallel reads past its end, and
                # a read cancelled then left asyncssh tasks failing "End of file" unretrieved.
                size = (await f.stat()).size
                data: bytes = await f.read(min(size, limit) if size else limit)
                return data

        return await self._file_op(path, "reading", op)

    async def stat(self, path: str) -> FileStat:
        attrs = await self._file_op(path, "reading", lambda sftp: sftp.stat(path))
        return FileStat(attrs.size or 0, float(attrs.mtime or 0), attrs.permissions or 0, attrs.uid or 0)

    async def realpath(self, path: str) -> str:
        async def op(sftp: asyncssh.SFTPClient) -> str:
            resolved = await sftp.realpath(path)
            return resolved.decode() if isinstance(resolved, bytes) else str(resolved)

        return await self._file_op(path, "reading", op)

    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        async def op(sftp: asyncssh.SFTPClient) -> None:
            async with sftp.open(path, "wb") as f:
                await f.write(data)
                await f.fsync()
            await sftp.chmod(path, mode)

        await self._file_op(path, "writing", op)

    async def rename(self, source: str, target: str) -> None:
        await self._file_op(target, "writing", lambda sftp: sftp.posix_rename(source, target))

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        try:
            await self._file_op(path, "removing", lambda sftp: sftp.remove(path))
        except FileMissing:
            if not missing_ok:
                raise

    # -- network --------------------------------------------------------------------------

    async def http_request(
        self, method: str, host: str, port: int, path: str, *, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        conn = await self.connection()

        async def go() -> tuple[int, bytes]:
            try:
                reader, writer = await conn.open_connection(host, port)  # direct-tcpip: not a session
            except asyncssh.ChannelOpenError as e:
                raise ConnectionRefusedError(f"{host}:{port} on {self.name}: {e.reason}") from None
            try:
                return await http.exchange(reader, writer, method, host, port, path, body)
            finally:
                writer.close()

        try:
            return await within(go(), timeout)
        except asyncssh.Error as e:  # the connection under the request failed, not the server
            raise self._lost(e, conn) from None

    @contextlib.asynccontextmanager
    async def forward_port(self, host: str, port: int) -> AsyncIterator[int]:
        """Through the user's OpenSSH where it comes up (a load run at 256 streams reads the
        server's true rate only so: cockpit.remote.openssh), else through this connection."""
        jump = self.jump.config if self.jump is not None else None
        stack = contextlib.AsyncExitStack()
        try:  # only the set-up falls back: a failure of the caller's work is the caller's
            files = config_paths(self.ssh_configs())
            local = await stack.enter_async_context(openssh.forward(self.config, files, host, port, jump))
            self.forwarded_by = "openssh"
        except HostError as e:
            self.forwarded_by = f"asyncssh ({e})"
            local = await stack.enter_async_context(self._asyncssh_forward(host, port))
        async with stack:
            yield local

    @contextlib.asynccontextmanager
    async def _asyncssh_forward(self, host: str, port: int) -> AsyncIterator[int]:
        conn = await self.connection()
        with self._transport(conn):
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
                await within(self._conn.wait_closed(), 2)
        self._conn, self._sftp = None, None
        self._set_state("disconnected")
