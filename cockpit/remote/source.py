"""Source files of a host, as a traceback names them, cached per host, path and mtime.

A stat (under a millisecond over SFTP) decides whether the cached copy still holds; the read
(tens of milliseconds for server_args.py) happens once per version of the file. A file changed
after the crashed process started means the package was upgraded since: the lines shown may
not be the lines that ran, and the user is told so.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError


class SourceError(CockpitError):
    pass


@dataclass(frozen=True)
class SourceFile:
    host: str
    path: str
    text: str
    mtime: float
    size: int

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


def staleness(source: SourceFile, process_started: float | None) -> str | None:
    """A warning when the file is newer than the process whose traceback points into it."""
    if process_started is None or source.mtime <= process_started + 1:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(source.mtime))
    return (f"{source.path} on {source.host} changed at {when}, after the process started: "
            "the package was upgraded since, so the lines shown may not be the lines that ran")


class SourceCache:
    def __init__(self, max_files: int = 64, max_bytes: int = 16 << 20) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._files: OrderedDict[tuple[str, str], SourceFile] = OrderedDict()

    async def get(self, host: Host, path: str) -> SourceFile:
        if path.startswith("<"):
            raise SourceError(f"{path} is not a file: Python made that code at run time (frozen or generated)")
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
