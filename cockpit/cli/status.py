"""`cockpit status`: the unit's state, PID, restarts, last exit and readiness."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from cockpit.cli.target import early_reader, session_of, target_of
from cockpit.fmt import duration

HEALTH_LINES = 500  # of this start's journal lines that say something of its health: the last ones

if TYPE_CHECKING:
    from cockpit.config import Config
    from cockpit.remote.base import Host
    from cockpit.remote.mux import MuxHost
    from cockpit.targets import Target


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="the unit's state, PID, restarts, last exit and readiness",
        description="Exit 0 when the server is ready (systemd, its health endpoint, its journal and its "
        "processes agree), 1 otherwise: starting, degraded, hung or down, with the reason.",
    )
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")
    p.add_argument("--json", action="store_true", help="print the UnitStatus fields as JSON")
    p.add_argument(
        "--generate",
        action="store_true",
        help="ask /health_generate (one token through every process; at least a second) instead of /health, "
        "which answers 200 without asking the model: only generation tells a hung server from a healthy one",
    )


async def _status(args: argparse.Namespace, cfg: Config, target: Target, reader: MuxHost | None) -> int:
    import asyncio

    from cockpit.remote.base import HostError
    from cockpit.sglang.deployment import read_deployment
    from cockpit.sglang.health import READY, WATCHED_PATTERN, HealthScan, assess
    from cockpit.sglang.ranks import ranks_on_node
    from cockpit.systemd import gpu_use, journal, processes
    from cockpit.systemd.process_facts import Viewpoint
    from cockpit.systemd.readiness import GENERATE, HEALTH, Probe, probe
    from cockpit.systemd.status import fetch

    async def members(host: Host) -> processes.UnitProcesses | None:
        try:
            return await processes.read(host, None, target.unit)
        except HostError:
            return None

    async with session_of(cfg, target, reader=reader) as session:
        host = await session.reading_host()
        # What needs nothing of the status is asked beside it, each on a channel of its own: the
        # GPU table, the unit's processes and its start's health lines (the host's systemd says
        # which cgroup and which start).
        gpus_read = asyncio.ensure_future(gpu_use.read_or_say(host))
        members_read = asyncio.ensure_future(members(host))
        said_read = asyncio.ensure_future(journal.matching(host, target.unit, WATCHED_PATTERN, HEALTH_LINES, timeout=5))
        try:
            status = await fetch(host, target.unit)

            async def answer() -> tuple[Probe, int | None]:
                """The health answer, where it listens (the config's url, or the unit's own
                flags), and how many scheduler ranks those flags put on this node."""
                found = await read_deployment(host, target, catalogs=session.catalogs, status=status, python=False)
                ranks = ranks_on_node(found.unit.flag_values()) if found.unit else None
                return await probe(host, *found.address, GENERATE if args.generate else HEALTH, timeout=10), ranks

            scan, schedulers, read_journal = HealthScan(), None, False
            if status.active_state == "active":
                (health, schedulers), members_now, said = await asyncio.gather(answer(), members_read, said_read)
                if said is not None:
                    scan.feed(said)
                    read_journal = True
                status = replace(status, ready=health.ok, health=health, processes=members_now)
            signals = scan.of(status.invocation_id)
            told = assess(status, signals, status.health, status.processes, schedulers=schedulers, journal=read_journal)
            status = replace(status, readiness=told.state, readiness_reason=told.reason)
            gpus = await gpus_read
        finally:
            for side in (gpus_read, members_read, said_read):
                side.cancel()
    view = Viewpoint(target.unit, status.running_invocation)
    gpu_lines = gpu_use.summary_lines(gpus, view)
    if args.json:
        print(json.dumps({**status.to_json(), "gpus": gpus.to_json(view), "gpus_note": gpus.missing}))
    else:
        state = f"{status.active_state} ({status.sub_state})"
        reason = f": {status.readiness_reason}" if status.readiness_reason else ""
        print(f"{status.unit} on {status.host}: {state}, {status.readiness}{reason}")
        print(
            f"  pid {status.main_pid or '-'}, up {duration(status.uptime())}, restarts {status.n_restarts}, "
            f"last exit {status.last_exit or '-'}"
        )
        print(
            f"  invocation {status.invocation_id or '-'}, unit file {status.fragment_path or '-'}"
            + (" (changed on disk: daemon-reload needed)" if status.need_daemon_reload else "")
        )
        for line in gpu_lines:
            print(f"  {line}")
    return 0 if status.readiness == READY else 1


def run(args: argparse.Namespace) -> int:
    """The host's `ssh` is started before asyncio and the session are imported: it logs in on
    another core meanwhile (cockpit.remote.mux)."""
    cfg, target = target_of(args)
    assert target is not None
    reader = early_reader(cfg, target)
    import asyncio

    return asyncio.run(_status(args, cfg, target, reader))
