"""`cockpit experiment run FILE`: every variant of an experiment checked, written, restarted,
measured against its SLOs, and the unit put back; the answer on stdout (or its JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError, UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "experiment",
        help="run a tuning experiment: variants of a unit, each measured against SLOs",
        description="Each variant of the unit in turn: pre-flight (a variant that would not start is skipped), "
        "write, restart, watch to ready, the workload at each load, judged by the SLOs; the unit put back at the "
        "end. The file's format is in docs/experiments.md.",
    )
    sub = p.add_subparsers(dest="experiment_command", required=True, parser_class=type(p))
    run = sub.add_parser("run", help="run the experiment FILE describes")
    run.add_argument("file", metavar="FILE", help="the experiment's TOML file")
    run.add_argument("--host", help="the host (else the file's `host`)")
    run.add_argument("--unit", help="the unit (else the file's `unit`)")
    run.add_argument(
        "--deployment", metavar="NAME", help="a [deployments] entry (else the file's `deployment`): every node"
    )
    run.add_argument("--resume", action="store_true", help="go on with a run that was cut off")
    run.add_argument("--json", action="store_true", help="print the experiment's record as JSON")
    run.add_argument("--note", metavar="DIR", help="write the experiment's note (Markdown and its SVG plot) here")
    return p


def table(record: dict[str, Any]) -> str:
    """One row per variant: its outcome, knee, best goodput; then the winner and why."""
    from cockpit.experiment.answer import knee_words

    results = record.get("answer", {}).get("variants", {})
    rows = [f"{'variant':<20} {'outcome':<20} {'knee':<14} {'goodput':>12}  why"]
    for v in record["variants"]:
        got = results.get(v["name"])
        knee = knee_words(got["knee"]) if got else "-"
        goodput = f"{got['goodput_rps']:.2f} req/s" if got else "-"
        rows.append(f"{v['name']:<20} {v['outcome']:<20} {knee:<14} {goodput:>12}  {v.get('reason') or ''}")
    said = record.get("answer", {})
    rows.append(f"winner: {said.get('winner') or 'none'}: {said.get('why', '')}")
    end = record.get("end", {})
    back = (
        "the unit is back as it was"
        if end.get("left_on") == "original"
        else f"the unit is left on {end.get('left_on')}"
    )
    rows.append(f"{back}{'' if end.get('unit_as_asked') else ' (NOT as asked: read the unit)'}")
    return "\n".join(rows)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from cockpit.cli.target import session_of, targets_of
    from cockpit.experiment.plan import read_plan

    plan = read_plan(Path(args.file))
    args.deployment = args.deployment or (None if args.host or args.unit else plan.deployment)
    if not args.deployment:
        args.host, args.unit = args.host or plan.host, args.unit or plan.unit
        if not args.host or not args.unit:
            how = "give `host` and `unit` (or `deployment`) in it, or --host and --unit"
            raise UsageError(f"{args.file} names no unit: {how}")
    cfg, nodes = targets_of(args)
    group = args.deployment or None
    async with session_of(cfg, nodes[0][1], read_only=getattr(args, "read_only", False), group=group) as session:
        progress = (lambda line: None) if args.json else (lambda line: print(f"cockpit: {line}", file=sys.stderr))
        _cancel_on_signals(progress)
        return await session.run_experiment(plan, progress, resume=args.resume)


def _cancel_on_signals(say: Callable[[str], None]) -> None:
    """Ctrl-C (SIGINT) or SIGTERM cancels the run, which puts the unit back; a second one is
    left to its default. Installed here, not left to asyncio's own handler: a command started in
    the background by a script without job control inherits SIGINT ignored, and then Ctrl-C's
    signal would have done nothing at all."""
    import asyncio
    import signal

    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None

    def cancel(sig: signal.Signals) -> None:
        for each in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(each)
        say(f"{sig.name}: cancelling; the unit is put back as it was (another {sig.name} leaves it as it is)")
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, cancel, sig)


def run(args: argparse.Namespace) -> int:
    import asyncio

    try:
        record = asyncio.run(_run(args))
        if args.note:
            from cockpit.experiment.note import write_note

            path = write_note(record, Path(args.note))
            print(f"cockpit: the note is {path}", file=sys.stderr)
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    except asyncio.CancelledError:  # a signal: the run put the unit back and kept its record
        print("cockpit: the experiment was cancelled; its record says what was measured", file=sys.stderr)
        return 130
    print(json.dumps(record) if args.json else table(record))
    return 0 if record.get("end", {}).get("unit_as_asked") else 1
