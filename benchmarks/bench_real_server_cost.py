"""What the app costs a real SGLang server (issue 29, item 1): its tokens a second with and
without the app attached, alternated. Prints JSON.

A real-SGLang lab of its own (`bench-real-<4 hex>`) starts `sglang-real-tp1.service` (SGLang 0.5.23
itself, on the CPU, the lab's tiny model). A steady load runs inside the lab (STREAMS requests at
once to `/generate`, MAX_TOKENS new tokens each, one after another, for as long as the benchmark
runs), so nothing of the load crosses the jump box. The lab's processes are pinned to CPU 1 and
this process (the app) to CPU 0: on a real deployment the jump box and the GPU host are two
machines, and what is measured is what the app's remote commands, journal follower and health
probes take from the server, not what the app's own drawing takes from a shared core.

Windows of `--seconds` alternate, `--rounds` times: the server alone, then with the real
`CockpitApp` attached to its unit (headless, 160x50), settled (the unit read ready and the GPU
table shown). Each window's figure is the server's own count: `sglang:generation_tokens_total` of
its `/metrics` at the window's start and end, over the window. The app's effect is each attached
window's rate over the mean of the alone windows on either side (`tokens_ratio_with_app`, 1.0 =
no effect), with the host's cgroup CPU beside it. The noise to read it against is the alone
windows' own spread (`alone_spread_pct`). Needs root (the lab) and at least 2 CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from typing import Any

from bench_app_flood import ssh
from bench_host_cost import alone, attached, windows_main
from bench_ssh_transport import cgroup_cpu_s, pin

from cockpit.lab.lab import REAL_UNITS, Lab, generate
from cockpit.targets import Target

UNIT = "sglang-real-tp1.service"
PORT = REAL_UNITS[UNIT]
STREAMS, MAX_TOKENS = 2, 64
LOAD = f"""
import json, threading, urllib.request
def stream():
    body = json.dumps({{"text": "the cockpit measures what it costs", "sampling_params":
                       {{"max_new_tokens": {MAX_TOKENS}, "temperature": 0, "ignore_eos": True}}}}).encode()
    while True:
        request = urllib.request.Request("http://127.0.0.1:{PORT}/generate", data=body,
                                         headers={{"Content-Type": "application/json"}})
        try:
            urllib.request.urlopen(request, timeout=120).read()
        except OSError:
            pass
for _ in range({STREAMS}):
    threading.Thread(target=stream, daemon=True).start()
threading.Event().wait()
"""
METRICS = f"""
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:{PORT}/metrics", timeout=30).read().decode())
"""
GENERATED = re.compile(r"^sglang:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", re.M)


def tokens_now(lab: Lab) -> tuple[float, float]:
    """(monotonic seconds, the server's generation_tokens_total summed over its label sets)."""
    out = ssh(lab, "python3", "-c", METRICS)
    return time.monotonic(), sum(float(v) for v in GENERATED.findall(out))


def rate(before: tuple[float, float], after: tuple[float, float]) -> float:
    return (after[1] - before[1]) / (after[0] - before[0])


async def measure(lab: Lab, args: argparse.Namespace) -> dict[str, Any]:
    pinned = pin(lab)
    await asyncio.to_thread(ssh, lab, "systemctl", "start", UNIT)
    deadline = time.monotonic() + 300
    while True:
        try:
            await asyncio.to_thread(generate, lab, "ready?", PORT, 1)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(2)
    await asyncio.to_thread(ssh, lab, "tee", "/tmp/load.py", input=LOAD)
    await asyncio.to_thread(ssh, lab, "systemd-run", "--unit=bench-load", "--quiet", "python3", "/tmp/load.py")

    async def window_alone() -> tuple[float, float]:
        before, cpu_before = await asyncio.to_thread(tokens_now, lab), cgroup_cpu_s(lab)
        await alone(lab, args.seconds)
        after = await asyncio.to_thread(tokens_now, lab)
        return rate(before, after), cgroup_cpu_s(lab) - cpu_before

    await window_alone()  # the load's first requests and the server's warm-up: not counted
    alone_rates = [await window_alone()]
    rounds = []
    target = Target(lab.name, UNIT, url=f"http://127.0.0.1:{PORT}")
    for _ in range(args.rounds):
        app = await attached(lab, args.seconds, args.settle, target, lambda: tokens_now(lab))
        await asyncio.sleep(args.settle)
        alone_rates.append(await window_alone())
        base = (alone_rates[-2][0] + alone_rates[-1][0]) / 2
        with_app = rate(app["during_before"], app["during_after"])
        rounds.append(
            {
                "tokens_per_s_alone": round(base, 2),
                "tokens_per_s_with_app": round(with_app, 2),
                "tokens_ratio_with_app": round(with_app / base, 4),
                "host_cpu_s_with_app": round(app["host_s"], 3),
                "host_cpu_s_alone": round((alone_rates[-2][1] + alone_rates[-1][1]) / 2, 3),
            }
        )
    alone_only = [r for r, _ in alone_rates]
    ratios = [r["tokens_ratio_with_app"] for r in rounds]
    return {
        "benchmark": "real_server_cost",
        "server": f"SGLang 0.5.23 on the lab's CPU 1 ({UNIT}, {STREAMS} streams of {MAX_TOKENS} tokens)",
        "window_s": args.seconds,
        "lab_processes_pinned": pinned,
        "rounds": rounds,
        "tokens_ratio_with_app": round(statistics.median(ratios), 4),
        "tokens_ratio_spread": [min(ratios), max(ratios)],
        "alone_tokens_per_s": [round(r, 2) for r in alone_only],
        "alone_spread_pct": round(100 * (max(alone_only) - min(alone_only)) / statistics.mean(alone_only), 2),
    }


if __name__ == "__main__":
    asyncio.run(windows_main(__doc__ or "", "bench-real", measure, real=True))
