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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cockpit.systemd.exec_plan import (
    ExecPlan,
    UnitError,
    Where,
    exec_items,
    final_eol,
    kept_comments,
    key_part,
    trailing_blank,
)
from cockpit.systemd.unit_args import FlagTable, Item, Value, flag_name
from cockpit.systemd.unit_env import Assignment, parse_assignments, parse_env_file, quote_assignment
from cockpit.systemd.unit_exec import (
    Arg,
    Command,
    ExecSyntaxError,
    expand_env,
    name_specifiers,
    parse_commands,
    resolve_specifiers,
)
from cockpit.systemd.unit_paths import SYSTEM_UNIT_PATH, dropin_dirs, search_path_for, select_dropins
from cockpit.systemd.unit_syntax import Entry, UnitFile, UnitSyntaxError, parse_unit_file

SECTION = "Service"


def decode(data: str | bytes) -> str:
    """File bytes as text that encodes back to the same bytes, even when not UTF-8."""
    return data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def read_local(unit_file: str | Path, search_path: Sequence[str] = ()) -> dict[str, str]:
    """The texts `load_unit` needs, from this machine: the unit file, its drop-ins (beside it in
    `UNIT.d/` and in `search_path`) and the environment files it names that exist here (a
    missing optional one reads as empty)."""
    fragment = str(unit_file)
    name = os.path.basename(fragment)
    texts = {fragment: decode(Path(fragment).read_bytes())}
    for directory in dropin_dirs(name, search_path_for(fragment, search_path)):
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
    catalog: FlagTable | None = None,
) -> Unit:
    """The unit whose file is `texts[fragment]`, with the drop-ins among `texts` that systemd
    applies to it; the other texts are there for `EnvironmentFile=`. Raises UnitSyntaxError
    (`FILE:LINE: ...`) for a line systemd would refuse."""
    decoded = {path: decode(text) for path, text in texts.items()}
    if fragment not in decoded:
        raise UnitError(f"{fragment}: no such unit file among the files given")
    unit_name = name or os.path.basename(fragment)
    paths = select_dropins(unit_name, list(decoded), search_path_for(fragment, search_path))
    files = tuple(parse_unit_file(p, decoded[p]) for p in [fragment, *paths])
    return Unit(unit_name, files, decoded, catalog)


# --- the unit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentFile:
    path: str  # specifiers resolved; may be a glob
    optional: bool  # written with a leading `-`: a missing file is not an error


@dataclass(frozen=True)
class Unit:
    """A unit file and its drop-ins, in the order systemd applies them; edits return a new Unit."""

    name: str
    files: tuple[UnitFile, ...]  # the unit file first, then the drop-ins
    texts: Mapping[str, str]  # every text given, as given (environment files among them)
    catalog: FlagTable | None = None
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
        value = (values[-1] or "").lstrip("-") if values else ""
        try:
            path, _ = resolve_specifiers(value, self._specifiers) if value else ("", None)
        except ExecSyntaxError:
            return None
        return path if path.startswith("/") else None

    def setting(self, key: str) -> str | None:
        """The value systemd takes for a [Service] `key=`: the last one, drop-ins after the unit
        file; None when none is given or the last is empty (which resets it to the default)."""
        values = [e.value for _, e in self._directives(key)]
        return (values[-1] or None) if values else None

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
        return exec_items(self._args()[1], self.catalog)[1]

    def flags(self) -> list[Item]:
        return [i for i in self.items() if i.is_flag]

    def flag_values(self) -> dict[str, str | None]:
        """Flag -> its value (several values joined by spaces; None for a switch)."""
        return {i.name: " ".join(i.value) if isinstance(i.value, tuple) else i.value for i in self.flags() if i.name}

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
        plan = ExecPlan.of(self.files, *self._command(), self.environment(), self.catalog)
        matches = plan.occurrences(name)
        value = tuple(value) if isinstance(value, (list, tuple)) else value
        if matches:
            item = plan.items[matches[-1]]
            if item.value == value:
                return self
            plan.replace(matches[-1], plan.flag_words(item.name or name, value, item.inline, matches[-1]))
        else:
            plan.append(plan.flag_words(name, value, False, None))
        return self._edited(plan.where, plan.render())

    def unset_flag(self, name: str) -> Unit:
        """Remove every occurrence of `--name` and its values."""
        name = flag_name(name)
        plan = ExecPlan.of(self.files, *self._command(), self.environment(), self.catalog)
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

    def set_setting(self, key: str, value: str) -> Unit:
        """Set a [Service] `key=` (one whose value is a plain word, `KillMode=mixed`): in place
        where its last directive is, else on a new line at the end of the [Service] section of
        the file whose `ExecStart=` systemd runs, where flag edits land."""
        if not value or any(c in value for c in " \t\n\r\\%$"):
            raise UnitError(f"{key}={value!r}: the cockpit sets a plain word only")
        given = self._directives(key)
        if given:
            where, entry = given[-1]
            if entry.value == value:
                return self
            line = key_part(entry) + value + final_eol(entry)
            return self._edited(where, kept_comments(entry) + line + trailing_blank(entry))
        at = self._command()[0].file
        f = self.files[at]
        last = max(i for i, e in enumerate(f.entries) if e.kind == "directive" and e.section == SECTION)
        eol = f.eol()
        anchor = f.entries[last]
        text = f"{key}={value}" + eol
        if not anchor.lines[-1].eol:  # the file's last line, without a newline: the new line goes after one
            text = eol + f"{key}={value}"
        files = list(self.files)
        files[at] = f.replaced({}, {last + 1: text})
        return replace(self, files=tuple(files))

    def _env_line(self, where: Where, words: dict[int, str]) -> str:
        """An `Environment=` line re-rendered with some words replaced ("" drops one)."""
        entry = self.files[where.file].entries[where.entry]
        assignments = parse_assignments(entry.value or "", self._specifiers)
        kept = [words.get(k, a.raw) for k, a in enumerate(assignments)]
        kept = [w for w in kept if w]
        line = key_part(entry) + " ".join(kept) + final_eol(entry) if kept else ""
        return kept_comments(entry) + line + trailing_blank(entry)

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
        # When the anchor is the file's last line, without a newline, the new line goes after one.
        text = eol + line if offset and not anchor.lines[-1].eol else line + eol
        files = list(self.files)
        files[where.file] = f.replaced({}, {where.entry + offset: text})
        return replace(self, files=tuple(files))


def environment_changes(loaded: Unit, edited: Unit) -> tuple[dict[str, str], list[str]]:
    """The `Environment=` variables `edited` sets or changes against `loaded`, and those it removes."""
    before, after = loaded.environment(), edited.environment()
    return {k: v for k, v in after.items() if before.get(k) != v}, [k for k in before if k not in after]
