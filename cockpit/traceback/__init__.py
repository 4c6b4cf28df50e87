"""Folding journal lines into whole tracebacks: frames, exceptions, chains, groups.

Pure Python (no Textual): the journal pane, `cockpit fold` and tests share it.
"""

from cockpit.traceback.fold import BatchChanges, Change, Folder, fold_entries, fold_lines, last_with_frames
from cockpit.traceback.model import Frame, Line, Traceback

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
