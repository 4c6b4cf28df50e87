"""The lossless layer of a unit file: every byte kept, lines read the way systemd reads them.

The cockpit rewrites unit files that an engineer wrote by hand, so a change must leave every other
byte alone: comments, blank lines, odd spacing, CRLF endings, a byte-order mark. A unit file is
held here as a list of entries (one per logical line) that each keep their physical lines
verbatim; `render()` of an unchanged file is the file.

Logical lines follow systemd's conf-parser (systemd 252, confirmed in the lab): a line ending in an
odd number of backslashes continues on the next one (the backslash becomes a space), a line whose
first non-blank character is `#` or `;` is a comment and is skipped even in the middle of a
continuation, and a blank line ends a continuation. Keys and values are stripped of " \\t\\n\\r".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.errors import UsageError

WHITESPACE = " \t\n\r"
COMMENTS = "#;"
BOM = "\ufeff"
# systemd's read_line(): "\n", "\r" and either pair end one line; "\n\n" ends two.
_EOL = re.compile(r"\r\n|\n\r|\r|\n")


class UnitSyntaxError(UsageError):
    """A unit file line systemd would refuse; the message starts with `FILE:LINE:`."""

    def __init__(self, path: str, lineno: int, message: str) -> None:
        super().__init__(f"{path}:{lineno}: {message}")
        self.path = path
        self.lineno = lineno


@dataclass(frozen=True)
class PhysicalLine:
    text: str  # without its line ending
    eol: str  # the ending as written, "" for a last line without one

    @property
    def is_comment(self) -> bool:
        return _is_comment(self.text)

    @property
    def is_blank(self) -> bool:
        return not self.text.strip(WHITESPACE)


@dataclass(frozen=True)
class Entry:
    """One logical line and the physical lines it spans (comment lines inside a continuation too).

    `value` is the value systemd sees; `offsets[i]` is where physical line i starts in the
    joined line, so a word of the value can be traced back to the physical line holding it.
    """

    lineno: int  # 1-based number of the first physical line
    lines: tuple[PhysicalLine, ...]
    kind: str  # "blank", "comment", "section" or "directive"
    section: str | None  # a header's own name, or the section a directive belongs to
    key: str | None = None
    value: str | None = None
    value_start: int = 0  # where `value` starts in the joined line
    offsets: tuple[int, ...] = ()

    @property
    def raw(self) -> str:
        return "".join(line.text + line.eol for line in self.lines)


@dataclass(frozen=True)
class UnitFile:
    """A parsed unit file (or drop-in) that renders back to exactly its text until edited."""

    path: str
    entries: tuple[Entry, ...]

    def render(self) -> str:
        return "".join(e.raw for e in self.entries)

    def directives(self, section: str, key: str) -> list[tuple[int, Entry]]:
        """Every `key=` of `section`, with its index in `entries`, in file order."""
        return [
            (i, e)
            for i, e in enumerate(self.entries)
            if e.kind == "directive" and e.section == section and e.key == key
        ]

    def eol(self) -> str:
        """The line ending this file uses, for lines the cockpit adds."""
        for entry in self.entries:
            for line in entry.lines:
                if line.eol:
                    return line.eol
        return "\n"

    def replaced(self, edits: dict[int, str], inserts: dict[int, str] | None = None) -> UnitFile:
        """A copy with entries replaced by new text (`""` deletes) and text inserted before
        entries (index `len(entries)` appends), re-read so the model stays exact."""
        parts: list[str] = []
        for i, entry in enumerate(self.entries):
            parts.append((inserts or {}).get(i, ""))
            parts.append(edits.get(i, entry.raw))
        parts.append((inserts or {}).get(len(self.entries), ""))
        return parse_unit_file(self.path, "".join(parts))


def split_lines(text: str) -> list[PhysicalLine]:
    lines: list[PhysicalLine] = []
    pos = 0
    for m in _EOL.finditer(text):
        lines.append(PhysicalLine(text[pos : m.start()], m.group()))
        pos = m.end()
    if pos < len(text):
        lines.append(PhysicalLine(text[pos:], ""))
    return lines


def _is_comment(text: str) -> bool:
    body = text.lstrip(WHITESPACE)
    return bool(body) and body[0] in COMMENTS


def continues(text: str) -> bool:
    """systemd's test: the line ends in an unescaped backslash (an odd run of them)."""
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def parse_unit_file(path: str, text: str) -> UnitFile:
    """Read a unit file's text; raises UnitSyntaxError (with file and line) where systemd would
    refuse the line or silently drop it: a bad section header, a line without `=`, an
    assignment before the first section."""
    entries: list[Entry] = []
    section: str | None = None
    pending: list[PhysicalLine] = []
    offsets: list[int] = []
    parts: list[str] = []  # the logical line's pieces: joined once (a growing str was quadratic)
    length = 0
    start = 0

    def close() -> None:
        nonlocal section, length
        entry = _logical(path, start + 1, tuple(pending), tuple(offsets), "".join(parts), section)
        if entry.kind == "section":
            section = entry.section
        entries.append(entry)
        pending.clear()
        offsets.clear()
        parts.clear()
        length = 0

    for index, line in enumerate(split_lines(text)):
        content = line.text[1:] if index == 0 and line.text.startswith(BOM) else line.text
        comment = _is_comment(content)
        if comment and not pending:
            entries.append(Entry(index + 1, (line,), "comment", section))
            continue
        if not pending:
            start = index
        pending.append(line)
        offsets.append(length)
        if comment:
            continue
        piece = content[:-1] + " " if continues(content) else content
        parts.append(piece)
        length += len(piece)
        if piece is not content:
            continue
        close()
    if pending:
        close()
    return UnitFile(path, tuple(entries))


def _logical(
    path: str, lineno: int, lines: tuple[PhysicalLine, ...], offsets: tuple[int, ...], joined: str, section: str | None
) -> Entry:
    body = joined.strip(WHITESPACE)
    if not body:
        return Entry(lineno, lines, "blank", section, offsets=offsets)
    if body.startswith("["):
        if not body.endswith("]") or len(body) < 3:
            raise UnitSyntaxError(path, lineno, f"invalid section header {body!r}")
        return Entry(lineno, lines, "section", body[1:-1], offsets=offsets)
    if section is None:
        raise UnitSyntaxError(path, lineno, f"{body!r} comes before any [Section] header")
    lead = len(joined) - len(joined.lstrip(WHITESPACE))
    eq = joined.find("=", lead)
    if eq < 0:
        raise UnitSyntaxError(path, lineno, f"expected KEY=VALUE, a [Section] header or a comment, got {body!r}")
    key = joined[lead:eq].strip(WHITESPACE)
    if not key:
        raise UnitSyntaxError(path, lineno, f"missing key name before '=' in {body!r}")
    rest = joined[eq + 1 :]
    value_start = eq + 1 + len(rest) - len(rest.lstrip(WHITESPACE))
    return Entry(lineno, lines, "directive", section, key, rest.strip(WHITESPACE), value_start, offsets)
