"""Where the cockpit keeps what it learns on the jump box: ~/.local/state/cockpit (XDG).

Imports nothing beyond `os`: the `cockpit` command reads its launch memory here before it
forks the early OpenSSH master (cockpit/remote/early_master.py), where `pathlib` cost 9 ms.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` itself costs 3 ms before that fork; mypy reads the name as True
if TYPE_CHECKING:
    from pathlib import Path


def safe_name(name: str) -> str:
    """A host or unit name as one path component (no `/`, no `..`)."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name).lstrip(".") or "_"


def state_path(*parts: str) -> str:
    base = os.environ.get("XDG_STATE_HOME")
    if not base:
        base = os.path.expanduser("~/.local/state")
        if base.startswith("~"):  # no $HOME and no passwd entry: not a directory named `~` here
            raise RuntimeError("Could not determine home directory.")
    return os.path.join(base, "cockpit", *(safe_name(p) for p in parts))


def state_dir(*parts: str) -> Path:
    from pathlib import Path

    return Path(state_path(*parts))
