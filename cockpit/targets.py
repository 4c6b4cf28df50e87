"""Which unit on which host a command is about: from `--host/--unit`, or a [units] entry."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from cockpit.config import Config, UnitConfig
from cockpit.errors import UsageError
from cockpit.suggest import closest

DEFAULT_URL = "http://127.0.0.1:30000"


@dataclass(frozen=True)
class Target:
    host: str
    unit: str
    url: str = DEFAULT_URL
    python: str | None = None
    profile: str = "default"

    @property
    def url_host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def given_address(self) -> tuple[str, int] | None:
        """Where the server listens when the config says so; None: only the unit's own
        --host/--port can tell (cockpit.sglang.deployments.deployment)."""
        return self.url_host_port if self.url != DEFAULT_URL else None

    @classmethod
    def of(cls, unit: UnitConfig) -> Target:
        return cls(unit.host, unit.unit, unit.url, unit.python, unit.profile)


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def resolve(config: Config, host: str | None, unit: str | None) -> Target:
    """`--unit k26` (a config entry), or `--host gpu1 --unit sglang-k26` (any unit on any host)."""
    if unit and unit in config.units and (host is None or config.units[unit].host == host):
        return Target.of(config.units[unit])
    if host and unit:
        for u in config.units.values():  # a configured unit addressed by host and systemd name
            if u.host == host and u.unit == unit_name(unit):
                return Target.of(u)
        return Target(host, unit_name(unit))
    if unit:
        hint = closest(unit, config.units)
        raise UsageError(
            f"unit {unit!r} is not in the config"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + "; give --host too for a unit that is not configured"
        )
    if host:
        raise UsageError("--unit is needed with --host")
    raise UsageError("give --host and --unit (or --unit NAME of a [units] entry)")


def all_targets(config: Config) -> list[Target]:
    return [Target.of(u) for u in config.units.values()]


def deployment_targets(config: Config, name: str) -> list[tuple[str, Target]]:
    """A [deployments] entry's nodes as (unit entry, target), node 0 first."""
    if name not in config.deployments:
        hint = closest(name, config.deployments)
        raise UsageError(
            f"deployment {name!r} is not in the config"
            + (f" (did you mean {hint[0]!r}?)" if hint else " (add it under [deployments])")
        )
    return [(node, Target.of(config.units[node])) for node in config.deployments[name].nodes]
