"""`cockpit status`: the unit's state, PID, restarts, last exit and readiness."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cockpit.cli.target import early_reader, session_of, target_of
from cockpit.fmt import duration

if TYPE_CHECKING:
    from cockpit.config import Config
    from cockpit.remote.mux import MuxHost
    from cockpit.systemd.gpu_use import GpuUse
    from cockpit.systemd.status import UnitStatus
    from cockpit.targets import Target


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="the unit's state, PID, restarts, last exit and readiness",
        description="Exit 0 when the server is ready (systemd, its health endpoint, its journal and its "
        "processes agree), 1 otherwise: starting, degraded, hung or down, with the reason. The health endpoint is "
        "asked once, one that generates a token as the app's and the fleet's do (one that asks the model nothing "
        "answers 200 from a hung server): /health where the release makes it the /health_generate handler (SGLang "
        "0.5.2 on, unless the unit's environment turns SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION off), else "
        "/health_generate. Which one answered, how long it took and whether it generated a token (as the release's "
        "own source and the unit's environment say) are in the health line and in the JSON's health.",
    )
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")
    p.add_argument(
        "--deployment",
        metavar="NAME",
        help="a [deployments] entry: every node's status and one readiness for the group",
    )
    p.add_argument("--json", action="store_true", help="print the UnitStatus fields as JSON")
    p.add_argument(
        "--generate",
        action="store_true",
        help="ask /health_generate (one token through every process; at least a second) where /health would be "
        "asked: where the release's own source cannot be read, or to be sure whatever it says",
    )


def _print(status: UnitStatus, gpus: GpuUse, indent: str = "") -> None:
    from cockpit.systemd import gpu_use
    from cockpit.systemd.process_facts import Viewpoint

    state = f"{status.active_state} ({status.sub_state})"
    reason = f": {status.readiness_reason}" if status.readiness_reason else ""
    print(f"{indent}{status.unit} on {status.host}: {state}, {status.readiness}{reason}")
    print(
        f"{indent}  pid {status.main_pid or '-'}, up {duration(status.uptime())}, restarts {status.n_restarts}, "
        f"last exit {status.exit_said}"
    )
    print(
        f"{indent}  invocation {status.invocation_id or '-'}, unit file {status.fragment_path or '-'}"
        + (" (changed on disk: daemon-reload needed)" if status.need_daemon_reload else "")
    )
    if status.health is not None:
        print(f"{indent}  health: {status.health.words()}")
    for line in gpu_use.summary_lines(gpus, Viewpoint(status.unit, status.running_invocation)):
        print(f"{indent}  {line}")


def _json(status: UnitStatus, gpus: GpuUse) -> dict:
    from cockpit.systemd.process_facts import Viewpoint

    view = Viewpoint(status.unit, status.running_invocation)
    return {**status.to_json(), "gpus": gpus.to_json(view), "gpus_note": gpus.missing}


async def _status(args: argparse.Namespace, cfg: Config, target: Target, reader: MuxHost | None) -> int:
    from cockpit.sglang.deployments.status_read import read_status
    from cockpit.sglang.server.health import READY

    async with session_of(cfg, target, reader=reader) as session:
        status, gpus = await read_status(await session.reading_host(), target, session.catalogs, args.generate)
    if args.json:
        print(json.dumps(_json(status, gpus)))
    else:
        _print(status, gpus)
    return 0 if status.readiness == READY else 1


async def _deployment(args: argparse.Namespace, cfg: Config) -> int:
    """Every node's status, and one line for the group: ready only when the head is ready and
    every other node's schedulers run."""
    from cockpit.errors import CockpitError
    from cockpit.sglang.deployments.nodes_status import group_readiness
    from cockpit.sglang.deployments.status_read import read_group
    from cockpit.sglang.server.health import READY
    from cockpit.targets import deployment_targets

    nodes = deployment_targets(cfg, args.deployment)
    async with session_of(cfg, None) as session:
        answers = await read_group(session.host_named, [t for _, t in nodes], session.catalogs, generate=args.generate)
    read: list[tuple[UnitStatus, GpuUse]] = []
    for answer in answers:
        if isinstance(answer, CockpitError):
            raise answer
        read.append(answer)
    group = group_readiness([(node, status) for (node, _), (status, _) in zip(nodes, read, strict=True)])
    if args.json:
        print(
            json.dumps(
                {
                    "deployment": args.deployment,
                    "readiness": group.state,
                    "readiness_reason": group.reason,
                    "nodes": [{"node": node, **_json(*each)} for (node, _), each in zip(nodes, read, strict=True)],
                }
            )
        )
    else:
        print(f"{args.deployment}: {group.state}: {group.reason}")
        for (node, _), each in zip(nodes, read, strict=True):
            print(f"  {node}:")
            _print(*each, indent="    ")
    return 0 if group.state == READY else 1


def run(args: argparse.Namespace) -> int:
    """The host's `ssh` is started before asyncio and the session are imported: it logs in on
    another core meanwhile (cockpit.remote.mux)."""
    if args.deployment:
        import asyncio

        from cockpit import config as config_mod

        if args.unit or args.host:
            raise SystemExit("cockpit: --deployment names its nodes' units itself: give it alone")
        return asyncio.run(_deployment(args, config_mod.load(getattr(args, "config", None))))
    cfg, target = target_of(args)
    assert target is not None
    reader = early_reader(cfg, target)
    import asyncio

    return asyncio.run(_status(args, cfg, target, reader))
