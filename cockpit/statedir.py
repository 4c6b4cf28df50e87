"""Where the cockpit keeps what it learns on the jump box: ~/.local/state/cockpit (XDG)."""

from __future__ import annotations

import os
from pathlib import Path


def safe_name(name: str) -> str:
    """A host or unit name as one path component (no `/`, no `..`)."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name).lstrip(".") or "_"


def state_dir(*parts: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(base, "cockpit", *(safe_name(p) for p in parts))
