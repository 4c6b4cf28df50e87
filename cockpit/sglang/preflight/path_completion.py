"""Tab completion of a path flag's value from the host's own directories.

The value is a path on the GPU host, not on the jump box, and a relative one is read from the
unit's WorkingDirectory (cockpit.sglang.preflight.preflight.on_host), so completing it lists the host's
directory the server would look in. A Hugging Face id (`org/name`) and `~` (which SGLang does
not expand) are not completed. Names come from the host: the app draws them inert, as it does
all host text.
"""

from __future__ import annotations

import posixpath

from cockpit.remote.base import Host, HostError
from cockpit.sglang.preflight.preflight import LOCAL_PATH, on_host

LIMIT = 200  # entries listed at most: a model store's directory can hold thousands
# find's `%Y` is the type a symlink points to, so a link to a model directory completes as one;
# NUL ends each record (a file name may hold a newline).
_LIST = 'find "$1" -mindepth 1 -maxdepth 1 -name "$2*" -printf "%Y %f\\0" 2>/dev/null | head -z -n {limit}'


def completes(value: str) -> bool:
    """Whether a value is a path the host can complete (not an id on the Hub, not `~`)."""
    return value.startswith(LOCAL_PATH) and not value.startswith("~")


async def complete_path(host: Host, typed: str, cwd: str = "/") -> list[str]:
    """The completions of `typed`: `typed` up to its last `/`, then each name in that directory
    that starts with the rest, `/` after a directory; sorted, at most LIMIT. [] where the
    directory cannot be read."""
    if not completes(typed):
        return []
    head, _, stem = typed.rpartition("/")
    directory = on_host(head + "/" if head or typed.startswith("/") else ".", cwd)
    script = _LIST.format(limit=LIMIT)
    try:
        listed = await host.query(["sh", "-c", script, "complete", directory, _glob_quoted(stem)], timeout=10)
    except HostError:
        return []
    found = []
    for record in listed.text.split("\0"):
        kind, _, name = record.partition(" ")
        if name and "/" not in name:
            found.append(f"{head}/{name}{'/' if kind == 'd' else ''}")
    return sorted(found)


def shared_start(candidates: list[str]) -> str:
    """What every candidate starts with: Tab fills that much when it cannot choose."""
    return posixpath.commonprefix(candidates) if candidates else ""


def _glob_quoted(stem: str) -> str:
    """The typed stem as find's -name takes it literally: its glob characters escaped."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in stem)
