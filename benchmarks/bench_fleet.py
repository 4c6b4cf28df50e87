"""The fleet view's cost (issue 17, item 6). Prints JSON.

Two halves, as one machine cannot hold 32 GPU hosts:

- `data`: real rounds (cockpit.sglang.deployments.fleet) over `--labs` labs of `--units` SGLang stand-in
  units each, one connection per host, a round a second, with 1, 2, 4 ... hosts at once. For
  each count: the cockpit's CPU per round (its own process: asyncssh, parsing, assessing) and
  per host, and the round's wall time. A per-host cost that stays flat as hosts are added is
  what makes 32 hosts 32 times one; `extrapolated_32_hosts` multiplies the measured per-host
  cost at the largest count.
- `screen`: the fleet screen over 32 hosts x 8 units answered from memory (the data half is
  timed above), a few units changing each round: Textual's screen update while it is open
  (`Screen._on_timer_update`: layout, the visible rows, the compositor) and the screen's own
  `show` per round, headless at 160x50, with the collector's thresholds the app runs with. The
  first rounds (WARMUP) draw the screen and add the rows, which a person sees once, and are
  left out.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import subprocess
import time
from typing import Any

from _common import emit, lab_up, pct
from textual.screen import Screen

from cockpit.config import Config, HostConfig
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
    use = resource.getrusage(resource.RUSAGE_SELF)
    return (use.ru_utime + use.ru_stime) * 1000


def _add_units(lab: Any, count: int) -> list[str]:
    """`count - 1` stand-in units beside the lab's sglang-demo, started."""
    names, ssh = [], ["ssh", "-F", str(lab.ssh_config), lab.name]
    for k in range(1, count):
        name = f"sglang-bench-{k}.service"
        text = standin_unit_text(30300 + k)
        subprocess.run(
            [*ssh, "tee", f"/etc/systemd/system/{name}"], input=text.encode(), check=True, capture_output=True
        )
        names.append(name)
    ssh = ["ssh", "-F", str(lab.ssh_config), lab.name]
    subprocess.run([*ssh, "systemctl daemon-reload && systemctl start " + " ".join(names)], check=True)
    return names


async def data(labs: list[str], rounds: int) -> dict[str, Any]:
    pool = HostPool(Config(hosts={n: HostConfig(name=n) for n in labs}))
    reader = FleetReader(pool.get)
    counts, out = sorted({1, 2, 4, len(labs)} & set(range(1, len(labs) + 1))), []
    try:
        await reader.round({n: [] for n in labs})  # connect every host first
        for count in counts:
            hosts = {n: [] for n in labs[:count]}
            walls, cpus, units, ready = [], [], 0, 0
            for _ in range(rounds):
                began, cpu = time.perf_counter(), _cpu_ms()
                answered = await reader.round(hosts)
                cpus.append(_cpu_ms() - cpu)
                walls.append((time.perf_counter() - began) * 1000)
                units = sum(len(r.units) for r in answered)
                ready = sum(1 for r in answered for u in r.units if u.trouble == READY)
                await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - began)))
            cpu_p50 = pct(cpus, 50)
            out.append(
                {
                    "hosts": count,
                    "units": units,
                    "ready": ready,
                    "round_wall_ms_p50": round(pct(walls, 50), 1),
                    "round_wall_ms_p95": round(pct(walls, 95), 1),
                    "cpu_ms_per_round_p50": round(cpu_p50, 1),
                    "cpu_ms_per_host_per_round": round(cpu_p50 / count, 1),
                }
            )
    finally:
        await pool.close()
    per_host = out[-1]["cpu_ms_per_host_per_round"]
    return {
        "labs": len(labs),
        "rounds_each": rounds,
        "by_host_count": out,
        "extrapolated_32_hosts": {
            "cpu_ms_per_round": round(per_host * 32, 1),
            "cpu_share_of_one_core_at_1_hz": round(per_host * 32 / 1000, 3),
        },
    }


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
    if args.screen_rounds > 0:  # 0: the hosts' half alone
        result["screen"] = await screen(32, 8, args.screen_rounds, 4)
    if args.labs:
        names = [f"cockpit-bench-f{k}" for k in range(args.labs)]
        labs = [lab_up(name) for name in names]
        try:
            for lab in labs:
                _add_units(lab, args.units)
            await asyncio.sleep(5)  # the stand-ins' start-up
            result["data"] = await data(names, args.rounds)
        finally:
            for lab in labs:
                lab.down()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", type=int, default=6, help="labs to boot (0: the screen half alone)")
    parser.add_argument("--units", type=int, default=8, help="SGLang units per lab")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per host count")
    parser.add_argument("--screen-rounds", type=int, default=20, help="rounds of the screen half (0: none)")
    emit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
