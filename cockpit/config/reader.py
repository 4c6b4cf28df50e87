"""Reading the config file: TOML into the schema's dataclasses.

Every mistake is reported as `FILE:LINE: dotted.key: what is wrong`, because the person
reading it is usually fixing a config in an editor over SSH and wants to jump to the line.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from cockpit.config.schema import (
    DEFAULT_CONCURRENCY,
    Config,
    DeploymentConfig,
    HostConfig,
    LoadProfile,
    UIConfig,
    UnitConfig,
)
from cockpit.config.toml_lines import _KeyLines
from cockpit.errors import UsageError
from cockpit.suggest import closest

T = TypeVar("T")

# --- validation ------------------------------------------------------------------------


class TomlReader:
    """Checks one parsed document against the schema, raising the first error with its line."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.key_lines = _KeyLines(text)

    def fail(self, key: tuple[str, ...], message: str) -> UsageError:
        line = self.key_lines.line_of(key)
        where = f"{self.path}:{line}" if line else str(self.path)
        return UsageError(f"{where}: {'.'.join(key)}: {message}")

    def table(self, value: Any, key: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {_describe(value)}")
        return value

    def known_keys(self, table: dict[str, Any], key: tuple[str, ...], allowed: list[str]) -> None:
        for name in table:
            if name not in allowed:
                close = closest(name, allowed)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(allowed)})"
                raise self.fail(key + (name,), f"unknown key{hint}")

    def get(
        self,
        table: dict[str, Any],
        key: tuple[str, ...],
        name: str,
        check: Callable[[Any], bool],
        expected: str,
        default: Any,
    ) -> Any:
        if name not in table:
            return default
        value = table[name]
        if not check(value):
            raise self.fail(key + (name,), f"expected {expected}, got {_describe(value)}")
        return value


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_nonempty_str(x) for x in v)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_port(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536


def _is_positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _is_nonnegative_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_url(v: Any) -> bool:
    return isinstance(v, str) and re.match(r"^https?://[^/\s]+", v) is not None


_HOST_KEYS = ["ssh", "hostname", "user", "port", "jump", "identity_file", "sudo", "read_only", "local"]
_UNIT_KEYS = ["host", "unit", "python", "url", "profile"]
_PROFILE_KEYS = ["concurrency", "requests", "warmup", "input_len", "output_len", "endpoint"]
_UI_KEYS = ["theme", "keys"]
_TOP_KEYS = ["hosts", "units", "profiles", "ui", "deployments"]


def _read_host(r: TomlReader, name: str, raw: Any) -> HostConfig:
    key = ("hosts", name)
    t = r.table(raw, key)
    r.known_keys(t, key, _HOST_KEYS)
    host = HostConfig(
        name=name,
        ssh=r.get(t, key, "ssh", _is_nonempty_str, "an ssh_config alias (a string)", None),
        hostname=r.get(t, key, "hostname", _is_nonempty_str, "a host name or address", None),
        user=r.get(t, key, "user", _is_nonempty_str, "a user name", None),
        port=r.get(t, key, "port", _is_port, "a port number between 1 and 65535", None),
        jump=r.get(t, key, "jump", _is_nonempty_str, "a host name (a string)", None),
        identity_file=r.get(t, key, "identity_file", _is_nonempty_str, "a file path", None),
        sudo=r.get(t, key, "sudo", _is_bool, "true or false", False),
        read_only=r.get(t, key, "read_only", _is_bool, "true or false", False),
        local=r.get(t, key, "local", _is_bool, "true or false", False),
    )
    if host.ssh and host.hostname:
        raise r.fail(key + ("hostname",), "give either 'ssh' (an ssh_config alias) or 'hostname', not both")
    return host


def _read_unit(
    r: TomlReader, name: str, raw: Any, hosts: dict[str, HostConfig], profiles: dict[str, LoadProfile]
) -> UnitConfig:
    key = ("units", name)
    t = r.table(raw, key)
    r.known_keys(t, key, _UNIT_KEYS)
    if "host" not in t:
        raise r.fail(key, "missing key 'host' (the [hosts] entry this unit runs on)")
    host = r.get(t, key, "host", _is_nonempty_str, "a host name (a string)", None)
    if host not in hosts:
        close = closest(host, hosts)
        hint = f" (did you mean '{close[0]}'?)" if close else " (add it under [hosts])"
        raise r.fail(key + ("host",), f"unknown host '{host}'{hint}")
    unit = r.get(t, key, "unit", _is_nonempty_str, "a systemd unit name", f"{name}.service")
    if not re.fullmatch(r"[A-Za-z0-9:_.@\\-]+", unit):
        raise r.fail(key + ("unit",), f"expected a systemd unit name, got {unit!r}")
    if "." not in unit:
        unit += ".service"
    profile = r.get(t, key, "profile", _is_nonempty_str, "a profile name", "default")
    if profile != "default" and profile not in profiles:
        close = closest(profile, profiles)
        hint = f" (did you mean '{close[0]}'?)" if close else " (add it under [profiles])"
        raise r.fail(key + ("profile",), f"unknown profile '{profile}'{hint}")
    python = r.get(t, key, "python", _is_nonempty_str, "a path to a Python interpreter", None)
    if python is not None and not python.startswith("/"):
        raise r.fail(key + ("python",), f"expected an absolute path on the host, got {python!r}")
    return UnitConfig(
        name=name,
        host=host,
        unit=unit,
        python=python,
        url=r.get(t, key, "url", _is_url, "an http:// or https:// URL", "http://127.0.0.1:30000").rstrip("/"),
        profile=profile,
    )


def _read_deployment(r: TomlReader, name: str, raw: Any, units: dict[str, UnitConfig]) -> DeploymentConfig:
    key = ("deployments", name)
    t = r.table(raw, key)
    r.known_keys(t, key, ["nodes"])
    if "nodes" not in t:
        raise r.fail(key, "missing key 'nodes' (its [units] entries in node-rank order, node 0 first)")
    nodes = r.get(t, key, "nodes", _is_str_list, "a list of [units] names, node 0 first", [])
    for node in nodes:
        if node not in units:
            close = closest(node, units)
            hint = f" (did you mean '{close[0]}'?)" if close else " (add it under [units])"
            raise r.fail(key + ("nodes",), f"unknown unit '{node}'{hint}")
    twice = sorted({n for n in nodes if nodes.count(n) > 1})
    if twice:
        raise r.fail(key + ("nodes",), f"'{twice[0]}' is named twice: each node runs once")
    return DeploymentConfig(name=name, nodes=tuple(nodes))


def _read_profile(r: TomlReader, name: str, raw: Any) -> LoadProfile:
    key = ("profiles", name)
    t = r.table(raw, key)
    r.known_keys(t, key, _PROFILE_KEYS)
    conc = r.get(
        t,
        key,
        "concurrency",
        lambda v: isinstance(v, list) and len(v) > 0 and all(_is_positive_int(x) for x in v),
        "a non-empty array of positive integers",
        list(DEFAULT_CONCURRENCY),
    )
    endpoint = r.get(
        t, key, "endpoint", lambda v: v in ("completions", "chat"), "'completions' or 'chat'", "completions"
    )
    return LoadProfile(
        name=name,
        concurrency=tuple(conc),
        requests=r.get(t, key, "requests", _is_positive_int, "a positive integer", 64),
        warmup=r.get(t, key, "warmup", _is_nonnegative_int, "an integer >= 0", 2),
        input_len=r.get(t, key, "input_len", _is_positive_int, "a positive integer", 1024),
        output_len=r.get(t, key, "output_len", _is_positive_int, "a positive integer", 256),
        endpoint=endpoint,
    )


def _read_ui(r: TomlReader, raw: Any) -> UIConfig:
    key = ("ui",)
    t = r.table(raw, key)
    r.known_keys(t, key, _UI_KEYS)
    keys = r.table(t.get("keys", {}), key + ("keys",))
    for action, binding in keys.items():
        if not _is_nonempty_str(binding):
            raise r.fail(key + ("keys", action), f'expected keys such as "ctrl+r" or "r,f5", got {_describe(binding)}')
    return UIConfig(
        theme=r.get(t, key, "theme", _is_nonempty_str, "a theme name", "cockpit-dark"),
        keys=dict(keys),
    )


def parse(text: str, path: Path) -> Config:
    """Parse config text; `path` is only used in messages."""
    try:
        return _parse(text, path)
    except RecursionError:
        raise UsageError(
            f"{path}: nested too deeply to read (tables or arrays inside each other hundreds of levels down)"
        ) from None


def _jump_loop(hosts: dict[str, HostConfig], start: str) -> list[str] | None:
    """The names of a jump-host cycle reached from `start`, or None."""
    chain = [start]
    while True:
        jump = hosts[chain[-1]].jump
        if jump is None or jump not in hosts:
            return None
        if jump in chain:
            return chain[chain.index(jump) :] + [jump]
        chain.append(jump)


def load_toml(text: str, path: Path) -> dict[str, Any]:
    """The TOML document; a UsageError `FILE:LINE: not valid TOML: why` where it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        where = f"{path}:{m.group(1)}" if m else str(path)
        raise UsageError(f"{where}: not valid TOML: {reason}") from None


def _parse(text: str, path: Path) -> Config:
    doc = load_toml(text, path)
    r = TomlReader(path, text)
    problems: list[str] = []  # every one, not the first alone: a config is fixed in one go

    def said(read: Callable[[], T]) -> T | None:
        try:
            return read()
        except UsageError as e:
            problems.append(str(e))
            return None

    def each(section: str, read: Callable[[str, Any], T]) -> dict[str, T]:
        entries = said(partial(r.table, doc.get(section, {}), (section,))) or {}
        read_ = {n: said(partial(read, n, v)) for n, v in entries.items()}
        return {n: v for n, v in read_.items() if v is not None}

    for name in doc:
        said(partial(r.known_keys, {name: None}, (), _TOP_KEYS))
    hosts = each("hosts", partial(_read_host, r))
    loops: set[frozenset[str]] = set()
    for h in hosts.values():
        if h.jump == h.name:
            problems.append(str(r.fail(("hosts", h.name, "jump"), "a host cannot be its own jump host")))
        elif (loop := _jump_loop(hosts, h.name)) is not None and frozenset(loop) not in loops:
            loops.add(frozenset(loop))  # said once, at the first host on it
            problems.append(str(r.fail(("hosts", h.name, "jump"), f"the jump hosts make a loop: {' -> '.join(loop)}")))
    profiles = each("profiles", partial(_read_profile, r))
    ui = said(lambda: _read_ui(r, doc.get("ui", {})))
    # A unit names its host and profile, a deployment its units: read only once those were, so
    # that a broken host is said once, not again as every unit's unknown host.
    units = each("units", lambda n, v: _read_unit(r, n, v, hosts, profiles)) if not problems else {}
    deployments = each("deployments", lambda n, v: _read_deployment(r, n, v, units)) if not problems else {}
    if problems:
        if len(problems) == 1:
            raise UsageError(problems[0])
        raise UsageError(f"{len(problems)} problems in the config:\n  " + "\n  ".join(problems))
    assert ui is not None
    return Config(path=path, hosts=hosts, units=units, profiles=profiles, ui=ui, deployments=deployments)


def find_config_path(explicit: str | None = None) -> Path | None:
    """`--config`, then `$COCKPIT_CONFIG`, then `~/.config/cockpit/config.toml`, then `./cockpit.toml`."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("COCKPIT_CONFIG")
    if env:
        return Path(env).expanduser()
    for candidate in config_candidates():
        if candidate.is_file():
            return candidate
    return None


def config_candidates() -> tuple[Path, Path]:
    """Where a config is looked for when neither `--config` nor `$COCKPIT_CONFIG` names one."""
    return Path("~/.config/cockpit/config.toml").expanduser(), Path("cockpit.toml")


def load(explicit: str | None = None) -> Config:
    """Load the config the user pointed at; no config at all is an empty, valid config."""
    path = find_config_path(explicit)
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found.") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a config file.") from None
    except PermissionError:
        raise UsageError(f"{path}: permission denied reading the config file.") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start}).") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read the config file: {(e.strerror or str(e)).lower()}.") from None
    return parse(text, path)
