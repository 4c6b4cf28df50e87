"""Lines of text: a file's as Python and its tracebacks number them (the source pane, the
explanation and the incident note all count lines this way), and a byte stream's as it arrives
in chunks (a remote journalctl, `cockpit fold` on a pipe)."""

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


def complete_lines(rest: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The lines that `rest` (the unfinished line so far) and the next `chunk` complete, without
    their newline, and the new unfinished line: one split per chunk, not one read per line."""
    lines = (rest + chunk).split(b"\n")
    return lines, lines.pop()


def complete_block(rest: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """The lines that `rest` and the next `chunk` complete, as one bytes cut after their last
    newline (b"" when the chunk holds none), and the new unfinished line: a block a follow
    decodes whole."""
    cut = chunk.rfind(b"\n") + 1
    if not cut:
        return b"", rest + chunk
    return (rest + chunk[:cut] if rest else chunk[:cut]), chunk[cut:]
