"""Folding journal lines into whole tracebacks: frames, exceptions, chains, groups.

Pure Python (no Textual): the journal pane, `cockpit fold` and tests share it. The names below
are loaded when first asked for: `cockpit status` reads SGLang's log prefix through
`traceback.grammar` and should not pay for the folder.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cockpit.traceback.fold import BatchChanges, Change, Folder, fold_entries, fold_lines, last_with_frames
    from cockpit.traceback.model import Frame, Line, Traceback

_HOME = {
    "BatchChanges": "fold",
    "Change": "fold",
    "Folder": "fold",
    "fold_entries": "fold",
    "fold_lines": "fold",
    "last_with_frames": "fold",
    "Frame": "model",
    "Line": "model",
    "Traceback": "model",
}
__all__ = [
    "BatchChanges",
    "Change",
    "Folder",
    "Frame",
    "Line",
    "Traceback",
    "fold_entries",
    "fold_lines",
    "last_with_frames",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
