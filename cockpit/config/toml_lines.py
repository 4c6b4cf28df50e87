"""Where a key sits in a TOML text: tomllib gives no positions for values, so this recovers
them from the text, for errors that read `FILE:LINE: dotted.key: what is wrong`."""

from __future__ import annotations

import re
import sys

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass


# --- locating keys in the text ---------------------------------------------------------

_BARE_KEY = r"[A-Za-z0-9_-]+"
_KEY_PART = rf'(?:{_BARE_KEY}|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER_RE = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?")
_ASSIGN_RE = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART_RE = re.compile(_KEY_PART)


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = []
    for m in _PART_RE.finditer(text):
        p = m.group(0)
        parts.append(p[1:-1] if p[0] in "\"'" else p)
    return tuple(parts)


class _KeyLines:
    """Maps dotted key paths to the 1-based line that defines them."""

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        open_string: str | None = None
        depth = 0
        entries: dict[tuple[str, ...], int] = {}  # [[x]] seen so far: each is x.1, x.2, ...
        for lineno, line in enumerate(text.splitlines(), start=1):
            if open_string:
                if open_string in line:
                    open_string = None
                continue
            if depth == 0:
                header = _HEADER_RE.match(line)
                if header:
                    table = _split_dotted(header.group(1))
                    if line.lstrip().startswith("[["):
                        entries[table] = entries.get(table, 0) + 1
                        table += (str(entries[table]),)
                    for depth_ in range(1, len(table) + 1):  # [a.b] also defines a
                        self.lines.setdefault(table[:depth_], lineno)
                    continue
                assign = _ASSIGN_RE.match(line)
                if assign:
                    path = table + _split_dotted(assign.group(1))
                    self.lines.setdefault(path, lineno)
                    rest = line[assign.end() :]
                    self._inline_keys(path, rest, lineno)
                    line = rest
            depth, open_string = self._scan_value(line, depth)

    def _inline_keys(self, path: tuple[str, ...], rest: str, lineno: int) -> None:
        stripped = rest.strip()
        if stripped.startswith("{"):
            for m in re.finditer(rf"[{{,]\s*({_DOTTED})\s*=", stripped):
                self.lines.setdefault(path + _split_dotted(m.group(1)), lineno)

    @staticmethod
    def _scan_value(text: str, depth: int) -> tuple[int, str | None]:
        """Track brackets and multi-line strings so their contents are not taken for keys."""
        i = 0
        while i < len(text):
            c = text[i]
            if c == "#":
                break
            if text.startswith('"""', i) or text.startswith("'''", i):
                quote = text[i : i + 3]
                end = text.find(quote, i + 3)
                if end < 0:
                    return depth, quote
                i = end + 3
                continue
            if c in "\"'":
                end = i + 1
                while end < len(text) and text[end] != c:
                    end += 2 if (c == '"' and text[end] == "\\") else 1
                i = end + 1
                continue
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth = max(0, depth - 1)
            i += 1
        return depth, None

    def line_of(self, path: tuple[str, ...]) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None
