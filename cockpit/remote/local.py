"""The Host protocol on the jump box itself, over asyncio subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from cockpit.remote import http
from cockpit.remote.base import CHUNK, FileMissing, FileStat, Host, HostError, LineStream, RunResult
from cockpit.timeouts import within

T = TypeVar("T")


class ProcessLines(LineStream):
    """A local process's stdout, read in chunks (`LineStream.batches`)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def read_chunk(self) -> bytes:
        assert self.proc.stdout is not None
        return await self.proc.stdout.read(CHUNK)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def stderr_text(self) -> str:
        if self.proc.stderr is None:
            return ""
        try:
            data = await within(self.proc.stderr.read(), 1.0)
        except asyncio.TimeoutError:
            return ""
        return data.decode("utf-8", "replace").strip()


def signal_child(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    """Signals a child not yet reported ended, by its pid. Not `proc.kill()`: Popen's
    `send_signal` polls first (waitpid with WNOHANG), which can reap a child that has just ended
    before asyncio's child watcher does; the watcher then prints "Unknown child process pid N,
    will report returncode 255" on stderr, under `cockpit status`'s one sentence. A child that
    has ended but is not reaped keeps its pid, so the signal cannot reach another process."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)


async def end_child(proc: asyncio.subprocess.Process, grace: float) -> None:
    """Terminates the child and waits for it; killed if it is still there `grace` s later."""
    if proc.returncode is None:
        signal_child(proc, signal.SIGTERM)
        try:
            await within(proc.wait(), grace)
        except asyncio.TimeoutError:
            signal_child(proc)
            await proc.wait()


async def spawn(argv: Sequence[str], **kwargs: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec`, which a cancel does not interrupt halfway. Cancelled
    while it waits for the child's pipes, asyncio (3.11) closes the half-made transport with
    `Popen.poll()`, which can reap a child that has already ended before the child watcher's
    thread does; the watcher then prints "Unknown child process pid N" on stderr, under
    `cockpit status`'s one sentence. A cancel that comes meanwhile waits for the process, ends
    it and is raised then."""
    making = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **kwargs))
    try:
        return await asyncio.shield(making)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            proc = await making
            signal_child(proc)
            await proc.wait()
        raise


async def communicate(
    proc: asyncio.subprocess.Process, input: bytes | None, timeout: float | None, what: str
) -> tuple[bytes, bytes]:
    """`proc`'s stdout and stderr once it ends; killed (never left running) when it takes
    longer than `timeout` or the caller is cancelled."""
    try:
        return await within(proc.communicate(input), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError) as e:
        signal_child(proc)
        await proc.wait()
        if isinstance(e, asyncio.CancelledError):
            raise
        raise HostError(f"{what} did not finish within {timeout:.0f} s") from None


@contextlib.asynccontextmanager
async def process_lines(argv: Sequence[str]) -> AsyncIterator[LineStream]:
    """A local process's stdout as it arrives; leaving ends the process (terminated, killed if
    it is still there 2 s later)."""
    proc = await spawn(
        argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )
    try:
        yield ProcessLines(proc)
    finally:
        await end_child(proc, 2)


class LocalHost(Host):
    def __init__(self, name: str = "localhost") -> None:
        self.name = name

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = 30.0) -> RunResult:
        try:
            proc = await spawn(
                argv,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError:
            return RunResult(tuple(argv), 127, b"", f"{argv[0]}: command not found".encode())
        out, err = await communicate(proc, input, timeout, f"`{argv[0]}` on {self.name}")
        return RunResult(tuple(argv), proc.returncode or 0, out, err)

    async def query(self, argv: Sequence[str], *, timeout: float = 10.0) -> RunResult:
        result = await self.run(argv, timeout=timeout)
        return RunResult(result.argv, result.returncode, result.stdout + result.stderr, b"")

    def stream(self, argv: Sequence[str]) -> contextlib.AbstractAsyncContextManager[LineStream]:
        return process_lines(argv)

    async def _file_op(self, path: str, doing: str, op: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(op)
        except FileNotFoundError:
            raise FileMissing(f"{path} does not exist on {self.name}") from None
        except PermissionError:
            raise HostError(f"permission denied {doing} {path} on {self.name}") from None
        except OSError as e:
            raise HostError(f"{doing} {path} on {self.name} failed: {(e.strerror or str(e)).lower()}") from None

    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        def read() -> bytes:
            with open(path, "rb") as f:
                return f.read(limit)

        return await self._file_op(path, "reading", read)

    async def stat(self, path: str) -> FileStat:
        st = await self._file_op(path, "reading", lambda: os.stat(path))
        return FileStat(st.st_size, st.st_mtime, st.st_mode, st.st_uid)

    async def realpath(self, path: str) -> str:
        return await self._file_op(path, "reading", lambda: os.path.realpath(path, strict=True))

    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        def write() -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(path, mode)

        await self._file_op(path, "writing", write)

    async def rename(self, source: str, target: str) -> None:
        await self._file_op(target, "writing", lambda: os.replace(source, target))

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        try:
            await self._file_op(path, "removing", lambda: os.unlink(path))
        except FileMissing:
            if not missing_ok:
                raise

    async def http_request(
        self, method: str, host: str, port: int, path: str, *, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        async def go() -> tuple[int, bytes]:
            reader, writer = await asyncio.open_connection(host, port)
            try:
                return await http.exchange(reader, writer, method, host, port, path, body)
            finally:
                writer.close()

        return await within(go(), timeout)

    @contextlib.asynccontextmanager
    async def forward_port(self, host: str, port: int) -> AsyncIterator[int]:
        yield port  # already local

    async def close(self) -> None:
        return None
