"""Editing a unit's ExecStart line, flag by flag: the plan of the edited command, one group of
words per output line, rendered back with the directive's spacing, continuation lines and the
comments inside it kept. The `Unit` asks for a plan; the plan needs only the unit's files, the
directive and its environment, so it knows nothing of the `Unit` class."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.systemd.unit_args import FlagTable, Item, Value, parse_items, same_flag
from cockpit.systemd.unit_exec import Arg, Command, expand_env, quote_word
from cockpit.systemd.unit_syntax import Entry, UnitFile

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
    """Words of the command written on one line: the program part, one item, or a word that
    expands to nothing; `origin` is the physical line of the entry it came from."""

    raws: list[str]
    items: frozenset[int]
    origin: int | None


@dataclass
class ExecPlan:
    """The edited command, one group per output line, with the comments found inside it."""

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
        entry = files[where.file].entries[where.entry]
        groups: list[_Group] = []
        for index, word in enumerate(command.words):
            key = frozenset() if index in in_head else frozenset(owner.get(index, {-1 - index}))
            if groups and groups[-1].items == key:
                groups[-1].raws.append(word.raw)
            else:
                groups.append(_Group([word.raw], key, entry.line_of(word.start)))
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
        self.groups[self._group_of(k)].raws = raws

    def remove(self, k: int) -> None:
        self.groups[self._group_of(k)].raws = []

    def append(self, raws: list[str]) -> None:
        """A new flag goes last, but before an argparse `--` that ends the options."""
        at = len(self.groups)
        for g, group in enumerate(self.groups):
            if any(self.items[k].name is None and self.items[k].value == "--" for k in group.items if k >= 0):
                at = g
                break
        self.groups.insert(at, _Group(raws, frozenset({len(self.items)}), None))

    def render(self) -> str:
        """The directive, the program part on its first line and one item per continuation line;
        comment lines that sat inside the old continuation stay before the item they preceded."""
        f = self.file
        entry = f.entries[self.where.entry]
        eol = entry.lines[0].eol or f.eol()
        comments = [(i, line.text + line.eol) for i, line in enumerate(entry.lines) if line.is_comment]
        lines = [g for g in self.groups if g.raws]
        out: list[str] = []
        for n, group in enumerate(lines):
            while n and comments and group.origin is not None and comments[0][0] < group.origin:
                out.append(comments.pop(0)[1])
            text = (key_part(entry) if n == 0 else INDENT) + " ".join(group.raws)
            out.append(text + (" \\" + eol if n + 1 < len(lines) else ""))
        out.append(final_eol(entry))
        out += [c for _, c in comments]
        return "".join(out) + trailing_blank(entry)
