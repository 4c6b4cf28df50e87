"""Where a unit's SGLang server listens, from its own command line: `--host` and `--port`
(SGLang's defaults 127.0.0.1 and 30000). A server bound to every address (0.0.0.0, ::) is
reached on the host's loopback."""

from __future__ import annotations

from collections.abc import Iterable

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
