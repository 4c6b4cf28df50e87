"""The one way a file on a host is replaced: a reader sees the old text or the new, never half.

`install` (the only write `sudo -n` allows on many hosts) removes and rewrites its target in
place, so on a full disk it left a unit cut at 4,096 bytes. Both paths therefore do the same:

1. the new bytes go to a temp file in the target's own directory (SFTP with fsync as the
   account itself; with `sudo`, SFTP to /tmp and `sudo -n install` to the temp name), so the
   final step is a rename within one file system;
2. the temp file is read back and its size and SHA-256 compared with what was meant;
3. when the caller says what the target must still hold (`expect`), it is read again right
   before the rename and the write is refused if it changed (systemd has no lock, so this
   is best-effort: the window that is left is one read and one rename);
4. one rename(2) (SFTP posix-rename, or `sudo -n mv -f`) puts it in place.

On any failure the target is untouched and the temp file removed; temp files that earlier
failures left (a dropped connection mid-write) are removed at the next write of that file.
A read-only host (`Host.read_only`) refuses before anything is sent.
"""

from __future__ import annotations

import hashlib
import posixpath
import secrets
from collections.abc import Awaitable, Callable

from cockpit.remote.base import FileMissing, Host, HostError, RunResult
from cockpit.remote.sudo import explain_failure, privileged

TEMP_SUFFIX = ".cockpit-tmp"
STALE_MINUTES = 1  # a write takes well under a second: an older temp file is a dead write's


class FileChanged(HostError):
    """The file on the host is no longer what the writer last read: someone else edited it."""


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # `expect=ANY`: replace whatever is there (the default)


def temp_path(path: str) -> str:
    directory, name = posixpath.split(path)
    return f"{directory}/.{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


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
        if not isinstance(expect, _Any):
            now = await current(host, path)
            if now != expect:
                raise FileChanged(
                    f"{path} changed on {host.name} while it was being written: nothing was "
                    "replaced; reload it and make your change again"
                )
        if sudo:
            await _check(host, True, ["mv", "-f", "--", tmp, path])
        else:
            await host.rename(tmp, path)
    except BaseException:
        try:
            if sudo:
                await host.run(privileged(True, ["rm", "-f", "--", tmp]), timeout=10)
            else:
                await host.remove(tmp, missing_ok=True)
        except (HostError, OSError):
            pass  # the connection is gone: the next write of this file removes it
        raise
