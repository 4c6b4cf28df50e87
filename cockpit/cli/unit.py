"""`cockpit unit show|set`: the unit-file model, headless, on files of this machine.

`show` prints what systemd will run (the contract in docs/architecture.md); `set` re-renders the file that
defines the effective `ExecStart=` with the flag changes, to stdout or, with `--in-place`,
atomically (a temp file in the same directory, fsync, rename). Drop-ins are read from beside the
unit file (`UNIT_FILE.d/*.conf`), environment files from the paths the unit names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.errors import CockpitError, UsageError

if TYPE_CHECKING:
    from cockpit.systemd.unit import Unit


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    unit = subparsers.add_parser(
        "unit",
        help="show or edit a unit file's command line, as systemd reads it",
        description="Read a systemd service file (and its drop-ins in UNIT_FILE.d/) the "
        "way systemd does; change flags with every other byte kept.",
    )
    sub = unit.add_subparsers(dest="unit_command", required=True, parser_class=type(unit))
    show = sub.add_parser("show", help="the argv systemd runs, its flags and environment")
    show.add_argument("unit_file", metavar="UNIT_FILE")
    show.add_argument("--json", action="store_true", help="print {unit, defined_in, exec, flags, environment}")
    edit = sub.add_parser("set", help="re-render the unit with flags set or removed")
    edit.add_argument("unit_file", metavar="UNIT_FILE")
    add_change_arguments(edit)
    edit.add_argument("--in-place", action="store_true", help="write the file atomically instead of printing it")
    return unit


def add_change_arguments(parser: argparse.ArgumentParser) -> None:
    """`--flag` and `--unset`, as `with_changes` takes them (`unit set`, `deployment set`)."""
    parser.add_argument(
        "--flag",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="set a flag (NAME with or without its dashes; a bare NAME is a switch); repeatable",
    )
    parser.add_argument("--unset", action="append", default=[], metavar="NAME", help="remove a flag; repeatable")


def run(args: argparse.Namespace) -> int:
    try:
        if args.unit_command == "show":
            return _show(args)
        return _set(args)
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2


def _load(unit_file: str) -> Unit:
    from cockpit.systemd.unit import load_unit, read_local

    path = Path(unit_file)
    if not path.is_file():
        raise UsageError(f"{unit_file}: no such unit file")
    try:
        return load_unit(read_local(path), str(path), search_path=())
    except OSError as e:
        raise UsageError(f"{e.filename}: {e.strerror}") from None


def _show(args: argparse.Namespace) -> int:
    described = _load(args.unit_file).describe()
    if args.json:
        print(json.dumps(described, ensure_ascii=False))
        return 0
    print(f"unit        {described['unit']}")
    print(f"ExecStart=  {described['defined_in']}")
    print(f"exec        {json.dumps(described['exec'], ensure_ascii=False)}")
    for flag in described["flags"]:
        value = "" if flag["value"] is None else " " + json.dumps(flag["value"], ensure_ascii=False)
        print(f"  {flag['name']}{value}")
    for key, value in described["environment"].items():
        print(f"env         {key}={json.dumps(value, ensure_ascii=False)}")
    for name in described["unresolved"]:
        print(f"unresolved  {name} (only the host knows it)")
    return 0


def _parse_flag(spec: str) -> tuple[str, str | None]:
    name, eq, value = spec.partition("=")
    if not name.strip("-") or any(c.isspace() for c in name):
        raise UsageError(f"--flag {spec!r}: expected NAME=VALUE or NAME")
    return name, value if eq else None


def _shown(value: object) -> str:
    return " ".join(value) if isinstance(value, tuple) else str(value)


def with_changes(unit: Unit, flags: list[str], unsets: list[str], command: str = "unit set") -> Unit:
    """`unit` with `--flag NAME[=VALUE]` and `--unset NAME` applied, as `unit set` and
    `deployment set` take them."""
    if not flags and not unsets:
        raise UsageError(f"{command}: give at least one --flag NAME=VALUE or --unset NAME")
    changes = [_parse_flag(spec) for spec in flags]
    both = {n.lstrip("-") for n, _ in changes} & {n.lstrip("-") for n in unsets}
    if both:
        raise UsageError(f"--{sorted(both)[0]} is both set and unset")
    current = {i.name: i.value for i in unit.flags() if i.name}
    for name, value in changes:
        dashed = name if name.startswith("-") else "--" + name
        if value is None and current.get(dashed) is not None:
            raise UsageError(
                f"{dashed} has the value {_shown(current[dashed])} now: give --flag {name}=VALUE to "
                f"change it (a bare {name} would leave it with no value), or --unset {name}"
            )
        unit = unit.set_flag(name, value)
    for name in unsets:
        unit = unit.unset_flag(name)
    return unit


def _set(args: argparse.Namespace) -> int:
    from cockpit.localfs import write_atomic
    from cockpit.systemd.unit import encode

    unit = with_changes(_load(args.unit_file), args.flag, args.unset)
    target = unit.defined_in
    text = unit.render(target)
    if args.in_place:
        if unit.changed():
            write_atomic(Path(target), encode(text))
        return 0
    if os.path.abspath(target) != os.path.abspath(args.unit_file):
        print(f"cockpit: the change lands in {target}, which defines ExecStart=", file=sys.stderr)
    sys.stdout.buffer.write(encode(text))
    sys.stdout.flush()
    return 0
