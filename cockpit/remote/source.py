"""Source files of a host, as a traceback names them, cached per host, path and mtime.

A stat (under a millisecond over SFTP) decides whether the cached copy still holds; the read
(tens of milliseconds for server_args.py) happens once per version of the file. A file changed
after the crashed process started means the package was upgraded since: the lines shown may
not be the lines that ran, and the user is told so.

A traceback is text anyone who can write to the journal can forge, so the file it names is
opened only when it lies under the service's Python roots (`SourceRoots`): the directories
its interpreter imports from and its working directory, with symlinks resolved on the host.
Any other file is opened only when the user asks for that one file (`roots=None`).
"""

from __future__ import annotations

import posixpath
import time
from collections import OrderedDict
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError


class SourceError(CockpitError):
    pass


class OutsideRoots(SourceError):
    """The traceback names a file outside the service's Python roots: not opened."""


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory + "/")


@dataclass(frozen=True)
class SourceRoots:
    """Where the service's code may live. With no directories known (the unit is not read
    yet, or no unit was named), only files inside a site-packages or dist-packages directory."""

    dirs: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        path = posixpath.normpath(path)
        if not path.startswith("/"):
            return False
        if not self.dirs:
            return any(part in ("site-packages", "dist-packages") for part in path.split("/")[1:-1])
        return any(_under(path, d) for d in self.dirs)

    def describe(self) -> str:
        if not self.dirs:
            return "a site-packages or dist-packages directory"
        shown = ", ".join(self.dirs[:4]) + (f" and {len(self.dirs) - 4} more" if len(self.dirs) > 4 else "")
        return f"the service's Python roots ({shown})"


PACKAGE_DIRS = SourceRoots()


@dataclass(frozen=True)
class SourceFile:
    host: str
    path: str
    text: str
    mtime: float
    size: int


def staleness(source: SourceFile, process_started: float | None) -> str | None:
    """A warning when the file is newer than the process whose traceback points into it."""
    if process_started is None or source.mtime <= process_started + 1:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(source.mtime))
    return (
        f"{source.path} on {source.host} changed at {when}, after the process started: "
        "the package was upgraded since, so the lines shown may not be the lines that ran"
    )


class SourceCache:
    def __init__(self, max_files: int = 64, max_bytes: int = 16 << 20) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._files: OrderedDict[tuple[str, str], SourceFile] = OrderedDict()

    async def get(self, host: Host, path: str, *, roots: SourceRoots | None) -> SourceFile:
        """The file as the host has it now. `roots`: where a traceback's file may be opened
        from; None when the user asked for this file by name."""
        if path.startswith("<"):
            raise SourceError(f"{path} is not a file: Python made that code at run time (frozen or generated)")
        if roots is not None:
            await self._check_roots(host, path, roots)
        try:
            st = await host.stat(path)
        except HostError as e:
            raise SourceError(str(e)) from None
        key = (host.name, path)
        cached = self._files.get(key)
        if cached is not None and cached.mtime == st.mtime and cached.size == st.size:
            self._files.move_to_end(key)
            return cached
        if st.size > self.max_bytes:
            raise SourceError(f"{path} on {host.name} is {st.size >> 20} MB, too big to show")
        try:
            data = await host.read_file(path, limit=self.max_bytes)
        except HostError as e:
            raise SourceError(str(e)) from None
        source = SourceFile(host.name, path, data.decode("utf-8", "replace"), st.mtime, st.size)
        self._files[key] = source
        while len(self._files) > self.max_files:
            self._files.popitem(last=False)
        return source

    @staticmethod
    async def _check_roots(host: Host, path: str, roots: SourceRoots) -> None:
        refused = OutsideRoots(
            f"{path} is outside {roots.describe()}, so it was not opened: a traceback can name any file"
        )
        try:
            resolved = await host.realpath(path)
        except HostError as e:
            if not roots.holds(path):
                raise refused from None
            raise SourceError(str(e)) from None
        # Both ways round: a symlink inside the roots that leads out of them is refused, and a
        # path through a symlink into them is read (Debian's /lib is /usr/lib: the stdlib frames
        # of a service whose Python says /lib/python3.11 were refused).
        if not roots.holds(resolved):
            raise refused
