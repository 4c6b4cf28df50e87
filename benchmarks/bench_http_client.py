"""Which async HTTP client keeps its own overhead lower when streaming completions: aiohttp
(the load runner's) or httpx. Both stream the same SSE responses from the stand-in at 64 and
256 concurrent streams; the measure is the client's CPU time per received chunk (the less, the
more of a core is left for timing) and the tok/s it measures against the configured truth.
httpx is not a dependency: `pip install httpx` in the venv to include it. Prints JSON."""

from __future__ import annotations

import asyncio
import json
import time

from _common import emit, free_port, start_standin

PER_STREAM, CAPACITY, OUTPUT = 20.0, 2000.0, 64


def body() -> dict:
    return {
        "model": "/m",
        "prompt": "a b c d",
        "max_tokens": OUTPUT,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }


async def with_aiohttp(url: str, n: int) -> tuple[int, int]:
    import aiohttp

    chunks = tokens = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            nonlocal chunks, tokens
            async with session.post(url, json=body()) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        event = json.loads(line[6:])
                        chunks += 1
                        if event.get("usage"):
                            tokens += event["usage"]["completion_tokens"]

        await asyncio.gather(*(one() for _ in range(n)))
    return chunks, tokens


async def with_httpx(url: str, n: int) -> tuple[int, int]:
    import httpx

    chunks = tokens = 0
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=600) as client:

        async def one() -> None:
            nonlocal chunks, tokens
            async with client.stream("POST", url, json=body()) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data: {"):
                        event = json.loads(line[6:])
                        chunks += 1
                        if event.get("usage"):
                            tokens += event["usage"]["completion_tokens"]

        await asyncio.gather(*(one() for _ in range(n)))
    return chunks, tokens


async def measure(client, url: str, n: int) -> dict:
    cpu0, t0 = time.process_time(), time.perf_counter()
    chunks, tokens = await client(url, n)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    truth = min(n * PER_STREAM, CAPACITY)
    return {
        "streams": n,
        "chunks": chunks,
        "client_cpu_us_per_chunk": round(cpu / max(chunks, 1) * 1e6, 1),
        "client_cpu_share": round(cpu / wall, 3),
        "measured_tok_s": round(tokens / wall, 1),
        "truth_tok_s": truth,
    }


async def main() -> None:
    port = free_port()
    proc = start_standin(port, tokens_per_s=PER_STREAM, capacity=CAPACITY)
    try:
        await asyncio.sleep(2)
        url = f"http://127.0.0.1:{port}/v1/completions"
        clients = {"aiohttp": with_aiohttp}
        try:
            import httpx  # noqa: F401

            clients["httpx"] = with_httpx
        except ImportError:
            pass
        results = {name: [await measure(fn, url, n) for n in (64, 256)] for name, fn in clients.items()}
    finally:
        proc.terminate()
        proc.wait()
    emit(
        {
            "benchmark": "http_client",
            "results": results,
            "note": "" if "httpx" in results else "httpx not installed: pip install httpx to compare",
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
