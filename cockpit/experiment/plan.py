"""An experiment as its TOML file says it: the variants of one unit, the workload each one
meets, and the service-level objectives its answer is judged by.

A variant is a change of the unit as the experiment first found it (flags set and removed,
`Environment=` set and removed), never of the variant before: the order of the list changes
nothing of what each one runs. Mistakes are said as `FILE:LINE: key: what is wrong`, as the
config's are, since the file is fixed in an editor over SSH.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cockpit.config.reader import TomlReader, load_toml
from cockpit.errors import UsageError
from cockpit.systemd.unit import Unit

RESTORE = "restore"  # `end`: put the unit back as it was found

_TOP_KEYS = ["name", "host", "unit", "deployment", "end", "base", "workload", "slo", "variants"]
_WORKLOAD_KEYS = [
    *("concurrency", "rates", "requests", "duration", "warmup"),
    *("input_len", "output_len", "endpoint", "repeats"),
]
_SLO_KEYS = ["ttft_p95_ms", "itl_p95_ms", "e2e_p95_ms", "error_rate"]
_VARIANT_KEYS = ["name", "set", "unset", "environment", "unset_environment"]
ENDPOINTS = ("completions", "chat")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


FlagValue = str | tuple[str, ...] | None  # None: a switch; a tuple: a flag of several values


def _text(value: str | tuple[str, ...]) -> str:
    return " ".join(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Variant:
    name: str
    flags: dict[str, FlagValue] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    unset_environment: tuple[str, ...] = ()

    def applied(self, unit: Unit) -> Unit:
        """`unit` (as the experiment found it) with this variant's changes; a flag or variable to
        remove that the unit does not have is already as asked."""
        for name, value in self.flags.items():
            unit = unit.set_flag(name, value)
        for name in self.unset:
            if any(i.name == "--" + name.lstrip("-") for i in unit.flags()):
                unit = unit.unset_flag(name)
        for key, value in self.environment.items():
            unit = unit.set_env(key, value)
        for key in self.unset_environment:
            if key in unit.environment():
                unit = unit.unset_env(key)
        return unit

    def words(self) -> str:
        """The change as an operator would type it; `as found` for none."""
        parts = [f"--{n.lstrip('-')}" + ("" if v is None else f" {_text(v)}") for n, v in self.flags.items()]
        parts += [f"no --{n.lstrip('-')}" for n in self.unset]
        parts += [f"{k}={v}" for k, v in self.environment.items()] + [f"no {k}" for k in self.unset_environment]
        return ", ".join(parts) or "as found"


@dataclass(frozen=True)
class Workload:
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    rates: tuple[float, ...] = ()  # requests/s with Poisson arrivals, after the closed-loop levels
    requests: int = 32  # measured requests per level
    duration_s: float | None = None  # or each level this long (every request sent in it measured)
    warmup: int = 2
    input_len: tuple[int, int] = (256, 256)  # drawn uniformly from [low, high]
    output_len: tuple[int, int] = (128, 128)
    endpoint: str = "completions"
    repeats: int = 1  # each level this many times: two or more measure its noise


@dataclass(frozen=True)
class Slo:
    """A level meets them when each p95 is at most its target and no more than `error_rate` of
    its requests failed; a request counts toward goodput when it meets each target itself."""

    ttft_p95_ms: float | None = None
    itl_p95_ms: float | None = None
    e2e_p95_ms: float | None = None
    error_rate: float = 0.0

    def words(self) -> str:
        parts = [
            f"{what} p95 ≤ {v:g} ms"
            for what, v in (("TTFT", self.ttft_p95_ms), ("ITL", self.itl_p95_ms), ("E2E", self.e2e_p95_ms))
            if v is not None
        ]
        return ", ".join([*parts, f"errors ≤ {self.error_rate:.0%}"])


@dataclass(frozen=True)
class Plan:
    path: str
    name: str
    host: str | None
    unit: str | None
    deployment: str | None  # a [deployments] entry of the config: its nodes written and restarted as one
    variants: tuple[Variant, ...]
    workload: Workload
    slo: Slo
    base: str  # the variant the others are compared with
    end: str  # RESTORE, or the variant to leave the unit on

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_plan(path: Path) -> Plan:
    """The experiment in `path`; a UsageError naming the file, line and key of the first mistake."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the experiment {path}: {e}") from None
    return parse_plan(text, path)


def parse_plan(text: str, path: Path) -> Plan:
    doc = load_toml(text, path)
    r = TomlReader(path, text)
    r.known_keys(doc, (), _TOP_KEYS)
    raw_variants = doc.get("variants")
    if not isinstance(raw_variants, list) or not raw_variants:
        raise r.fail(("variants",), "give at least one [[variants]] table (its name, and what it changes)")
    variants = tuple(_variant(r, i, v) for i, v in enumerate(raw_variants))
    names = [v.name for v in variants]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise r.fail(
                ("variants", str(i + 1), "name"), f"{name!r} names an earlier variant too: each names one result"
            )
    base = r.get(doc, (), "base", lambda v: v in names, f"one of the variants' names ({', '.join(names)})", names[0])
    end = r.get(doc, (), "end", lambda v: v == RESTORE or v in names, f"{RESTORE!r} or a variant's name", RESTORE)
    return Plan(
        path=str(path),
        name=r.get(doc, (), "name", _nonempty, "a name", path.stem),
        host=r.get(doc, (), "host", _nonempty, "a host's name", None),
        unit=r.get(doc, (), "unit", _nonempty, "a unit's name", None),
        deployment=r.get(doc, (), "deployment", _nonempty, "a [deployments] entry's name", None),
        variants=variants,
        workload=_workload(r, doc.get("workload", {})),
        slo=_slo(r, doc.get("slo", {})),
        base=base,
        end=end,
    )


def _nonempty(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != "" and v.isprintable()


def _whole(minimum: int):  # noqa: ANN202 - a check for TomlReader.get
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _length(r: TomlReader, t: dict[str, Any], key: tuple[str, ...], name: str, default: int) -> tuple[int, int]:
    """A fixed length, or `[low, high]` drawn uniformly."""
    value = t.get(name, default)
    if _whole(1)(value):
        return value, value
    if isinstance(value, list) and len(value) == 2 and all(_whole(1)(x) for x in value) and value[0] <= value[1]:
        return value[0], value[1]
    raise r.fail(key + (name,), f"expected tokens as a whole number, or [low, high] with low ≤ high, got {value!r}")


def _workload(r: TomlReader, raw: Any) -> Workload:
    key = ("workload",)
    t = r.table(raw, key)
    r.known_keys(t, key, _WORKLOAD_KEYS)
    conc = r.get(
        t,
        key,
        "concurrency",
        lambda v: isinstance(v, list) and all(_whole(1)(x) for x in v),
        "an array of whole numbers of at least 1",
        None,
    )
    rates = r.get(
        t, key, "rates", lambda v: isinstance(v, list) and all(_positive_number(x) for x in v), "requests/s > 0", []
    )
    concurrency = tuple(sorted(set(conc))) if conc is not None else (() if rates else Workload.concurrency)
    if not concurrency and not rates:
        raise r.fail(key + ("concurrency",), "give at least one concurrency level or rate")
    if "requests" in t and "duration" in t:
        raise r.fail(key + ("duration",), "give requests or duration (seconds) a level, not both")
    return Workload(
        concurrency=concurrency,
        rates=tuple(sorted({float(x) for x in rates})),
        requests=r.get(t, key, "requests", _whole(1), "a whole number of at least 1", Workload.requests),
        duration_s=r.get(t, key, "duration", _positive_number, "seconds > 0", None),
        warmup=r.get(t, key, "warmup", _whole(0), "a whole number", Workload.warmup),
        input_len=_length(r, t, key, "input_len", Workload.input_len[0]),
        output_len=_length(r, t, key, "output_len", Workload.output_len[0]),
        endpoint=r.get(
            t, key, "endpoint", lambda v: v in ("completions", "chat"), "'completions' or 'chat'", "completions"
        ),
        repeats=r.get(t, key, "repeats", _whole(1), "a whole number of at least 1", 1),
    )


def _slo(r: TomlReader, raw: Any) -> Slo:
    key = ("slo",)
    t = r.table(raw, key)
    r.known_keys(t, key, _SLO_KEYS)
    ms = {n: r.get(t, key, n, _positive_number, "milliseconds > 0", None) for n in _SLO_KEYS[:3]}
    if all(v is None for v in ms.values()):
        raise r.fail(
            key, f"give at least one latency target ({', '.join(_SLO_KEYS[:3])}): the answer is judged by them"
        )
    share = r.get(
        t, key, "error_rate", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
        "a share from 0 to below 1 (0.01 is 1%)", 0.0,
    )  # fmt: skip
    return Slo(**{k: float(v) if v is not None else None for k, v in ms.items()}, error_rate=float(share))


def _word(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and "\n" not in value and "\r" not in value:
        return value
    return None


def _flag_value(r: TomlReader, key: tuple[str, ...], value: Any) -> FlagValue:
    """TOML's value as the flag's words: `true` a switch, numbers as written, text as it is
    (quoting is the unit's to do), an array a flag of several values (`--cuda-graph-bs 1 2 4`)."""
    if value is True:
        return None
    if isinstance(value, list) and value and all(_word(v) is not None for v in value):
        return tuple(str(_word(v)) for v in value)
    word = _word(value)
    if word is not None:
        return word
    raise r.fail(key, f"expected a value on one line, a number, an array of them, or true for a switch, got {value!r}")


def _variant(r: TomlReader, index: int, raw: Any) -> Variant:
    key = ("variants", str(index + 1))  # the TOML's [[variants]] tables, counted from 1
    t = r.table(raw, key)
    r.known_keys(t, key, _VARIANT_KEYS)
    name = t.get("name")
    if not isinstance(name, str) or not _nonempty(name):
        raise r.fail(key, "each variant needs a name (one line of text)")
    flags_raw = r.table(t.get("set", {}), key + ("set",))
    flags: dict[str, FlagValue] = {}
    for flag, value in flags_raw.items():
        if not re.fullmatch(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*", flag):
            raise r.fail(key + ("set", flag), "not a flag's name (letters, digits, - and _)")
        flags[flag.lstrip("-")] = _flag_value(r, key + ("set", flag), value)
    env_raw = r.table(t.get("environment", {}), key + ("environment",))
    for var, value in env_raw.items():
        if not _ENV_KEY.fullmatch(var) or not isinstance(value, str):
            raise r.fail(key + ("environment", var), 'expected NAME = "text" (a variable\'s name, and its value)')
    unset = r.get(t, key, "unset", _names, "an array of flag names", [])
    unset_env = r.get(t, key, "unset_environment", _names, "an array of variable names", [])
    both = set(flags) & {u.lstrip("-") for u in unset}
    if both:
        raise r.fail(key + ("unset",), f"--{sorted(both)[0]} is both set and unset in {name!r}")
    return Variant(name, flags, tuple(u.lstrip("-") for u in unset), dict(env_raw), tuple(unset_env))


def _names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and re.fullmatch(r"-{0,2}[A-Za-z_][\w-]*", x) for x in v)
