"""A minimal HTTP/1.1 exchange over a stream the transport opened (direct-tcpip over SSH, or
a local socket): enough for `/health` and `/server_info` without a forwarded listening port."""

from __future__ import annotations

import asyncio
from typing import Protocol


class ByteReader(Protocol):
    """What the exchange reads from: asyncio's StreamReader, or asyncssh's SSHReader of bytes."""

    async def read(self, n: int = -1) -> bytes: ...

    async def readline(self) -> bytes: ...

    async def readexactly(self, n: int) -> bytes: ...


class ByteWriter(Protocol):
    """What the exchange writes to: asyncio's StreamWriter, or asyncssh's SSHWriter of bytes."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


async def exchange(
    reader: ByteReader,
    writer: ByteWriter,
    method: str,
    host: str,
    port: int,
    path: str,
    body: bytes | None = None,
) -> tuple[int, bytes]:
    """(status, body). A cut or malformed answer raises ConnectionError, an OSError like every
    other way the request can fail, so callers catch one family."""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
        f"Accept: */*\r\nContent-Length: {len(body or b'')}\r\n"
    )
    if body:
        head += "Content-Type: application/json\r\n"
    writer.write(head.encode() + b"\r\n" + (body or b""))
    await writer.drain()
    try:
        return await _response(reader, host, port)
    except (asyncio.IncompleteReadError, ValueError) as e:  # cut mid-body; a chunk size that is not hex
        raise ConnectionError(f"a cut or malformed HTTP response from {host}:{port}: {e}") from None


async def _response(reader: ByteReader, host: str, port: int) -> tuple[int, bytes]:
    status_line = await reader.readline()
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP response from {host}:{port}")
    headers: dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1").strip()
        if not line:
            break
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        data = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            data += await reader.readexactly(size)
            await reader.readline()
        return int(parts[1]), bytes(data)
    if "content-length" in headers:
        return int(parts[1]), await reader.readexactly(int(headers["content-length"]))
    return int(parts[1]), await reader.read()
