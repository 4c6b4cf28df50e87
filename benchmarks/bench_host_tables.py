"""What the GPU table and the listener table cost (issue 15, item 1). Prints JSON.

The session reads the GPU table every 5 s (`cockpit.systemd.gpu_use.read`: both nvidia-smi
queries and each PID's facts in one command over the query channel); the write modal reads it
and the listeners (`cockpit.systemd.listeners.read`) before it opens. Against a lab of its own
with the demo unit's eight ranks holding GPU memory and one more holder: p50/p95 wall time of
each read over 50 reads, and the host's CPU time per read (the remote shell's and its children's
user+system time, from `/proc/self/stat` of a wrapper), which is what a 5 s poll costs the GPU
host. Needs root (the lab).
"""

from __future__ import annotations

import asyncio
import time

from _common import emit, lab_up, pct

from cockpit.config import HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.systemd import gpu_use, listeners, status

LAB = "cockpit-bench-gpu"
READS = 50
# The remote side's CPU: the read's script 20 times as children of one shell, then that shell's
# cutime and cstime (fields 16 and 17 of /proc/PID/stat: its waited-for children's CPU time).
TIMED = (
    'for i in $(seq 20); do sh -c "$1" >/dev/null; done; '
    "read -r _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ cu cs _ < /proc/$$/stat; echo $cu $cs"
)


async def timed_reads(host: SSHHost, read) -> dict:
    await read(host)
    walls = []
    for _ in range(READS):
        t = time.perf_counter()
        await read(host)
        walls.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(pct(walls, 50), 1), "p95_ms": round(pct(walls, 95), 1)}


async def remote_cpu_ms(host: SSHHost, script: str) -> float:
    ticks = int((await host.run(["getconf", "CLK_TCK"])).text)
    result = await host.run(["sh", "-c", TIMED, "sh", script])
    user, system = (int(v) for v in result.text.split())
    return round((user + system) / ticks * 1000 / 20, 1)


async def main() -> None:
    lab = lab_up(LAB)
    host = SSHHost(HostConfig(name=LAB))
    try:
        deadline = time.monotonic() + 60
        while (await status.fetch(host, "sglang-demo.service")).active_state != "active":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.3)
        await host.run(["systemd-run", "-E", "COCKPIT_STANDIN_GPU_MIB=70000", "sleep", "600"])
        while len((use := await gpu_use.read(host)).processes) < 16:  # the 8 ranks, and the holder on 8 GPUs
            assert time.monotonic() < deadline + 30, len(use.processes)
            await asyncio.sleep(0.5)
        emit(
            {
                "benchmark": "host_tables",
                "gpu_processes": len(use.processes),
                "gpu_table": {
                    **await timed_reads(host, gpu_use.read),
                    "host_cpu_ms": await remote_cpu_ms(host, gpu_use.SCRIPT),
                },
                "listeners": {
                    **await timed_reads(host, listeners.read),
                    "host_cpu_ms": await remote_cpu_ms(host, listeners.SCRIPT),
                },
                "note": "host_cpu_ms counts the lab's nvidia-smi stand-in (a Python start per query)",
            }
        )
    finally:
        await host.close()
        lab.down()


if __name__ == "__main__":
    asyncio.run(main())
