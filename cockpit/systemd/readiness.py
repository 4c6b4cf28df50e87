"""Is the server up, and what does it say of itself? Asked on the host itself, through the SSH
connection: servers listen on loopback.

SGLang answers `/health` 503 while it starts; from 0.5.x, once up, 200 at once without asking
the model anything (unless `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`). `/health_generate`
generates one token through the scheduler and the detokenizer and waits up to 20 s for any
output: 200, else 503 and its `Health check failed` line. Only that one tells a hung or a
half-dead server from a healthy one, and it costs a token and a second (it sleeps 1 s before
its first look), so it is asked sparingly.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from cockpit.remote.base import Host, HostError

HEALTH, GENERATE = "/health", "/health_generate"


@dataclass(frozen=True)
class Probe:
    """What one health endpoint said: its HTTP status, or None with why there was none."""

    path: str
    status: int | None
    detail: str = ""  # "no answer within 10 s", "nothing listens on 127.0.0.1:30000", ...

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def timed_out(self) -> bool:
        return self.status is None and self.detail.startswith("no answer")

    def words(self) -> str:
        """`/health_generate answered 503`, `/health_generate: no answer within 10 s`."""
        return f"{self.path} answered {self.status}" if self.status is not None else f"{self.path}: {self.detail}"


async def probe(host: Host, addr: str, port: int, path: str = HEALTH, timeout: float = 5.0) -> Probe:
    """`path` asked once; a server too old for `/health_generate` (404) is asked `/health`."""
    try:
        status, _ = await host.http_request("GET", addr, port, path, timeout=timeout)
    except asyncio.TimeoutError:
        return Probe(path, None, f"no answer within {timeout:g} s")
    except (OSError, ConnectionError, HostError) as e:
        said = f"nothing answers on {addr}:{port} ({e})" if str(e) else f"nothing answers on {addr}:{port}"
        return Probe(path, None, said)
    if status == 404 and path == GENERATE:
        return await probe(host, addr, port, HEALTH, timeout)
    return Probe(path, status)


async def is_ready(host: Host, addr: str, port: int, timeout: float = 5.0) -> bool:
    return (await probe(host, addr, port, HEALTH, timeout)).ok


async def server_info(host: Host, addr: str, port: int, timeout: float = 5.0) -> dict[str, Any] | None:
    """`/server_info` (the resolved arguments, the version), or None when the server cannot
    say. Older releases serve it only at `/get_server_info`, asked after a 404."""
    try:
        for path in ("/server_info", "/get_server_info"):
            status, body = await host.http_request("GET", addr, port, path, timeout=timeout)
            if status != 404:
                break
    except (OSError, asyncio.TimeoutError, HostError):
        return None
    if status != 200:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
