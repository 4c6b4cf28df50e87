"""A systemd service as systemd will run it, and edits that change only what they change.

A `Unit` is built from file texts (`{path: text}`), because on a GPU host they arrive over SFTP:
the unit file, the drop-ins systemd applies to it (`UNIT.d/*.conf` in every unit directory,
prefix drop-ins such as `sglang-.service.d`, `service.d`), and the environment files it names.
From them it derives what systemd derives: the effective `ExecStart=` (an empty `ExecStart=` in a
drop-in resets it), the environment (`Environment=`, then `EnvironmentFile=` which overrides it),
the argv the process gets, and its flags. Edits land in the file and the line that define the
setting, re-render that one directive, and leave every other byte of every file as it was.

The argv is exact when every `%` specifier and `$VAR` it uses can be resolved from the files
given; the ones only the host knows (`%b`, `%H`, `$MAINPID`...) are kept as written and listed
by `unresolved()`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError
from cockpit.sglang.flags import Catalog
from cockpit.systemd.unit_args import Item, Value, flag_name, parse_items, same_flag
from cockpit.systemd.unit_env import Assignment, parse_assignments, parse_env_file, quote_assignment
from cockpit.systemd.unit_exec import (
    Arg,
    Command,
    ExecSyntaxError,
    expand_env,
    name_specifiers,
    parse_commands,
    quote_word,
    resolve_specifiers,
)
from cockpit.systemd.unit_syntax import Entry, UnitFile, UnitSyntaxError, parse_unit_file

# The system manager's unit search path (systemd 252, `systemd-analyze unit-paths`), highest
# precedence first; /lib/systemd/system is where split-/usr builds such as Debian's look too.
SYSTEM_UNIT_PATH = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)
SECTION = "Service"
INDENT = "    "


class UnitError(CockpitError):
    """An edit or a question the unit cannot answer; `str()` is one sentence."""


def decode(data: str | bytes) -> str:
    """File bytes as text that encodes back to the same bytes, even when not UTF-8."""
    return data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# --- where drop-ins live -------------------------------------------------------------------


def _dropin_names(name: str) -> list[str]:
    """unit_file_find_dirs(): the unit, its template, then its dash prefixes, most specific first
    (`a-b-c.service` -> `a-b-.service`, `a-.service`)."""
    stem, _, kind = name.rpartition(".")
    prefix, at, instance = stem.partition("@")
    names = [name]
    if at and instance:
        names += _dropin_names(f"{prefix}@.{kind}")
    chopped = False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:
            return names
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[: dash + 1]
            break
        prefix, chopped = prefix[:dash], True
    return names + _dropin_names(f"{prefix}@{instance}.{kind}" if at and instance else f"{prefix}.{kind}")


def dropin_dirs(name: str, search_path: Sequence[str] = SYSTEM_UNIT_PATH) -> list[str]:
    """Every directory whose `*.conf` files are drop-ins of `name`, in precedence order: of two
    drop-ins with the same file name, the one in the earlier directory wins."""
    kind = name.rpartition(".")[2]
    dirs = [f"{base}/{n}.d" for base in search_path for n in _dropin_names(name)]
    return dirs + [f"{base}/{kind}.d" for base in search_path]


def select_dropins(name: str, paths: Sequence[str], search_path: Sequence[str] = SYSTEM_UNIT_PATH) -> list[str]:
    """Of `paths`, the drop-ins systemd applies to `name`, in the order it applies them: sorted by
    file name whatever their directory, a name in a higher-precedence directory masking the same
    name in a lower one."""
    rank = {d: i for i, d in reversed(list(enumerate(dropin_dirs(name, search_path))))}
    best: dict[str, tuple[int, str]] = {}
    for path in paths:
        parent, base = os.path.split(path)
        if base.endswith(".conf") and parent in rank:
            if base not in best or rank[parent] < best[base][0]:
                best[base] = (rank[parent], path)
    return [best[base][1] for base in sorted(best)]


def _search_path_for(fragment: str, search_path: Sequence[str]) -> tuple[str, ...]:
    """systemd-analyze verify FILE also searches the file's own directory, first."""
    here = os.path.dirname(fragment) or "."
    return tuple(search_path) if here in search_path else (here, *search_path)


def read_local(unit_file: str | Path, search_path: Sequence[str] = ()) -> dict[str, str]:
    """The texts `load_unit` needs, from this machine: the unit file, its drop-ins (beside it in
    `UNIT.d/` and in `search_path`) and the environment files it names that exist here (a
    missing optional one reads as empty)."""
    fragment = str(unit_file)
    name = os.path.basename(fragment)
    texts = {fragment: decode(Path(fragment).read_bytes())}
    for directory in dropin_dirs(name, _search_path_for(fragment, search_path)):
        if os.path.isdir(directory):
            for conf in sorted(Path(directory).glob("*.conf")):
                texts[str(conf)] = decode(conf.read_bytes())
    unit = load_unit(texts, fragment, search_path=search_path)
    for env_file in unit.environment_files():
        if is_glob(env_file.path):
            for path in sorted(str(p) for p in Path("/").glob(env_file.path.lstrip("/")) if p.is_file()):
                texts[path] = decode(Path(path).read_bytes())
        elif os.path.isfile(env_file.path):
            texts[env_file.path] = decode(Path(env_file.path).read_bytes())
        elif env_file.optional:
            texts[env_file.path] = ""  # what systemd makes of a missing `-` file: no variables
    return texts


def is_glob(path: str) -> bool:
    """An EnvironmentFile= path systemd would expand as a pattern: it names no one file to read."""
    return any(c in path for c in "*?[")


def load_unit(
    texts: Mapping[str, str | bytes],
    fragment: str,
    *,
    name: str | None = None,
    search_path: Sequence[str] = SYSTEM_UNIT_PATH,
    catalog: Catalog | None = None,
) -> Unit:
    """The unit whose file is `texts[fragment]`, with the drop-ins among `texts` that systemd
    applies to it; the other texts are there for `EnvironmentFile=`. Raises UnitSyntaxError
    (`FILE:LINE: ...`) for a line systemd would refuse."""
    decoded = {path: decode(text) for path, text in texts.items()}
    if fragment not in decoded:
        raise UnitError(f"{fragment}: no such unit file among the files given")
    unit_name = name or os.path.basename(fragment)
    paths = select_dropins(unit_name, list(decoded), _search_path_for(fragment, search_path))
    files = tuple(parse_unit_file(p, decoded[p]) for p in [fragment, *paths])
    return Unit(unit_name, files, decoded, catalog)


# --- the unit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentFile:
    path: str  # specifiers resolved; may be a glob
    optional: bool  # written with a leading `-`: a missing file is not an error


@dataclass(frozen=True)
class Where:
    """A directive of the unit: which file, which entry of it."""

    file: int  # index into Unit.files
    entry: int  # index into that file's entries


@dataclass(frozen=True)
class Unit:
    """A unit file and its drop-ins, in the order systemd applies them; edits return a new Unit."""

    name: str
    files: tuple[UnitFile, ...]  # the unit file first, then the drop-ins
    texts: Mapping[str, str]  # every text given, as given (environment files among them)
    catalog: Catalog | None = None
    _specifiers: dict[str, str] = field(init=False, repr=False, compare=False)
    _memo: dict[str, Any] = field(init=False, repr=False, compare=False)  # what reading derives, once

    def __post_init__(self) -> None:
        object.__setattr__(self, "_specifiers", name_specifiers(self.name))
        object.__setattr__(self, "_memo", {})

    @property
    def path(self) -> str:
        return self.files[0].path

    def with_texts(self, extra: Mapping[str, str | bytes]) -> Unit:
        """The same unit with more texts to read environment files from."""
        return replace(self, texts={**self.texts, **{p: decode(t) for p, t in extra.items()}})

    def changed(self) -> dict[str, str]:
        """The files whose text edits have changed, with their new text."""
        return {f.path: text for f in self.files if (text := f.render()) != self.texts.get(f.path)}

    def render(self, path: str | None = None) -> str:
        """The text of one file of the unit (the unit file itself by default)."""
        wanted = path or self.path
        for f in self.files:
            if f.path == wanted:
                return f.render()
        raise UnitError(f"{wanted} is not a file of {self.name}")

    # -- reading ----------------------------------------------------------------------------

    def _directives(self, key: str) -> list[tuple[Where, Entry]]:
        """Every `key=` of the [Service] sections, in the order systemd applies them."""
        return [(Where(fi, ei), e) for fi, f in enumerate(self.files) for ei, e in f.directives(SECTION, key)]

    def _error(self, where: Where, message: str) -> UnitSyntaxError:
        f = self.files[where.file]
        return UnitSyntaxError(f.path, f.entries[where.entry].lineno, message)

    def exec_start(self) -> list[tuple[Where, Command]]:
        """Every command the effective `ExecStart=` runs, with the directive that defines it."""
        if "exec_start" not in self._memo:
            self._memo["exec_start"] = self._parse_exec_start()
        return list(self._memo["exec_start"])

    def _parse_exec_start(self) -> list[tuple[Where, Command]]:
        commands: list[tuple[Where, Command]] = []
        for where, entry in self._directives("ExecStart"):
            if not entry.value:
                commands = []
                continue
            try:
                commands += [(where, c) for c in parse_commands(entry.value, self._specifiers)]
            except ExecSyntaxError as e:
                raise self._error(where, f"ExecStart: {e}") from None
        return commands

    def _command(self) -> tuple[Where, Command]:
        commands = self.exec_start()
        if not commands:
            raise UnitError(f"{self.name} has no ExecStart= (in {', '.join(f.path for f in self.files)})")
        if len(commands) > 1:
            raise UnitError(
                f"{self.name} runs {len(commands)} ExecStart= commands; the cockpit edits a unit that runs one"
            )
        return commands[0]

    @property
    def defined_in(self) -> str:
        """The file whose `ExecStart=` systemd runs: where flag edits land."""
        return self.files[self._command()[0].file].path

    def _assignments(self) -> list[tuple[Where, int, Assignment]]:
        """The `Environment=` assignments in effect (after the last reset), in order; lines that
        systemd ignores as a whole are skipped here too."""
        found: list[tuple[Where, int, Assignment]] = []
        for where, entry in self._directives("Environment"):
            if not entry.value:
                found = []
                continue
            try:
                assignments = parse_assignments(entry.value, self._specifiers)
            except ExecSyntaxError:
                continue
            found += [(where, k, a) for k, a in enumerate(assignments) if a.valid]
        return found

    def environment_files(self) -> list[EnvironmentFile]:
        """The `EnvironmentFile=` paths in effect, in the order systemd reads them."""
        files: list[EnvironmentFile] = []
        for _, entry in self._directives("EnvironmentFile"):
            if not entry.value:
                files = []
                continue
            optional = entry.value.startswith("-")
            try:
                path, _ = resolve_specifiers(entry.value[1:] if optional else entry.value, self._specifiers)
            except ExecSyntaxError:
                continue  # systemd ignores the line too
            files.append(EnvironmentFile(path, optional))
        return files

    def _env_file_texts(self) -> list[tuple[str, str | None]]:
        """(path, text or None when not given) for each environment file, globs expanded over
        the texts given."""
        out: list[tuple[str, str | None]] = []
        for env_file in self.environment_files():
            if is_glob(env_file.path):
                out += [(p, self.texts[p]) for p in sorted(self.texts) if fnmatch.fnmatchcase(p, env_file.path)]
            else:
                out.append((env_file.path, self.texts.get(env_file.path)))
        return out

    def _file_environment(self) -> dict[str, tuple[str, str]]:
        """Variable -> (value, file) from the environment files whose text was given."""
        env: dict[str, tuple[str, str]] = {}
        for path, text in self._env_file_texts():
            if text is not None:
                env.update({k: (v, path) for k, v in parse_env_file(text).items()})
        return env

    def working_directory(self) -> str | None:
        """The last `WorkingDirectory=` (its `-` prefix dropped); None when unset or `~`."""
        values = [e.value for _, e in self._directives("WorkingDirectory")]
        value = values[-1].lstrip("-") if values else ""
        try:
            path, _ = resolve_specifiers(value, self._specifiers) if value else ("", None)
        except ExecSyntaxError:
            return None
        return path if path.startswith("/") else None

    def environment(self) -> dict[str, str]:
        """The variables the process gets from the unit: `Environment=`, overridden by the
        environment files whose text was given."""
        env = {a.key: a.value for _, _, a in self._assignments()}
        env.update({k: v for k, (v, _) in self._file_environment().items()})
        return env

    def _args(self) -> tuple[Command, list[Arg], set[str]]:
        if "args" not in self._memo:
            command = self._command()[1]
            args, missing = expand_env(command, self.environment())
            self._memo["args"] = (command, args, missing)
        command, args, missing = self._memo["args"]
        return command, list(args), set(missing)

    def exec(self) -> list[str]:
        """The argv systemd starts the process with."""
        return [a.value for a in self._args()[1]]

    def items(self) -> list[Item]:
        """The flags and positional arguments after the program, in order."""
        return _items(self._args()[1], self.catalog)[1]

    def flags(self) -> list[Item]:
        return [i for i in self.items() if i.is_flag]

    def unresolved(self) -> list[str]:
        """What only the host can resolve: `%` specifiers, `$VAR`s the files given do not set,
        and environment files whose text was not given."""
        command, _, missing = self._args()
        specifiers = sorted({s for w in command.words for s in w.specifiers})
        files = [p for p, text in self._env_file_texts() if text is None]
        return specifiers + [f"${name}" for name in sorted(missing)] + files

    def describe(self) -> dict:
        """`cockpit unit show --json`."""
        return {
            "unit": self.path,
            "defined_in": self.defined_in,
            "exec": self.exec(),
            "flags": [{"name": i.name, "value": i.json_value} for i in self.flags()],
            "environment": self.environment(),
            "environment_files": [("-" if f.optional else "") + f.path for f in self.environment_files()],
            "unresolved": self.unresolved(),
        }

    # -- editing ----------------------------------------------------------------------------

    def _edited(self, where: Where, text: str) -> Unit:
        files = list(self.files)
        files[where.file] = files[where.file].replaced({where.entry: text})
        return replace(self, files=tuple(files))

    def set_flag(self, name: str, value: Value = None) -> Unit:
        """Set `--name` to `value` (None: a switch; a sequence: a flag that takes several values),
        in place when the command has it (its last occurrence), else appended."""
        name = flag_name(name)
        plan = _Plan.of(self)
        matches = plan.occurrences(name)
        value = tuple(value) if isinstance(value, (list, tuple)) else value
        if matches:
            item = plan.items[matches[-1]]
            if item.value == value:
                return self
            plan.replace(matches[-1], plan.flag_words(item.name, value, item.inline, matches[-1]))
        else:
            plan.append(plan.flag_words(name, value, False, None))
        return self._edited(plan.where, plan.render())

    def unset_flag(self, name: str) -> Unit:
        """Remove every occurrence of `--name` and its values."""
        name = flag_name(name)
        plan = _Plan.of(self)
        matches = plan.occurrences(name)
        if not matches:
            raise UnitError(f"{self.name} has no flag {name}")
        for k in matches:
            plan.remove(k)
        return self._edited(plan.where, plan.render())

    def _check_not_from_file(self, key: str) -> None:
        from_file = self._file_environment().get(key)
        if from_file is not None:
            raise UnitError(
                f"{key} is set in the environment file {from_file[1]}, which overrides Environment=: "
                "edit that file instead"
            )

    def set_env(self, key: str, value: str) -> Unit:
        """Set a variable: in the `Environment=` assignment that sets it now, else on a new
        `Environment=` line after the last one (or before `ExecStart=`)."""
        try:
            word = quote_assignment(key, value)
        except ValueError as e:
            raise UnitError(str(e)) from None
        self._check_not_from_file(key)
        current = [(w, k, a) for w, k, a in self._assignments() if a.key == key]
        if current:
            where, index, assignment = current[-1]
            if assignment.value == value:
                return self
            return self._edited(where, self._env_line(where, {index: word}))
        return self._insert_env_line(f"Environment={word}")

    def unset_env(self, key: str) -> Unit:
        """Remove every assignment in effect of `key` (a line left empty goes away)."""
        self._check_not_from_file(key)
        current = [(w, k) for w, k, a in self._assignments() if a.key == key]
        if not current:
            raise UnitError(f"{self.name} does not set {key} with Environment=")
        unit = self
        by_line: dict[Where, dict[int, str]] = {}
        for where, index in current:
            by_line.setdefault(where, {})[index] = ""
        for where in sorted(by_line, key=lambda w: (w.file, -w.entry)):  # later lines first: indices hold
            unit = unit._edited(where, unit._env_line(where, by_line[where]))
        return unit

    def _env_line(self, where: Where, words: dict[int, str]) -> str:
        """An `Environment=` line re-rendered with some words replaced ("" drops one)."""
        entry = self.files[where.file].entries[where.entry]
        assignments = parse_assignments(entry.value or "", self._specifiers)
        kept = [words.get(k, a.raw) for k, a in enumerate(assignments)]
        kept = [w for w in kept if w]
        line = _key_part(entry) + " ".join(kept) + _final_eol(entry) if kept else ""
        return _kept_comments(entry) + line + _trailing_blank(entry)

    def _insert_env_line(self, line: str) -> Unit:
        environment = self._directives("Environment")
        if environment:
            where = environment[-1][0]
            offset = 1
        else:
            commands = self.exec_start()
            if not commands:
                raise UnitError(f"{self.name} has no [Service] ExecStart= to put Environment= beside")
            where, offset = commands[0][0], 0
        f = self.files[where.file]
        anchor = f.entries[where.entry]
        eol = f.eol()
        if offset and not anchor.lines[-1].eol:  # the anchor is the file's last line, without a newline
            text = eol + line
        else:
            text = line + eol
        files = list(self.files)
        files[where.file] = f.replaced({}, {where.entry + offset: text})
        return replace(self, files=tuple(files))


def _items(args: list[Arg], catalog: Catalog | None) -> tuple[int, list[Item]]:
    return parse_items([a.value for a in args], catalog, frozenset(i for i, a in enumerate(args) if a.opaque))


# --- rendering an edited directive ----------------------------------------------------------


def _key_part(entry: Entry) -> str:
    """`ExecStart=` as written on the directive's first line (spacing around `=` kept)."""
    m = re.match(r"[^=]*=[ \t]*", entry.lines[0].text)
    return m.group() if m else f"{entry.key}="


def _final_eol(entry: Entry) -> str:
    """The line ending after the directive's last line of text ("" at the end of a file)."""
    content = [line for line in entry.lines if not line.is_comment and not line.is_blank] or list(entry.lines)
    return content[-1].eol


def _kept_comments(entry: Entry) -> str:
    return "".join(line.text + line.eol for line in entry.lines[1:] if line.is_comment)


def _trailing_blank(entry: Entry) -> str:
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
class _Plan:
    """The edited command, one group per output line, with the comments found inside it."""

    unit: Unit
    where: Where
    command: Command
    args: list[Arg]
    items: list[Item]
    groups: list[_Group]

    def occurrences(self, name: str) -> list[int]:
        """The items that are `name` (any spelling the release accepts for it)."""
        return [
            k for k, item in enumerate(self.items) if item.is_flag and same_flag(item.name, name, self.unit.catalog)
        ]

    @classmethod
    def of(cls, unit: Unit) -> _Plan:
        where, command = unit._command()
        args, _ = expand_env(command, unit.environment())
        head, items = _items(args, unit.catalog)
        owner: dict[int, set[int]] = {}
        for k, item in enumerate(items):
            for a in item.args:
                owner.setdefault(args[a].word, set()).add(k)
        in_head = {args[a].word for a in range(head)} | {0, 1 if "@" in command.prefix else 0}
        entry = unit.files[where.file].entries[where.entry]
        groups: list[_Group] = []
        for index, word in enumerate(command.words):
            key = frozenset() if index in in_head else frozenset(owner.get(index, {-1 - index}))
            if groups and groups[-1].items == key:
                groups[-1].raws.append(word.raw)
            else:
                groups.append(_Group([word.raw], key, entry.line_of(word.start)))
        return cls(unit, where, command, args, items, groups)

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
        f = self.unit.files[self.where.file]
        entry = f.entries[self.where.entry]
        eol = entry.lines[0].eol or f.eol()
        comments = [(i, line.text + line.eol) for i, line in enumerate(entry.lines) if line.is_comment]
        lines = [g for g in self.groups if g.raws]
        out: list[str] = []
        for n, group in enumerate(lines):
            while n and comments and group.origin is not None and comments[0][0] < group.origin:
                out.append(comments.pop(0)[1])
            text = (_key_part(entry) if n == 0 else INDENT) + " ".join(group.raws)
            out.append(text + (" \\" + eol if n + 1 < len(lines) else ""))
        out.append(_final_eol(entry))
        out += [c for _, c in comments]
        return "".join(out) + _trailing_blank(entry)
