"""What the cockpit needs from a host, whatever carries it (SSH, or the jump box itself).

Commands are argv lists everywhere above this layer; an implementation quotes them once at
its boundary. Streams are async context managers because leaving one must end the remote
process (cancelling a reader alone would leave `journalctl -f` running forever).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.textlines import complete_block

SshConfigs = Callable[[], Sequence[str]]  # the ssh_config files beyond the user's own, asked at each connect


class HostError(CockpitError):
    """A host could not be reached or refused us; the message names the host and the cause."""


class ReadOnlyError(CockpitError):
    """A change refused because the host is read-only here (`--read-only`, or `read_only = true`).
    Not a HostError: nothing failed on the host, and no caller may take it for a host's answer."""


class HostKeyUnknown(HostError):
    """The host's key is in no known_hosts file: the user may trust it after seeing it."""

    def __init__(self, host: str, fingerprint: str) -> None:
        super().__init__(f"the host key of {host} is not known ({fingerprint}); it was not trusted")
        self.host = host
        self.fingerprint = fingerprint


class HostKeyChanged(HostError):
    """known_hosts has a different key for this host: refused, with no way to click through."""


class ConnectionLost(HostError):
    """The connection dropped (or keepalive found the host dead); reconnecting may help."""


class FileMissing(HostError):
    """The path names no file on the host."""


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    mode: int
    uid: int


CHUNK = 1 << 18
CONNECT_TIMEOUT = 10.0  # how long a host may take to answer a login, whichever client logs in


class LineStream(abc.ABC):
    """Lines of a running remote command; closing it ends the command.

    Read in chunks of whatever has arrived and split once (`batches`): reading a flood line by
    line (`readuntil` per line) cost a fifth of the follower's CPU (issue 14's profile)."""

    @abc.abstractmethod
    async def read_chunk(self) -> bytes:
        """Whatever bytes have arrived (at most CHUNK), waiting for some; b"" at the end."""

    async def blocks(self) -> AsyncIterator[bytes]:
        """The complete lines that arrived together, as one bytes cut after their last newline
        (a journal follow decodes such a block whole); a last line without one at the end."""
        rest = b""
        while chunk := await self.read_chunk():
            block, rest = complete_block(rest, chunk)
            if block:
                yield block
        if rest:
            yield rest

    async def batches(self) -> AsyncIterator[list[bytes]]:
        """The complete lines that arrived together, without their newline; a last line
        without one is given at the end."""
        async for block in self.blocks():
            lines = block.split(b"\n")
            if block.endswith(b"\n"):
                lines.pop()
            yield lines

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for lines in self.batches():
            for line in lines:
                yield line

    @property
    @abc.abstractmethod
    def returncode(self) -> int | None: ...

    @abc.abstractmethod
    async def stderr_text(self) -> str: ...


# (host, "SHA256:..." fingerprint) -> whether the user trusts the key; the UI asks in a modal.
TrustPrompt = Callable[[str, str], Awaitable[bool]]


class Host(abc.ABC):
    """One host. Implementations share one connection among all their users."""

    name: str
    # Set by the pool that hands the host out (the session's --read-only, or the host's own
    # read_only = true): the parts that change a host each ask it (`refuse_changes`) themselves.
    read_only: bool = False
    # Set by the pool when the connection closes next (the session is closing): a stream's end
    # then leaves the command's ending to that close instead of waiting for it (SSHHost.stream).
    closing: bool = False

    @abc.abstractmethod
    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = 30.0) -> RunResult:
        """Run a command to completion (a fresh channel or process)."""

    @abc.abstractmethod
    async def query(self, argv: Sequence[str], *, timeout: float = 10.0) -> RunResult:
        """A read-only command on the hot path (status polls): no new remote shell per call.
        stderr is folded into stdout."""

    @abc.abstractmethod
    def stream(self, argv: Sequence[str]) -> AbstractAsyncContextManager[LineStream]:
        """Follow a command's stdout line by line; leaving the context ends the command."""

    @abc.abstractmethod
    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        """The file's bytes (FileMissing when there is none)."""

    @abc.abstractmethod
    async def stat(self, path: str) -> FileStat: ...

    @abc.abstractmethod
    async def realpath(self, path: str) -> str:
        """`path` with every symlink and `..` resolved, as the host sees it."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        """Create or truncate `path`, write, fsync, chmod: a building block of `replace_file`,
        never a way to change a file a reader may be looking at."""

    @abc.abstractmethod
    async def rename(self, source: str, target: str) -> None:
        """rename(2): atomically put `source` in place of `target`."""

    @abc.abstractmethod
    async def remove(self, path: str, *, missing_ok: bool = False) -> None: ...

    @abc.abstractmethod
    async def http_request(
        self, method: str, host: str, port: int, path: str, *, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        """An HTTP/1.1 request to host:port as the remote host sees it (its loopback included)."""

    def refuse_changes(self, what: str) -> None:
        """ReadOnlyError when the host is read-only here: called where a change is made (the write
        contract, the unit control, the load runner, root's ptrace), never left to the caller."""
        if self.read_only:
            raise ReadOnlyError(f"{self.name} is read-only here: {what}")

    forwarded_by: str | None = None  # what carried the last forward_port, for the run's record

    @abc.abstractmethod
    def forward_port(self, host: str, port: int) -> AbstractAsyncContextManager[int]:
        """A local port that reaches host:port as the remote host sees it."""

    @abc.abstractmethod
    async def close(self) -> None: ...
