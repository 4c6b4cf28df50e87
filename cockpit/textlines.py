"""A file's lines as Python and its tracebacks number them (the source pane, the explanation and
the incident note all count lines this way; none of them is about SGLang, so it lives here)."""

from __future__ import annotations

import re

_PY_EOL = re.compile("\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """A line ends at \\n, \\r\\n or \\r only. str.splitlines() also ends lines at a form feed
    (\\x0c, found in real sources), \\x1c-\\x1e and \\x85, which would shift every later line
    number."""
    lines = _PY_EOL.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines
