"""The picker's refresh cost with four labs (issue 8): one round asks each host for its
`sglang*` units and their states over that host's one connection. Prints JSON."""

from __future__ import annotations

import asyncio
import resource
import time

from _common import emit, lab_up, pct

from cockpit.config import Config, HostConfig
from cockpit.remote.pool import HostPool
from cockpit.systemd.status import list_units, show

LABS = [f"cockpit-bench-p{k}" for k in range(4)]
ROUNDS = 30


async def round_trip(pool: HostPool, name: str) -> int:
    host = pool.get(name)
    units = await list_units(host)
    return len(await show(host, units))


async def main() -> None:
    labs = [lab_up(name) for name in LABS]
    pool = HostPool(Config(hosts={n: HostConfig(name=n) for n in LABS}))
    try:
        await asyncio.gather(*(round_trip(pool, n) for n in LABS))  # connect first
        times = []
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(ROUNDS):
            t = time.perf_counter()
            counts = await asyncio.gather(*(round_trip(pool, n) for n in LABS))
            times.append((time.perf_counter() - t) * 1000)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu_ms = ((cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)) * 1000 / ROUNDS
        emit(
            {
                "benchmark": "picker_refresh",
                "hosts": len(LABS),
                "units_per_round": sum(counts),
                "round_ms": {"p50": round(pct(times, 50), 1), "p95": round(pct(times, 95), 1)},
                "cockpit_cpu_ms_per_round": round(cpu_ms, 1),
                "refresh_interval_s": 2.0,
                "cpu_share_at_2s": round(cpu_ms / 2000, 4),
            }
        )
    finally:
        await pool.close()
        for lab in labs:
            lab.down()


if __name__ == "__main__":
    asyncio.run(main())
