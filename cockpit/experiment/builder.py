"""An experiment built in the app: each edit of the flag editor added to the unit's plan as a variant.

The editor already reads an edit the way a variant needs it (every flag and `Environment=`
variable, checked by the pre-flight as it is typed), so building a plan is adding edits to a
file: `~/.local/state/cockpit/experiments/<host>/<unit>.toml`, started with the unit as found
(the base) and the workload and targets of docs/experiments.md's example, which the operator may
change in any editor before `E` runs it. The file is read back through `parse_plan` before it
is replaced: an addition that would not read leaves the file as it was.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from cockpit.errors import UsageError
from cockpit.experiment.plan import FlagValue, Variant, parse_plan
from cockpit.localfs import write_atomic
from cockpit.statedir import safe_name, state_dir
from cockpit.systemd.unit import Unit, environment_changes

BASE = "as-found"
_START = """\
# An experiment on {unit} of {host}, built in the cockpit: each `v` in the flag editor adds
# its edit as a variant. Change the workload and the targets as you need (docs/experiments.md).
name = {name}
host = {host_text}
unit = {unit_text}
base = "{base}"
end = "restore"

[workload]
concurrency = [1, 2, 4, 8]
requests = 32
warmup = 2
input_len = 256
output_len = 128

[slo]
ttft_p95_ms = 1000
itl_p95_ms = 50

[[variants]]
name = "{base}"
"""


def plan_path(host: str, unit: str) -> Path:
    return state_dir("experiments", host) / f"{safe_name(unit)}.toml"


def variant_of(loaded: Unit, edited: Unit, name: str) -> Variant:
    """The flags and variables that differ between the unit as read and as edited."""
    before = {i.name: i.value for i in loaded.flags() if i.name}
    after = {i.name: i.value for i in edited.flags() if i.name}
    flags: dict[str, FlagValue] = {n.lstrip("-"): v for n, v in after.items() if n not in before or before[n] != v}
    unset = tuple(n.lstrip("-") for n in before if n not in after)
    environment, unset_environment = environment_changes(loaded, edited)
    variant = Variant(name, flags, unset, environment, tuple(unset_environment))
    if variant.words() == "as found":
        raise UsageError("the editor holds no change of a flag or variable: there is no variant to add")
    return variant


def _toml(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's (quotes, backslashes, controls, \\uXXXX)."""
    return json.dumps(text)


def _value(value: FlagValue) -> str:
    if value is None:
        return "true"
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return _toml(value)


def variant_toml(variant: Variant) -> str:
    lines = ["", "[[variants]]", f"name = {_toml(variant.name)}"]
    if variant.flags:
        lines.append("set = { " + ", ".join(f"{_toml(n)} = {_value(v)}" for n, v in variant.flags.items()) + " }")
    if variant.unset:
        lines.append("unset = [" + ", ".join(_toml(n) for n in variant.unset) + "]")
    if variant.environment:
        lines.append(
            "environment = { " + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in variant.environment.items()) + " }"
        )
    if variant.unset_environment:
        lines.append("unset_environment = [" + ", ".join(_toml(k) for k in variant.unset_environment) + "]")
    return "\n".join(lines) + "\n"


def _name_for(variant: Variant, taken: set[str]) -> str:
    """A short name from the change's words (`max-running-requests-8`), made unique."""
    words = re.sub(r"[^A-Za-z0-9.]+", "-", variant.words().replace("--", "")).strip("-")[:40].strip("-") or "edit"
    name, n = words, 2
    while name in taken:
        name, n = f"{words}-{n}", n + 1
    return name


def add_variant(
    host: str, unit_name: str, loaded: Unit, edited: Unit, path: Path | None = None
) -> tuple[Path, str, int]:
    """Add the editor's change to the unit's plan (started when there is none); returns the
    file, the variant's name and how many variants the plan holds now."""
    path = path or plan_path(host, unit_name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = _START.format(
            unit=unit_name.replace("\n", " "),
            host=host.replace("\n", " "),
            name=_toml(f"{unit_name.removesuffix('.service')} tuning"),
            host_text=_toml(host),
            unit_text=_toml(unit_name),
            base=BASE,
        )
    plan = parse_plan(text, path)  # a file the operator broke is said before anything is added
    draft = variant_of(loaded, edited, "draft")
    variant = replace(draft, name=_name_for(draft, {v.name for v in plan.variants}))
    same = next((v for v in plan.variants if _fields(v) == _fields(variant)), None)
    if same is not None:
        raise UsageError(f"the plan {path} already holds this change as variant {same.name!r}")
    text = text + ("" if text.endswith("\n") else "\n") + variant_toml(variant)
    added = parse_plan(text, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode())
    return path, variant.name, len(added.variants)


def _fields(v: Variant) -> tuple[object, ...]:
    return (v.flags, v.unset, v.environment, v.unset_environment)
