"""`cockpit bench`: the load runner headless, a table on stdout and the JSON of docs/architecture.md in a file.

With `--host/--unit` the server is reached through the SSH connection (a forwarded local
port), since servers usually listen on the host's loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from cockpit.errors import CockpitError, UsageError

if TYPE_CHECKING:
    from cockpit.load.results import LevelResult


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench",
        help="a concurrency sweep against the OpenAI-compatible API",
        description="Closed-loop load at each concurrency level: TTFT, TPOT, per-token ITL, "
        "chunk gaps, tokens per chunk and output tok/s, from the server's usage.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the server's base URL as this machine reaches it")
    where.add_argument("--host", help="a config host or ssh_config alias (with --unit): through SSH")
    where.add_argument(
        "--deployment", metavar="NAME", help="a [deployments] entry: its node 0, the one that serves, through SSH"
    )
    p.add_argument(
        "--unit", help="the unit on --host (its URL comes from the config, else from the unit's own --host and --port)"
    )
    p.add_argument("--concurrency", default="1,2,4,8,16,32", help="comma-separated levels (default 1,2,4,8,16,32)")
    p.add_argument("--requests", type=_at_least(1), default=64, help="measured requests per level (default 64)")
    p.add_argument(
        "--duration",
        type=_seconds,
        help="seconds per level instead of --requests: each stream sends its next request until the time is up",
    )
    p.add_argument("--warmup", type=_at_least(0), default=2, help="unmeasured requests per level first (default 2)")
    p.add_argument("--input-len", type=_at_least(1), default=1024, help="prompt length in tokens (default 1024)")
    p.add_argument("--output-len", type=_at_least(1), default=256, help="max_tokens, with ignore_eos (default 256)")
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    p.add_argument("--model", help="model name (default: the first of /v1/models)")
    p.add_argument("--json", metavar="OUT", help="write the run's JSON here")
    return p


def _at_least(minimum: int):
    """An argparse type: a whole number of at least `minimum` (0 requests used to become 1)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is too few: give {minimum} or more")
        return value

    return convert


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--concurrency {text!r}: expected numbers separated by commas, such as 1,4,16") from None
    if not levels or min(levels) < 1:
        raise UsageError("--concurrency: every level must be 1 or more")
    return levels


def table(levels: list[LevelResult]) -> str:
    head = (
        f"{'conc':>5} {'req':>5} {'err':>4} {'out tok/s':>10} {'tok/s/str':>9} {'TTFT p50':>9} {'TPOT':>7} "
        f"{'ITL':>7} {'gap':>7} {'tok/chunk':>9} {'E2E p50':>9}"
    )
    rows = [head, "-" * len(head)]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for lv in levels:
        rows.append(
            f"{lv.concurrency:>5} {lv.requests:>5} {lv.errors:>4} {lv.output_tokens_per_s:>10.1f} "
            f"{(lv.output_tokens_per_s_per_stream or 0):>9.1f} {ms(lv.ttft_ms['p50']):>9} "
            f"{ms(lv.tpot_ms['mean']):>7} {ms(lv.itl_ms['mean']):>7} {ms(lv.chunk_gap_ms['mean']):>7} "
            f"{(lv.tokens_per_chunk or 0):>9.2f} {ms(lv.e2e_ms['p50']):>9}"
        )
    if any(lv.token_count_source != "usage" for lv in levels):
        rows.append("note: the server sent no usage; tokens were counted from chunks (an estimate)")
    return "\n".join(rows)


@contextlib.asynccontextmanager
async def _endpoint(args: argparse.Namespace) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The URL to load and what identifies the server, reached directly or through SSH (where a
    read-only host refuses it)."""
    read_only = getattr(args, "read_only", False)
    if args.url:
        if read_only:
            raise UsageError("--read-only refuses every load run: no load was sent")
        yield args.url.rstrip("/"), {}
        return
    if not args.unit and not args.deployment:
        raise UsageError("--unit is needed with --host")
    from cockpit.cli.target import session_of, targets_of
    from cockpit.load.runner import forwarded
    from cockpit.sglang.deployments.deployment import read_deployment

    cfg, nodes = targets_of(args)
    async with session_of(cfg, nodes[0][1], read_only=read_only) as session:  # a launch over nodes: node 0 serves
        target = session.target
        assert target is not None
        # The unit must exist (a missing one is an error, never a run against whatever listens on the port).
        found = await read_deployment(session.host, target, catalogs=session.catalogs, python=False)
        addr, port = found.address
        async with forwarded(session.host, addr, port) as local:
            parts = urlsplit(target.url)
            yield (
                urlunsplit((parts.scheme, f"127.0.0.1:{local}", parts.path, "", "")).rstrip("/"),
                {
                    "host": target.host,
                    "unit": target.unit,
                    "url": target.url,
                    "forwarded_by": session.host.forwarded_by,
                },
            )


async def _server_info(url: str) -> dict[str, Any]:
    import asyncio

    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for path in ("/server_info", "/get_server_info"):
                async with session.get(url + path) as resp:
                    if resp.status == 200:
                        return await resp.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        pass
    return {}


def _seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a length of time: give seconds above 0")
    return value


async def _run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.load.runner import LoadConfig, Runner, run_record, server_args  # aiohttp: only when a run starts

    levels_wanted = _levels(args.concurrency)
    async with _endpoint(args) as (url, where):
        config = LoadConfig(
            url=url,
            concurrency=levels_wanted,
            requests=args.requests,
            duration_s=args.duration,
            warmup=args.warmup,
            input_len=args.input_len,
            output_len=args.output_len,
            endpoint=args.endpoint,
            model=args.model,
        )
        info = await _server_info(url)

        def progress(level: LevelResult) -> None:
            print(
                f"concurrency {level.concurrency}: {level.output_tokens_per_s:.1f} tok/s, {level.errors} errors",
                file=sys.stderr,
            )

        started = time.time()
        try:
            levels = await Runner(config, on_level=progress).run()
        except OSError as e:
            raise CockpitError(f"cannot reach {url}: {e}") from None
    print(table(levels))
    record = run_record(
        config,
        levels,
        started_at=started,
        host=where.get("host"),
        unit=where.get("unit"),
        sglang_version=info.get("version"),
        server_args=server_args(info),
    )
    record["config"]["url"] = where.get("url", url)  # the server's own URL, not a forwarded port
    if where.get("forwarded_by"):
        record["config"]["forwarded_by"] = where["forwarded_by"]  # "openssh", or why asyncssh carried it
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps(record, indent=1))
    if where.get("host") and where.get("unit"):  # a unit's run: the app's compare (c) lists it
        from cockpit.load.store import save_run

        saved = await asyncio.to_thread(save_run, where["host"], where["unit"], record)
        print(f"cockpit: the run is saved as {saved}: c in the cockpit compares it", file=sys.stderr)
    return 1 if any(lv.errors for lv in levels) else 0


def run(args: argparse.Namespace) -> int:
    import asyncio

    try:
        return asyncio.run(_run(args))
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
