"""The stand-in's token rate as the load runner measures it, against its settings.

Runs the stand-in on loopback (no lab needed). Prints JSON per case: configured and measured
output tok/s, per-stream tok/s and per-token ITL; `within_5pct` for each.
"""

from __future__ import annotations

import asyncio
import socket
import time

from _common import emit, free_port, start_standin

from cockpit.load.runner import LoadConfig, Runner

CASES = [
    # (concurrency, requests, tokens/s per stream, capacity, accept_len)
    (1, 6, 100.0, 0.0, 1.0),
    (8, 24, 100.0, 400.0, 1.0),
    (64, 128, 40.0, 1600.0, 1.0),
    (256, 512, 20.0, 2000.0, 1.0),
    (8, 24, 90.0, 0.0, 3.0),
]


def wait_listening(port: int, timeout: float = 20) -> None:
    """Block until something accepts on loopback `port`; the last OSError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def run_case(conc: int, requests: int, rate: float, capacity: float, accept: float) -> dict:
    port = free_port()
    proc = start_standin(port, tokens_per_s=rate, capacity=capacity, accept_len=accept)
    try:
        await asyncio.to_thread(wait_listening, port)
        await asyncio.sleep(0.5)
        cfg = LoadConfig(
            url=f"http://127.0.0.1:{port}",
            concurrency=(conc,),
            requests=requests,
            warmup=min(conc, 8),
            input_len=64,
            output_len=120,
        )
        [level] = await Runner(cfg).run()
    finally:
        proc.terminate()
        proc.wait()
    per_stream = rate if capacity == 0 else min(rate, capacity / conc)
    total = per_stream * conc
    return {
        "concurrency": conc,
        "tokens_per_s_per_stream_set": rate,
        "capacity_set": capacity,
        "accept_len_set": accept,
        "expected_output_tokens_per_s": total,
        "measured_output_tokens_per_s": round(level.output_tokens_per_s, 1),
        "expected_per_stream": per_stream,
        "measured_per_stream": round(level.output_tokens_per_s_per_stream or 0, 2),
        "measured_itl_ms": round(level.itl_ms["mean"] or 0, 2),
        "expected_itl_ms": round(1000 / per_stream, 2),
        "tokens_per_chunk": round(level.tokens_per_chunk or 0, 2),
        "errors": level.errors,
        "within_5pct": abs(level.output_tokens_per_s_per_stream / per_stream - 1) < 0.05
        and abs((level.itl_ms["mean"] or 0) / (1000 / per_stream) - 1) < 0.05,
    }


async def main() -> None:
    results = [await run_case(*case) for case in CASES]
    emit({"benchmark": "standin_rate", "cases": results, "all_within_5pct": all(r["within_5pct"] for r in results)})


if __name__ == "__main__":
    asyncio.run(main())
