"""Editing a unit's ExecStart line, flag by flag: the plan of the edited command as groups of
words, each tied to the words of the unit it was read from, and the edit written back into the
directive's own lines, so the wrapping, spacing, comments and line endings an engineer chose
stay as they were (the README promises every other byte kept). The `Unit` asks for a plan; the
plan needs only the unit's files, the directive and its environment, so it knows nothing of the
`Unit` class."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.systemd.unit_args import FlagTable, Item, Value, parse_items, same_flag
from cockpit.systemd.unit_exec import Arg, Command, expand_env, quote_word
from cockpit.systemd.unit_syntax import Entry, UnitFile, continues

INDENT = "    "


class UnitError(CockpitError):
    """An edit or a question the unit cannot answer; `str()` is one sentence."""


@dataclass(frozen=True)
class Where:
    """A directive of the unit: which file, which entry of it."""

    file: int  # index into Unit.files
    entry: int  # index into that file's entries


def exec_items(args: list[Arg], catalog: FlagTable | None) -> tuple[int, list[Item]]:
    return parse_items([a.value for a in args], catalog, frozenset(i for i, a in enumerate(args) if a.opaque))


# --- rendering an edited directive ----------------------------------------------------------


def key_part(entry: Entry) -> str:
    """`ExecStart=` as written on the directive's first line (spacing around `=` kept)."""
    m = re.match(r"[^=]*=[ \t]*", entry.lines[0].text)
    return m.group() if m else f"{entry.key}="


def final_eol(entry: Entry) -> str:
    """The line ending after the directive's last line of text ("" at the end of a file)."""
    content = [line for line in entry.lines if not line.is_comment and not line.is_blank] or list(entry.lines)
    return content[-1].eol


def kept_comments(entry: Entry) -> str:
    return "".join(line.text + line.eol for line in entry.lines[1:] if line.is_comment)


def trailing_blank(entry: Entry) -> str:
    """A blank line that ended the continuation belongs to the entry; keep it after the new text."""
    last = entry.lines[-1]
    return last.text + last.eol if len(entry.lines) > 1 and last.is_blank else ""


@dataclass
class _Group:
    """Words of the command that belong together: the program part, one item, or a word that
    expands to nothing. `span` is the first and last word of the command it was read from (None
    for a flag the edit adds); `changed` says its words are new."""

    raws: list[str]
    items: frozenset[int]
    span: tuple[int, int] | None
    changed: bool = False


class _Text:
    """The directive's physical lines, edited in place: a word is found by its offset in the
    value as first read, and an edit touches only the characters (or the lines) it must."""

    def __init__(self, entry: Entry, file_eol: str) -> None:
        self.entry = entry
        self.lines = [[line.text, line.eol] for line in entry.lines]
        self.comment = [line.is_comment for line in entry.lines]
        self.file_eol = file_eol

    def locate(self, offset: int) -> tuple[int, int]:
        """(physical line, column) of an offset in the directive's value, as first read: the
        edits go from the last to the first, so the lines above an edit are still where they were."""
        at = offset + self.entry.value_start
        read = self.entry.lines
        line = max(i for i, start in enumerate(self.entry.offsets) if start <= at and not read[i].is_comment)
        return line, at - self.entry.offsets[line]

    def splice(self, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """Put `text` where [start, end) was, on line `start[0]`; lines between them (words that
        ran over a continuation) fold into it, and their comments follow it, so no line above
        the edit moves."""
        (l1, c1), (l2, c2) = start, end
        merged = [self.lines[l1][0][:c1] + text + self.lines[l2][0][c2:], self.lines[l2][1]]
        kept = [self.lines[i] for i in range(l1 + 1, l2) if self.comment[i]]
        self.lines[l1 : l2 + 1] = [merged, *kept]
        self.comment[l1 : l2 + 1] = [False] + [True] * len(kept)

    def delete(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        """Remove a group's words: their whole line when they were alone on a continuation line,
        else the words and the blanks that set them apart."""
        (l1, c1), (l2, c2) = start, end
        before, after = self.lines[l1][0][:c1], self.lines[l2][0][c2:]
        if before.strip(" \t"):
            self.splice((l1, len(before.rstrip(" \t"))), end, "")
        elif l1 == 0 or after.strip(" \t") not in ("", "\\"):
            self.splice(start, (l2, c2 + len(after) - len(after.lstrip(" \t"))), "")
        else:
            self.splice(start, end, "")
            gone = self.lines.pop(l1)
            del self.comment[l1]
            if not after.strip(" \t"):  # it was the directive's last line: the one above ends it now
                above = max(i for i in range(l1) if not self.comment[i])
                self.lines[above][0] = self.lines[above][0].rstrip(" \t")[:-1].rstrip(" \t")
                if not gone[1] and l1 == len(self.lines):
                    self.lines[-1][1] = ""

    def insert(self, at: tuple[int, int], text: str) -> None:
        """A new group before the words at `at`: on a line of its own when they start a
        continuation line, else in that line."""
        line, column = at
        head = self.lines[line][0][:column]
        if line and not head.strip(" \t"):
            self.lines.insert(line, [f"{head}{text} \\", self.lines[line - 1][1] or self.file_eol])
            self.comment.insert(line, False)
        else:
            self.splice(at, at, f"{text} ")

    def append(self, text: str) -> None:
        """A new group after the last words: in the line when the directive is one line, else
        on a new continuation line indented like the last one."""
        last = max(i for i, line in enumerate(self.lines) if not self.comment[i] and line[0].strip(" \t"))
        body, eol = self.lines[last]
        indent = body[: len(body) - len(body.lstrip(" \t"))] if last else INDENT
        if last == 0 and not continues(body):
            self.lines[0][0] = f"{body} {text}"
            return
        if not continues(body):
            self.lines[last] = [f"{body} \\", eol or self.file_eol]
        self.lines.insert(last + 1, [indent + text, eol])
        self.comment.insert(last + 1, False)

    def render(self) -> str:
        return "".join(text + eol for text, eol in self.lines)


@dataclass
class ExecPlan:
    """The edited command as groups of words, each knowing the words of the unit it came from."""

    file: UnitFile
    catalog: FlagTable | None
    where: Where
    command: Command
    args: list[Arg]
    items: list[Item]
    groups: list[_Group]

    def occurrences(self, name: str) -> list[int]:
        """The items that are `name` (any spelling the release accepts for it)."""
        return [
            k for k, item in enumerate(self.items) if item.name is not None and same_flag(item.name, name, self.catalog)
        ]

    @classmethod
    def of(
        cls,
        files: Sequence[UnitFile],
        where: Where,
        command: Command,
        environment: Mapping[str, str],
        catalog: FlagTable | None,
    ) -> ExecPlan:
        args, _ = expand_env(command, environment)
        head, items = exec_items(args, catalog)
        owner: dict[int, set[int]] = {}
        for k, item in enumerate(items):
            for a in item.args:
                owner.setdefault(args[a].word, set()).add(k)
        in_head = {args[a].word for a in range(head)} | {0, 1 if "@" in command.prefix else 0}
        groups: list[_Group] = []
        for index, word in enumerate(command.words):
            key = frozenset() if index in in_head else frozenset(owner.get(index, {-1 - index}))
            if groups and groups[-1].items == key and groups[-1].span:
                groups[-1].raws.append(word.raw)
                groups[-1].span = (groups[-1].span[0], index)
            else:
                groups.append(_Group([word.raw], key, (index, index)))
        return cls(files[where.file], catalog, where, command, args, items, groups)

    def _group_of(self, k: int) -> int:
        item = self.items[k]
        shared = [self.args[a].variable for a in item.args if self.args[a].variable]
        if shared:
            raise UnitError(f"{item.name} comes from ${shared[0]}: edit that variable instead")
        for g, group in enumerate(self.groups):
            if group.items == frozenset({k}):
                return g
        raise UnitError(f"{item.name} shares a word with another argument; edit the unit by hand")

    def flag_words(self, name: str, value: Value, inline: bool, k: int | None) -> list[str]:
        env = self.command.expands_env
        try:
            if value is None:
                return [quote_word(name, expand_env=env)]
            values = value if isinstance(value, tuple) else (value,)
            if isinstance(value, str) and (inline or value.startswith("-")):
                return [quote_word(f"{name}={value}", expand_env=env)]
            if any(v.startswith("--") for v in values):
                raise UnitError(f"{name}: a value of a several-valued flag cannot start with '--'")
            name_raw = (
                self.groups[self._group_of(k)].raws[0]
                if k is not None and not self.items[k].inline
                else quote_word(name, expand_env=env)
            )
            return [name_raw, *(quote_word(v, expand_env=env) for v in values)]
        except ValueError as e:
            raise UnitError(f"{name}: {e}") from None

    def replace(self, k: int, raws: list[str]) -> None:
        group = self.groups[self._group_of(k)]
        group.raws, group.changed = raws, True

    def remove(self, k: int) -> None:
        self.replace(k, [])

    def append(self, raws: list[str]) -> None:
        """A new flag goes last, but before an argparse `--` that ends the options."""
        at = len(self.groups)
        for g, group in enumerate(self.groups):
            if any(self.items[k].name is None and self.items[k].value == "--" for k in group.items if k >= 0):
                at = g
                break
        self.groups.insert(at, _Group(raws, frozenset({len(self.items)}), None))

    def render(self) -> str:
        """The directive with only the edited words changed: every other byte (the wrapping,
        the spacing, comments inside the continuation, the line endings) as it was. Edits are
        made from the last to the first, so each finds its words where they were read."""
        f = self.file
        text = _Text(f.entries[self.where.entry], f.eol())
        words = self.command.words
        edits: list[tuple[tuple[int, int], _Group]] = []
        for g, group in enumerate(self.groups):
            if group.span is None:  # a new flag: before the group that follows it, or last
                later = next((h.span for h in self.groups[g + 1 :] if h.span), None)
                edits.append((text.locate(words[later[0]].start) if later else (len(text.lines), 0), group))
            elif group.changed:
                edits.append((text.locate(words[group.span[0]].start), group))
        for at, group in sorted(edits, key=lambda e: e[0], reverse=True):
            new = " ".join(group.raws)
            if group.span is None:
                text.insert(at, new) if at[0] < len(text.lines) else text.append(new)
                continue
            first, last = group.span
            if len(group.raws) == last - first + 1:  # word for word, so a wrap between them stays
                for word, raw in reversed(list(zip(words[first : last + 1], group.raws, strict=True))):
                    text.splice(text.locate(word.start), text.locate(word.start + len(word.raw)), raw)
                continue
            end = text.locate(words[last].start + len(words[last].raw))
            text.splice(at, end, new) if new else text.delete(at, end)
        return text.render()
