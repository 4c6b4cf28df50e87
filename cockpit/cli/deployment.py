"""`cockpit deployment set|restart NAME`: a launch over nodes changed and restarted as one.

`set` applies one flag change to every node's unit (each keeps its own `--node-rank`), checks the
edited command lines before anything is written (each node's static checks and what must agree
between the nodes), then writes every node or none; `--restart` then restarts the group.
`restart` stops every node, checks each stopped, starts node 0 then the others and watches them
to the group's ready. Each restart is one attempt in the deployment's own timeline.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from cockpit.cli.unit import add_change_arguments, with_changes
from cockpit.errors import CockpitError

if TYPE_CHECKING:
    from cockpit.attempts import Attempt
    from cockpit.rollout.group import GroupNode
    from cockpit.session import Session
    from cockpit.sglang.catalog.flags import Catalog
    from cockpit.systemd.group_write import NodeWrite


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "deployment",
        help="a launch over nodes as one: a flag set on every node (all or none), the group restarted",
        description="A [deployments] entry's nodes changed and restarted together. Exit 0 when it went "
        "through (and, with a restart, the group is ready), 1 when the checks or the restart said no.",
    )
    sub = p.add_subparsers(dest="deployment_command", required=True, parser_class=type(p))
    edit = sub.add_parser("set", help="one flag change on every node, written to all or none")
    edit.add_argument("name", metavar="NAME", help="the [deployments] entry")
    add_change_arguments(edit)
    edit.add_argument("--restart", action="store_true", help="restart the group once every node is written")
    edit.add_argument("--force", action="store_true", help="write even when the checks expect it not to start")
    restart = sub.add_parser("restart", help="stop every node, check each stopped, start them, watch to ready")
    restart.add_argument("name", metavar="NAME", help="the [deployments] entry")
    for command in (edit, restart):
        command.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the group's ready")
        command.add_argument("--json", action="store_true", help="print the outcome as JSON")
    return p


async def _writes(args: argparse.Namespace, session: Session) -> list[tuple[NodeWrite, Catalog | None]]:
    """Every node's unit as read, and as edited, with its release's flag catalog."""
    from cockpit.rollout.group import node_writes

    return await node_writes(
        _nodes(args, session),
        session.catalogs,
        lambda unit: with_changes(unit, args.flag, args.unset, "deployment set"),
    )


def _nodes(args: argparse.Namespace, session: Session) -> list[GroupNode]:
    from cockpit.rollout.group import GroupNode
    from cockpit.targets import deployment_targets

    return [
        GroupNode(node, target, session.host_named(target.host), session.config.host(target.host))
        for node, target in deployment_targets(session.config, args.name)
    ]


async def _run(args: argparse.Namespace) -> tuple[dict, bool]:
    from cockpit import config as config_mod
    from cockpit.cli.target import session_of
    from cockpit.rollout.group import attempt_log, checked, restart_group
    from cockpit.sglang.preflight.preflight import ERROR
    from cockpit.systemd.group_write import write_group

    cfg = config_mod.load(getattr(args, "config", None))
    async with session_of(cfg, None, read_only=getattr(args, "read_only", False)) as session:
        said: dict = {"deployment": args.name}
        if args.deployment_command == "set":
            writes = await _writes(args, session)
            findings = checked(writes)
            said["findings"] = [f.to_json() for f in findings]
            if any(f.severity == ERROR for f in findings) and not args.force:
                said["written"] = False
                return said, False
            said["backups"] = await write_group([w for w, _ in writes])
            said["written"] = True
            if not args.restart:
                return said, True
        nodes = _nodes(args, session)
        log = attempt_log(args.name, [n.target for n in nodes])
        attempt: Attempt = await restart_group(nodes, log, session.catalogs, timeout=args.timeout)
        said["attempt"] = attempt.to_json()
        return said, attempt.outcome == "ready"


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.systemd.group_write import GroupWriteFailed

    try:
        said, ok = asyncio.run(_run(args))
    except GroupWriteFailed as e:  # a node refused the write: the nodes that held new text were put back
        print(f"cockpit: {'nothing changed' if e.unchanged else 'not every node is as it was'}: {e}", file=sys.stderr)
        return 1
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(said))
        return 0 if ok else 1
    for f in said.get("findings", []):
        print(f"{'✗' if f['severity'] == 'error' else '!'} {f['node']} {f['rule']}: {f['message']}")
    if "written" in said:
        print("written to every node" if said["written"] else "nothing written: the checks expect it not to start")
    if "attempt" in said:
        a = said["attempt"]
        print(f"group restart (attempt {a['number']}): {a['outcome']} after {a['seconds']} s: {a['detail']}")
    return 0 if ok else 1
