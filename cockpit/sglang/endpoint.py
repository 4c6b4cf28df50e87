"""Where a unit's SGLang server listens, from its own command line: `--host` and `--port`
(SGLang's defaults 127.0.0.1 and 30000). A server bound to every address (0.0.0.0, ::) is
reached on the host's loopback."""

from __future__ import annotations

from collections.abc import Iterable

from cockpit.remote.base import Host
from cockpit.systemd.remote_unit import load_remote_unit
from cockpit.systemd.status import UnitStatus, fetch
from cockpit.targets import DEFAULT_URL, Target

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 30000
_ANY = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def serving_address(flags: Iterable[tuple[str | None, object]]) -> tuple[str, int]:
    """(address, port) as the host itself reaches the server, from (flag, value) pairs."""
    values = {name: value for name, value in flags if name}
    host = values.get("--host")
    port = values.get("--port")
    address = _ANY.get(str(host), str(host)) if isinstance(host, str) else DEFAULT_HOST
    try:
        number = int(port) if isinstance(port, str) else DEFAULT_PORT
    except ValueError:
        number = DEFAULT_PORT
    return address, number


async def unit_address(host: Host, target: Target, status: UnitStatus | None = None) -> tuple[str, int]:
    """The unit must exist (a missing one is an error, never a run against whatever listens on
    the port); its server's address comes from the config's url when it names one, else from
    the unit's own --host and --port."""
    status = status or await fetch(host, target.unit)
    if target.url != DEFAULT_URL:
        return target.url_host_port
    unit = await load_remote_unit(host, status)
    return serving_address((i.name, i.value) for i in unit.flags())
