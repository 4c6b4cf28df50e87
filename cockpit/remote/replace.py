"""The one way a file on a host is replaced: a reader sees the old text or the new, never half.

`install` (the only write `sudo -n` allows on many hosts) removes and rewrites its target in
place, so on a full disk it left a unit cut at 4,096 bytes. Both paths therefore do the same:

1. the new bytes go to a temp file in the target's own directory (SFTP with fsync as the
   account itself; with `sudo`, SFTP to /tmp and `sudo -n install` to the temp name), so the
   final step is a rename within one file system;
2. the temp file is read back and its size and SHA-256 compared with what was meant;
3. when the caller says what the target must still hold (`expect`), the file's lock is taken
   (below), the target read again and the write refused if it changed;
4. one rename(2) (SFTP posix-rename, or `sudo -n mv -f`) puts it in place, and the lock is let go.

The lock is `.NAME.lock.cockpit-tmp` beside the file, taken with `mv -n` (rename with
RENAME_NOREPLACE: of two cockpits, exactly one moves its empty file there; the other's stays
where it was, which is how it knows, and it waits up to LOCK_WAIT_S for its turn). Every cockpit
takes it around its re-check and rename, so two cockpits never both pass the re-check of one
file (before it, 8 of 10 races of two writers on a sudo host both reported success and one edit
was lost; the lock costs a write about 0.1 s as root and 0.2 s through sudo). What stays
best-effort: an editor that is no cockpit (vim, a config manager) still has the window of one
read and one rename; a lock whose cockpit died is taken for another's until it is a minute old,
then removed like any other dead write's temp file (and a writer stalled for over a minute
between its re-check and its rename may lose its lock the same way). It needs nothing sudo did
not already allow: `install`, `mv` and `rm`.

On any failure the target is untouched and the temp file removed; temp files that earlier
failures left (a dropped connection mid-write) are removed at the next write of that file.
A read-only host (`Host.read_only`) refuses before anything is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import posixpath
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from cockpit.remote.base import FileMissing, Host, HostError, RunResult
from cockpit.remote.sudo import explain_failure, privileged

TEMP_SUFFIX = ".cockpit-tmp"
STALE_MINUTES = 1  # a write takes well under a second: an older temp file is a dead write's
LOCK_WAIT_S = 3.0  # another cockpit holds a file's lock for one read and one rename
LOCK_RETRY_S = 0.1


class FileChanged(HostError):
    """The file on the host is no longer what the writer last read: someone else edited it."""


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # `expect=ANY`: replace whatever is there (the default)


def temp_path(path: str) -> str:
    directory, name = posixpath.split(path)
    return f"{directory}/.{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def lock_path(path: str) -> str:
    """Named like a temp file of `path`, so a dead cockpit's lock goes with its temp files."""
    directory, name = posixpath.split(path)
    return f"{directory}/.{name}.lock{TEMP_SUFFIX}"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _check(host: Host, sudo: bool, argv: list[str], timeout: float = 30) -> RunResult:
    argv = privileged(sudo, argv)
    result = await host.run(argv, timeout=timeout)
    if not result.ok:
        raise HostError(explain_failure(host.name, None, argv, result))
    return result


async def current(host: Host, path: str) -> bytes | None:
    """The file's bytes, or None when there is no such file."""
    try:
        return await host.read_file(path)
    except FileMissing:
        return None


async def _exists(host: Host, path: str) -> bool:
    """Asked with a command, not SFTP: a connection reset in the write window leaves the SFTP
    channel dead for one more call, and the lock is let go by a command in any case."""
    return (await host.run(["test", "-e", path], timeout=10)).ok


@contextlib.asynccontextmanager
async def locked(host: Host, path: str, sudo: bool) -> AsyncIterator[None]:
    """`path`'s lock held by this writer (see above), waiting LOCK_WAIT_S for another cockpit to
    let it go; FileChanged when it does not."""
    lock, mine = lock_path(path), temp_path(path)
    await _check(host, sudo, ["install", "-m", "0600", "--", "/dev/null", mine])
    try:
        await _take(host, sudo, mine, lock, path)
    except BaseException:
        with contextlib.suppress(HostError, OSError):
            await host.run(privileged(sudo, ["rm", "-f", "--", mine]), timeout=10)
        raise
    try:
        yield
    finally:
        with contextlib.suppress(HostError, OSError):  # gone with the connection: stale in a minute
            await host.run(privileged(sudo, ["rm", "-f", "--", lock]), timeout=10)


async def _take(host: Host, sudo: bool, mine: str, lock: str, path: str) -> None:
    """`mine` renamed onto `lock` unless that exists. Whether it moved is read from where `mine`
    is, not from mv's exit status (coreutils 9.1 says 0 when -n kept the target, later releases 1)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        tried = await host.run(privileged(sudo, ["mv", "-n", "--", mine, lock]), timeout=30)
        if not await _exists(host, mine):
            return
        if time.monotonic() > deadline:
            if await _exists(host, lock):
                raise FileChanged(
                    f"another cockpit is writing {path} on {host.name}: nothing was replaced; reload it and "
                    "make your change again"
                )
            raise HostError(explain_failure(host.name, None, tried.argv, tried))
        await asyncio.sleep(LOCK_RETRY_S)


async def remove_stale_temps(host: Host, path: str, sudo: bool = False) -> list[str]:
    """Temp files of `path` that an interrupted write left behind (older than a minute)."""
    directory, name = posixpath.split(path)
    found = await host.run(
        ["find", directory, "-maxdepth", "1", "-name", f".{name}.*{TEMP_SUFFIX}", "-mmin", f"+{STALE_MINUTES}"],
        timeout=30,
    )
    stale = [p for p in found.text.splitlines() if p.strip()]
    if stale:
        await _check(host, sudo, ["rm", "-f", "--", *stale])
    return stale


async def replace_file(
    host: Host,
    path: str,
    data: bytes,
    *,
    mode: int = 0o644,
    sudo: bool = False,
    expect: bytes | None | _Any = ANY,
    before_rename: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Replace `path` with `data` by the steps above. `expect`: the bytes the file must still
    hold (None: it must not exist); `before_rename` is a test's hook into the last window."""
    host.refuse_changes(f"{path} was not written")
    await remove_stale_temps(host, path, sudo)
    tmp = temp_path(path)
    try:
        if sudo:
            staging = f"/tmp/.cockpit-{secrets.token_hex(6)}"
            try:
                await host.write_file(staging, data, 0o600)
                await _check(host, True, ["install", "-m", f"{mode:04o}", "--", staging, tmp])
            finally:
                await host.remove(staging, missing_ok=True)
        else:
            await host.write_file(tmp, data, mode)
        written = await host.read_file(tmp, limit=len(data) + 1)
        if len(written) != len(data) or digest(written) != digest(data):
            raise HostError(
                f"writing {path} on {host.name} failed: the copy read back holds {len(written)} of "
                f"{len(data)} bytes (is the disk full?); the file was not replaced"
            )
        if before_rename is not None:
            await before_rename()
        if isinstance(expect, _Any):
            await _rename(host, sudo, tmp, path)
        else:
            async with locked(host, path, sudo):
                if await current(host, path) != expect:
                    raise FileChanged(
                        f"{path} changed on {host.name} while it was being written: nothing was "
                        "replaced; reload it and make your change again"
                    )
                await _rename(host, sudo, tmp, path)
    except BaseException:
        try:
            if sudo:
                await host.run(privileged(True, ["rm", "-f", "--", tmp]), timeout=10)
            else:
                await host.remove(tmp, missing_ok=True)
        except (HostError, OSError):
            pass  # the connection is gone: the next write of this file removes it
        raise


async def _rename(host: Host, sudo: bool, tmp: str, path: str) -> None:
    if sudo:
        await _check(host, True, ["mv", "-f", "--", tmp, path])
    else:
        await host.rename(tmp, path)
