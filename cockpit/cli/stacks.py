"""`cockpit stacks`: where every process of the unit is now (py-spy dump), one per rank."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.systemd.stacks import StackCapture
    from cockpit.targets import Target


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stacks",
        help="dump the Python stack of every process of the unit (py-spy on the host): where a hung server waits",
        description="`py-spy dump` of each process in the unit's cgroup, with `sudo -n` on a host configured "
        "with sudo = true: one line per process (its rank, and where its main thread waits), then that thread as a "
        "traceback (--all-threads: every thread). Exit 2 "
        "when the unit runs nothing or py-spy is missing (the sentence says how to install it).",
    )
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")
    p.add_argument("--deployment", metavar="NAME", help="a [deployments] entry: the stacks of every node's unit")
    p.add_argument("--all-threads", action="store_true", help="every thread of each process, not its main thread alone")
    p.add_argument("--json", action="store_true", help="every process, thread and frame as JSON")
    p.add_argument(
        "--root-ptrace",
        action="store_true",
        help="on a read-only host with sudo = true, let py-spy run there as root through sudo (it pauses each "
        "process of the unit while it reads it)",
    )


async def _stacks(args: argparse.Namespace) -> int:
    """Every process of the unit (or of every node's unit, at once: a launch over nodes hangs on
    all of them together), as py-spy dumped it."""
    import asyncio
    import json
    from dataclasses import asdict

    from cockpit.cli.target import session_of, targets_of
    from cockpit.systemd.processes import rank_of
    from cockpit.systemd.stacks import RootPtraceRefused
    from cockpit.traceback.stack_dump import headline, thread_text

    cfg, nodes = targets_of(args)

    async def capture(target: Target) -> StackCapture:
        async with session_of(cfg, target, read_only=getattr(args, "read_only", False)) as session:
            return await session.stacks(root_ptrace=args.root_ptrace)

    try:
        captures = await asyncio.gather(*(capture(target) for _, target in nodes))
    except RootPtraceRefused as e:
        raise RootPtraceRefused(f"{e}; give --root-ptrace to run it anyway") from None
    if args.json:
        dumps = [
            {
                **({"node": node} if args.deployment else {}),
                "at": c.at,
                "processes": [asdict(p) | {"rank": rank_of(p.title) or None} for p in c.processes],
            }
            for (node, _), c in zip(nodes, captures, strict=True)
        ]
        print(json.dumps({"nodes": dumps} if args.deployment else dumps[0]))
        return 0
    for (node, target), c in zip(nodes, captures, strict=True):
        where = f"{node}: " if args.deployment else ""
        print(f"{where}{len(c.processes)} processes of {target.unit} on {target.host}, as py-spy dumped them:")
        for stack in c.processes:
            print(f"\n{headline(stack)}")
            main = stack.main
            if stack.error:
                print(f"  py-spy could not read it: {stack.error}")
            threads = stack.threads if args.all_threads else [main] if main is not None else []
            for thread in threads:
                for line in thread_text(stack, thread):
                    print(f"  {line}")
    return 0


def run(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_stacks(args))
