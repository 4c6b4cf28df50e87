"""Text from a host made inert before a terminal, a file or a picture shows it.

Whatever a GPU host sends back (journal lines, process titles, file names in a traceback,
nvidia-smi's and ss's process names, py-spy's frames, a model's config.json) may come from
anyone with an account there. Written to a terminal as it is, ESC starts a control sequence:
OSC 2 sets the window title, OSC 52 writes the clipboard, OSC 8 plants a link, a C1 byte
(U+0080-U+009F) does the same on terminals that take 8-bit controls, and BEL, CR or BS redraw
what the operator reads. Bidirectional overrides (U+202A-U+202E, U+2066-U+2069) reorder what is
shown without being seen (Trojan Source). XML 1.0 refuses the C0 controls outright, so one such
byte in a screenshot's SVG made it unreadable.

Every such character is shown by its escape (`\\x1b`, `\\u202e`), so the operator sees that it is
there and what it was, and nothing is dropped. Tabs stay (they only move to the next column);
newlines stay where the caller's output is lines (a note, a command's text), and are escaped
where one value must stay one line (a title, a name, a table cell).
"""

from __future__ import annotations

import re

# DEL, C1, the bidirectional marks, embeddings, overrides and isolates, and the line and
# paragraph separators some terminals take for a newline; with them, C0 but tab (and newline).
_BEYOND_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_LINE = re.compile(f"[\x00-\x08\x0a-\x1f{_BEYOND_C0}]")
_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with every control and reordering character shown by its escape; with `lines`,
    newlines are kept as line breaks."""
    if text.isprintable():  # C-fast, and False for every character escaped here (and a few more)
        return text
    return (_IN_LINES if lines else _IN_LINE).sub(_escape, text)


def json_printable(encoded: str) -> str:
    """Encoded JSON with what JSON leaves raw in its strings (it must escape only U+0000-U+001F:
    DEL, C1 and the reordering characters stay) written as JSON escapes (`\\u009b`): the same
    data for any parser, inert on a terminal. Newlines between documents stay."""
    return _IN_LINES.sub(lambda m: f"\\u{ord(m.group(0)):04x}", encoded)
