"""Where systemd looks for a unit's files: the system manager's search path, and which
directories hold a unit's drop-ins and in what order they apply (as systemd 252 does)."""

from __future__ import annotations

import os
from collections.abc import Sequence

# The system manager's unit search path (systemd 252, `systemd-analyze unit-paths`), highest
# precedence first; /lib/systemd/system is where split-/usr builds such as Debian's look too.
SYSTEM_UNIT_PATH = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)


def _dropin_names(name: str) -> list[str]:
    """unit_file_find_dirs(): the unit, its template, then its dash prefixes, most specific first
    (`a-b-c.service` -> `a-b-.service`, `a-.service`)."""
    stem, _, kind = name.rpartition(".")
    prefix, at, instance = stem.partition("@")
    names = [name]
    if at and instance:
        names += _dropin_names(f"{prefix}@.{kind}")
    chopped = False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:
            return names
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[: dash + 1]
            break
        prefix, chopped = prefix[:dash], True
    return names + _dropin_names(f"{prefix}@{instance}.{kind}" if at and instance else f"{prefix}.{kind}")


def dropin_dirs(name: str, search_path: Sequence[str] = SYSTEM_UNIT_PATH) -> list[str]:
    """Every directory whose `*.conf` files are drop-ins of `name`, in precedence order: of two
    drop-ins with the same file name, the one in the earlier directory wins."""
    kind = name.rpartition(".")[2]
    dirs = [f"{base}/{n}.d" for base in search_path for n in _dropin_names(name)]
    return dirs + [f"{base}/{kind}.d" for base in search_path]


def select_dropins(name: str, paths: Sequence[str], search_path: Sequence[str] = SYSTEM_UNIT_PATH) -> list[str]:
    """Of `paths`, the drop-ins systemd applies to `name`, in the order it applies them: sorted by
    file name whatever their directory, a name in a higher-precedence directory masking the same
    name in a lower one."""
    rank = {d: i for i, d in reversed(list(enumerate(dropin_dirs(name, search_path))))}
    best: dict[str, tuple[int, str]] = {}
    for path in paths:
        parent, base = os.path.split(path)
        if base.endswith(".conf") and parent in rank and (base not in best or rank[parent] < best[base][0]):
            best[base] = (rank[parent], path)
    return [best[base][1] for base in sorted(best)]


def search_path_for(fragment: str, search_path: Sequence[str]) -> tuple[str, ...]:
    """systemd-analyze verify FILE also searches the file's own directory, first."""
    here = os.path.dirname(fragment) or "."
    return tuple(search_path) if here in search_path else (here, *search_path)
