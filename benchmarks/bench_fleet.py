"""The fleet view's cost (issue 17, item 6; issue 29, item 1). Prints JSON.

Three parts, as one machine cannot hold 32 GPU hosts:

- `host`: what the fleet costs a GPU host. The first lab (`--units` SGLang stand-in units,
  ready) measured on its own cgroup CPU (`cpu.stat` `usage_usec`: systemd, journald, sshd and all
  they run, the servers answering the health checks included), as bench_host_cost.py measures
  the app: `--seconds` windows alternate the host alone and a fleet reader of its own (its own
  connection, settled for `--settle` seconds first) asking a round a second, `--host-rounds`
  times. Each polled window less the mean of the alone windows on either side of it is the
  fleet's cost: `host_pct_of_one_core` per host (issue 29's goal: under 1), `host_ms_per_round`
  over the rounds of the window. Beside it `jump_box_ms_per_round`: this process's CPU time
  (every thread) over the same rounds of one host.
- `data`: real rounds over `--labs` labs, one connection per host, a round a second, with 1, 2,
  4 ... hosts at once. For each count, this process's CPU time per round and each polled lab's
  cgroup CPU per round less its alone rate (measured before, over as many seconds). The jump
  box's cost per added host is the slope of its CPU per round over the host counts (least
  squares), the rest (`jump_box_fixed_ms_per_round`) is what a round costs whatever the count:
  neither is a fixed cost divided by the count. `extrapolated_32_hosts` is fixed plus 32 slopes.
  No round's wall time is given: the labs share this machine's two cores with the cockpit, so
  it would time this machine's contention, not the fleet.
- `screen`: the fleet screen over 32 hosts x 8 units answered from memory (the data part is
  timed above), a few units changing each round: Textual's screen update while it is open
  (`Screen._on_timer_update`: layout, the visible rows, the compositor) and the screen's own
  `show` per round, headless at 160x50, with the collector's thresholds the app runs with. The
  first rounds (WARMUP) draw the screen and add the rows, which a person sees once, and are
  left out.

The labs are `--prefix` and a number (`cockpit-bench-f0` ...), taken down at the end. Needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import time
from typing import Any

from _common import emit, lab_up, pct
from bench_host_cost import alone, alternate
from bench_ssh_transport import cgroup_cpu_s
from textual.screen import Screen

from cockpit.config import Config, HostConfig
from cockpit.lab.lab import Lab
from cockpit.lab.nodes import standin_unit_text
from cockpit.remote.pool import HostPool
from cockpit.session import RecordedSession
from cockpit.sglang.deployments.fleet import READY, FleetReader, FleetUnit, HostGpus, HostRound
from cockpit.systemd.status import UnitStatus
from cockpit.ui.app import CockpitApp
from cockpit.ui.launch import collect_less_often
from cockpit.ui.screens import fleet as fleet_screen
from cockpit.ui.screens.fleet import FleetScreen

WARMUP = 2


def _cpu_ms() -> float:
    """This process's CPU time so far (every thread), in ms."""
    return time.process_time() * 1000


def _add_units(lab: Lab, count: int) -> list[str]:
    """`count - 1` stand-in units beside the lab's sglang-demo, started."""
    names, ssh = [], ["ssh", "-F", str(lab.ssh_config), lab.name]
    for k in range(1, count):
        name = f"sglang-bench-{k}.service"
        text = standin_unit_text(30300 + k)
        subprocess.run(
            [*ssh, "tee", f"/etc/systemd/system/{name}"], input=text.encode(), check=True, capture_output=True
        )
        names.append(name)
    if names:
        subprocess.run([*ssh, "systemctl daemon-reload && systemctl start " + " ".join(names)], check=True)
    return names


async def _rounds(reader: FleetReader, hosts: dict[str, list[str]], count: int) -> list[HostRound]:
    """`count` rounds, one a second (a round that takes longer is followed at once); the last answers."""
    answered: list[HostRound] = []
    for _ in range(count):
        began = time.monotonic()
        answered = await reader.round(hosts)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    return answered


async def polled(lab: Lab, seconds: float, settle: float) -> dict[str, float]:
    """The host's and this process's CPU over `seconds` of rounds a second of a fresh fleet reader
    on `lab` alone (its own connection), once `settle` seconds of rounds have passed."""
    pool = HostPool(Config(hosts={lab.name: HostConfig(name=lab.name)}))
    reader, hosts = FleetReader(pool.get), {lab.name: []}
    try:
        await _rounds(reader, hosts, round(settle))
        host, jump = cgroup_cpu_s(lab), _cpu_ms()
        [answered] = await _rounds(reader, hosts, round(seconds))
        host, jump = cgroup_cpu_s(lab) - host, _cpu_ms() - jump
    finally:
        await pool.close()
    if answered.error is not None:
        raise RuntimeError(f"{lab.name} could not be read: {answered.error}")
    return {"host_s": host, "jump_box_ms": jump, "ready": sum(1 for u in answered.units if u.trouble == READY)}


async def host_side(lab: Lab, args: argparse.Namespace) -> dict[str, Any]:
    """What a fleet reader asking a round a second costs `lab`, alternating with the host alone."""
    rounds = round(args.seconds)
    polls, alone_s = await alternate(
        lab, args.seconds, args.host_rounds, args.settle, lambda: polled(lab, args.seconds, args.settle)
    )
    windows = [
        {
            "units_ready": fleet["ready"],
            "host_alone_s": round(base, 4),
            "host_polled_s": round(fleet["host_s"], 4),
            "host_pct_of_one_core": round(100 * (fleet["host_s"] - base) / args.seconds, 3),
            "host_ms_per_round": round(1000 * (fleet["host_s"] - base) / rounds, 2),
            "jump_box_ms_per_round": round(fleet["jump_box_ms"] / rounds, 2),
        }
        for fleet, base in polls
    ]
    host = [w["host_pct_of_one_core"] for w in windows]
    return {
        "units": args.units,
        "window_s": args.seconds,
        "windows": windows,
        "host_pct_of_one_core": round(statistics.median(host), 3),
        "host_pct_spread": [min(host), max(host)],
        "host_ms_per_round": round(statistics.median(w["host_ms_per_round"] for w in windows), 2),
        "host_alone_pct_of_one_core": round(100 * statistics.median(alone_s) / args.seconds, 3),
        "jump_box_ms_per_round": round(statistics.median(w["jump_box_ms_per_round"] for w in windows), 2),
        "goal_host_pct": 1.0,
    }


async def data(labs: list[Lab], rounds: int) -> dict[str, Any]:
    names = [lab.name for lab in labs]
    pool = HostPool(Config(hosts={n: HostConfig(name=n) for n in names}))
    reader = FleetReader(pool.get)
    counts, out = sorted({1, 2, 4, len(labs)} & set(range(1, len(labs) + 1))), []
    try:
        await _rounds(reader, {n: [] for n in names}, 5)  # connect every host, read every unit once
        alone_per_s = [s / rounds for s in await asyncio.gather(*(alone(lab, rounds) for lab in labs))]
        for count in counts:
            hosts: dict[str, list[str]] = {n: [] for n in names[:count]}
            cpus, units, ready = [], 0, 0
            host_before = [cgroup_cpu_s(lab) for lab in labs[:count]]
            began = time.monotonic()
            for _ in range(rounds):
                cpu = _cpu_ms()
                answered = await _rounds(reader, hosts, 1)
                cpus.append(_cpu_ms() - cpu)
                units = sum(len(r.units) for r in answered)
                ready = sum(1 for r in answered for u in r.units if u.trouble == READY)
            took = time.monotonic() - began
            host_ms = [
                1000 * (cgroup_cpu_s(lab) - before - rate * took) / rounds
                for lab, before, rate in zip(labs[:count], host_before, alone_per_s[:count], strict=True)
            ]
            out.append(
                {
                    "hosts": count,
                    "units": units,
                    "ready": ready,
                    "jump_box_ms_per_round_p50": round(pct(cpus, 50), 2),
                    "jump_box_ms_per_round_p95": round(pct(cpus, 95), 2),
                    "host_ms_per_round_each": [round(ms, 2) for ms in host_ms],
                }
            )
    finally:
        await pool.close()
    result: dict[str, Any] = {"labs": len(labs), "rounds_each": rounds, "by_host_count": out}
    if len(out) > 1:
        slope, fixed = statistics.linear_regression(
            [r["hosts"] for r in out], [r["jump_box_ms_per_round_p50"] for r in out]
        )
        result["jump_box_ms_per_added_host"] = round(slope, 2)
        result["jump_box_fixed_ms_per_round"] = round(fixed, 2)
        result["extrapolated_32_hosts"] = {
            "jump_box_ms_per_round": round(fixed + 32 * slope, 1),
            "jump_box_share_of_one_core_at_1_hz": round((fixed + 32 * slope) / 1000, 3),
        }
    return result


class Fleet(RecordedSession):
    """32 hosts of 8 units, answering at once; `changes` units change state each round."""

    def __init__(self, hosts: int, units: int, changes: int, wanted: int) -> None:
        super().__init__(Config(), None)
        self.hosts = [f"gpu{k:02d}" for k in range(hosts)]
        self.units = [f"sglang-{m}.service" for m in range(units)]
        self.changes, self.wanted, self.rounds = changes, wanted, 0
        self.failed: set[tuple[str, str]] = set()
        self.rng = random.Random(17)
        self.enough = asyncio.Event()

    async def fleet_round(self) -> list[HostRound]:
        self.rounds += 1
        if self.rounds >= self.wanted:
            self.enough.set()
        for _ in range(self.changes):
            self.failed ^= {(self.rng.choice(self.hosts), self.rng.choice(self.units))}
        gpus = HostGpus(8, 8, 977640, 1150168)
        return [
            HostRound(
                h,
                [
                    FleetUnit(h, u, "failed", "the unit is failed (failed)", UnitStatus(u, h, active_state="failed"))
                    if (h, u) in self.failed
                    else FleetUnit(h, u, READY, "/health answered 200", UnitStatus(u, h, active_state="active"))
                    for u in self.units
                ],
                gpus,
            )
            for h in self.hosts
        ]


async def screen(hosts: int, units: int, rounds: int, changes: int) -> dict[str, Any]:
    fleet = Fleet(hosts, units, changes, rounds)
    updates: list[float] = []
    shows: list[float] = []
    original_update, original_show = Screen._on_timer_update, FleetScreen.show

    def timed_update(screen: Screen) -> None:
        start = time.perf_counter()
        original_update(screen)
        if isinstance(screen, FleetScreen) and fleet.rounds > WARMUP:
            updates.append((time.perf_counter() - start) * 1000)

    def timed_show(screen: FleetScreen, new: Any, count: int) -> None:
        start = time.perf_counter()
        original_show(screen, new, count)
        if fleet.rounds > WARMUP:
            shows.append((time.perf_counter() - start) * 1000)

    Screen._on_timer_update = timed_update  # type: ignore[method-assign]
    FleetScreen.show = timed_show  # type: ignore[method-assign]
    fleet_screen.REFRESH_S = 1.0
    collect_less_often()  # the collector's pace `cockpit` sets before its app runs
    try:
        app = CockpitApp(Config(), None, session=fleet)
        async with app.run_test(headless=True, size=(160, 50)) as pilot:
            app.push_screen(FleetScreen(fleet))
            await pilot.pause()
            await fleet.enough.wait()
            await pilot.pause()
            shown = len(app.screen.rows) if isinstance(app.screen, FleetScreen) else 0
    finally:
        Screen._on_timer_update = original_update  # type: ignore[method-assign]
        FleetScreen.show = original_show  # type: ignore[method-assign]
    return {
        "hosts": hosts,
        "units_per_host": units,
        "rows": shown,
        "rounds": fleet.rounds,
        "changes_per_round": changes,
        "show_ms_p50": round(pct(shows, 50), 2),
        "show_ms_p95": round(pct(shows, 95), 2),
        "frame_ms_p50": round(pct(updates, 50), 2),
        "frame_ms_p95": round(pct(updates, 95), 2),
        "frame_ms_max": round(max(updates), 2),
        "frames": len(updates),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "fleet"}
    if args.screen_rounds > 0:  # 0: the hosts' parts alone
        result["screen"] = await screen(32, 8, args.screen_rounds, 4)
    if args.labs:
        labs = [lab_up(f"{args.prefix}{k}") for k in range(args.labs)]
        try:
            for lab in labs:
                _add_units(lab, args.units)
            await asyncio.sleep(5)  # the stand-ins' start-up
            if args.host_rounds > 0:
                result["host"] = await host_side(labs[0], args)
            if args.rounds > 0:
                result["data"] = await data(labs, args.rounds)
        finally:
            for lab in labs:
                lab.down()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", type=int, default=6, help="labs to boot (0: the screen part alone)")
    parser.add_argument("--prefix", default="cockpit-bench-f", help="the labs' names, before their number")
    parser.add_argument("--units", type=int, default=8, help="SGLang units per lab")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per host count (0: no data part)")
    parser.add_argument("--host-rounds", type=int, default=3, help="polled windows of the host part (0: none)")
    parser.add_argument("--seconds", type=float, default=60, help="each window of the host part (default 60)")
    parser.add_argument("--settle", type=float, default=10, help="rounds before a polled window, wait after it")
    parser.add_argument("--screen-rounds", type=int, default=20, help="rounds of the screen part (0: none)")
    emit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
