"""Is the server up, and what does it say of itself? `/health` answers 200 once SGLang is
ready (503 while it starts). Asked on the host itself, through the SSH connection: servers
listen on loopback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cockpit.remote.base import Host, HostError


async def is_ready(host: Host, addr: str, port: int, timeout: float = 5.0) -> bool:
    try:
        status, _ = await host.http_request("GET", addr, port, "/health", timeout=timeout)
    except (OSError, ConnectionError, asyncio.TimeoutError, HostError):
        return False
    return status == 200


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
