"""What the app costs the GPU host (issue 29, item 1). Prints JSON.

A lab of its own (`bench-host-<4 hex>`) serves its demo unit (the stand-in, ready). The figure
is the host's own CPU: the lab's cgroup `cpu.stat` `usage_usec` (every process of the host:
systemd, journald, sshd and what it runs, the server), read from the jump box. Windows of
`--seconds` alternate, `--rounds` times: the host alone, then the host with the real
`CockpitApp` (this process, headless, 160x50, the demo config's unit) attached to it and settled
(the unit read ready and the GPU table shown). The app's cost is the difference of each
attached window with the mean of the alone windows on either side of it (a first window
after the boot is not counted), so a drift of the server's own idle cost does not count;
`app_host_pct_of_one_core` is that difference over the window, in per cent of one core (issue
29's goal: under 0.3).

Beside it, the jump box's side: this process's CPU over each attached window
(`app_jump_box_pct_of_one_core`). Needs root (the lab).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, lab_up
from bench_ssh_transport import cgroup_cpu_s

from cockpit.lab.lab import Lab, demo_config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def alone(lab: Lab, seconds: float) -> float:
    """The host's CPU seconds over `seconds` with nothing of the cockpit attached."""
    before = cgroup_cpu_s(lab)
    await asyncio.sleep(seconds)
    return cgroup_cpu_s(lab) - before


async def attached(
    lab: Lab, seconds: float, settle: float, target: Target | None = None, during: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """The host's and this process's CPU seconds over `seconds` with the app attached to `target`
    (the demo unit), once it has read the unit ready and its GPU table and `settle` seconds have
    passed; with `during`'s answer at the window's start and end (`during_before`, `during_after`)."""
    config = demo_config(lab.name)
    app = CockpitApp(config, target or Target(lab.name, "sglang-demo.service", url=config.units["demo"].url))
    async with app.run_test(headless=True, size=(160, 50)):
        session = app.session
        await until(lambda: session.status is not None and session.status.ready is True, 90, "the unit ready")
        await until(lambda: session.gpus is not None, 30, "the GPU table")
        await asyncio.sleep(settle)
        said = await asyncio.to_thread(during) if during else None
        host_before, jump_before = cgroup_cpu_s(lab), time.process_time()
        await asyncio.sleep(seconds)
        host, jump = cgroup_cpu_s(lab) - host_before, time.process_time() - jump_before
        after = await asyncio.to_thread(during) if during else None
    return {"host_s": host, "jump_box_s": jump, "during_before": said, "during_after": after}


async def alternate(
    lab: Lab, seconds: float, rounds: int, settle: float, window: Callable[[], Awaitable[dict[str, Any]]]
) -> tuple[list[tuple[dict[str, Any], float]], list[float]]:
    """`rounds` windows of `window()` (what the cockpit costs the host over `seconds`), each
    followed by `settle` seconds and an alone window of `seconds`, after two alone windows (the
    first, the boot's tail, not counted): each window's answer with the mean of the alone windows
    on either side of it, and every counted alone window's CPU seconds."""
    await alone(lab, seconds)  # the boot's tail (units starting, the demo server loading): not counted
    alone_s = [await alone(lab, seconds)]
    out = []
    for _ in range(rounds):
        said = await window()
        await asyncio.sleep(settle)  # the cockpit's connection and its remote commands gone
        alone_s.append(await alone(lab, seconds))
        out.append((said, (alone_s[-2] + alone_s[-1]) / 2))
    return out, alone_s


async def measure(lab: Lab, args: argparse.Namespace) -> dict[str, Any]:
    windows, alone_s = await alternate(
        lab, args.seconds, args.rounds, args.settle, lambda: attached(lab, args.seconds, args.settle)
    )
    rounds = [
        {
            "host_alone_s": round(base, 4),
            "host_with_app_s": round(app["host_s"], 4),
            "app_host_pct_of_one_core": round(100 * (app["host_s"] - base) / args.seconds, 3),
            "app_jump_box_pct_of_one_core": round(100 * app["jump_box_s"] / args.seconds, 3),
        }
        for app, base in windows
    ]
    host = [r["app_host_pct_of_one_core"] for r in rounds]
    return {
        "window_s": args.seconds,
        "rounds": rounds,
        "app_host_pct_of_one_core": round(statistics.median(host), 3),
        "app_host_pct_spread": [min(host), max(host)],
        "host_alone_pct_of_one_core": round(100 * statistics.median(alone_s) / args.seconds, 3),
        "app_jump_box_pct_of_one_core": round(statistics.median(r["app_jump_box_pct_of_one_core"] for r in rounds), 3),
        "goal_app_host_pct": 0.3,
    }


async def windows_main(
    doc: str, prefix: str, measure: Callable[[Lab, argparse.Namespace], Awaitable[dict[str, Any]]], real: bool = False
) -> None:
    """The alternating windows' command line, run on a lab of its own (`prefix-<4 hex>`, a
    real-SGLang one where `real`), taken down after; prints the JSON."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="each window (default 60)")
    parser.add_argument("--rounds", type=int, default=3, help="attached windows, each between two alone (default 3)")
    parser.add_argument("--settle", type=float, default=10, help="wait after attaching and after leaving (default 10)")
    args = parser.parse_args()
    lab = await asyncio.to_thread(lab_up, f"{prefix}-{secrets.token_hex(2)}", real)
    try:
        result = await measure(lab, args)
    finally:
        await asyncio.to_thread(lab.down)
    emit(result)


if __name__ == "__main__":
    asyncio.run(windows_main(__doc__ or "", "bench-host", measure))
