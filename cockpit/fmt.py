"""Human formats shared by the CLI and the app."""

from __future__ import annotations

import os
import shlex
import shutil
import sys


def duration(seconds: float | None) -> str:
    """`42s`, `4m21s`, `3h05m`, `2d04h`; `-` when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def count(n: int, word: str) -> str:
    """`1 host`, `2 hosts`: a number with its noun (a plural by `s`)."""
    return f"{n} {word}{'s' * (n != 1)}"


def cockpit_command() -> str:
    """How to type the cockpit again, for a command line it prints: `cockpit` where that name on
    PATH is this program, else as it was started (`.venv/bin/cockpit`, the README's install,
    whose venv is not on PATH; `python -m cockpit`)."""
    me = sys.argv[0] if sys.argv and sys.argv[0] else "cockpit"
    if os.path.basename(me) == "__main__.py":
        return f"{sys.executable} -m cockpit"
    found = shutil.which("cockpit")
    try:
        if found and os.path.samefile(found, me):
            return "cockpit"
    except OSError:
        pass
    return shlex.quote(me)
