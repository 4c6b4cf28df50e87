"""`cockpit stacks`: where every process of the unit is now (py-spy dump), one per rank."""

from __future__ import annotations

import argparse


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
    p.add_argument("--all-threads", action="store_true", help="every thread of each process, not its main thread alone")
    p.add_argument("--json", action="store_true", help="every process, thread and frame as JSON")


async def _stacks(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from cockpit.cli.target import open_target
    from cockpit.traceback.stack_dump import headline, rank_of, thread_text

    async with open_target(args, read_only=True) as session:
        capture = await session.stacks()
    if args.json:
        print(
            json.dumps(
                {
                    "at": capture.at,
                    "processes": [asdict(p) | {"rank": rank_of(p.title) or None} for p in capture.processes],
                }
            )
        )
        return 0
    target = session.target
    assert target is not None
    print(f"{len(capture.processes)} processes of {target.unit} on {target.host}, as py-spy dumped them:")
    for stack in capture.processes:
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
