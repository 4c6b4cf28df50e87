"""`cockpit status`: the unit's state, PID, restarts, last exit and readiness."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from cockpit.cli.target import early_reader, session_of, target_of
from cockpit.fmt import duration

if TYPE_CHECKING:
    from cockpit.config import Config
    from cockpit.remote.mux import MuxHost
    from cockpit.targets import Target


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="the unit's state, PID, restarts, last exit and readiness",
        description="Exit 0 when the unit is active and /health answers 200, 1 otherwise.",
    )
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")
    p.add_argument("--json", action="store_true", help="print the UnitStatus fields as JSON")


async def _status(args: argparse.Namespace, cfg: Config, target: Target, reader: MuxHost | None) -> int:
    import asyncio

    from cockpit.sglang.deployment import read_deployment
    from cockpit.systemd import gpu_use
    from cockpit.systemd.process_facts import Viewpoint
    from cockpit.systemd.readiness import is_ready
    from cockpit.systemd.status import fetch

    async with session_of(cfg, target, reader=reader) as session:
        host = await session.reading_host()
        # The GPU table needs nothing of the status: asked beside it, on a channel of its own.
        gpus_read = asyncio.ensure_future(gpu_use.read_or_say(host))
        try:
            status = await fetch(host, target.unit)
            ready = False
            if status.active_state == "active":
                # where it listens: the config's url, or the unit's own flags
                found = await read_deployment(host, target, catalogs=session.catalogs, status=status, python=False)
                ready = await is_ready(host, *found.address)
            gpus = await gpus_read
        finally:
            gpus_read.cancel()
    status = replace(status, ready=ready)
    view = Viewpoint(target.unit, status.running_invocation)
    gpu_lines = gpu_use.summary_lines(gpus, view)
    if args.json:
        print(json.dumps({**status.to_json(), "gpus": gpus.to_json(view), "gpus_note": gpus.missing}))
    else:
        state = f"{status.active_state} ({status.sub_state})"
        print(f"{status.unit} on {status.host}: {state}, {'ready' if ready else 'not ready'}")
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
    return 0 if status.active_state == "active" and ready else 1


def run(args: argparse.Namespace) -> int:
    """The host's `ssh` is started before asyncio and the session are imported: it logs in on
    another core meanwhile (cockpit.remote.mux)."""
    cfg, target = target_of(args)
    assert target is not None
    reader = early_reader(cfg, target)
    import asyncio

    return asyncio.run(_status(args, cfg, target, reader))
