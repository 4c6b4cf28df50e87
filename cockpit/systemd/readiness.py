"""Is the server up? `/health` answers 200 once SGLang is ready (503 while it starts).
Asked on the host itself, through the SSH connection: servers listen on loopback."""

from __future__ import annotations

import asyncio

from cockpit.remote.base import Host, HostError


async def is_ready(host: Host, addr: str, port: int, timeout: float = 5.0) -> bool:
    try:
        status, _ = await host.http_request("GET", addr, port, "/health", timeout=timeout)
    except (OSError, ConnectionError, asyncio.TimeoutError, HostError):
        return False
    return status == 200
