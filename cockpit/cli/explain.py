"""`cockpit explain TRACEBACK_FILE --source-root DIR | --host H`: the failing statement and
the flags it reads, as JSON. The traceback may be plain text or `journalctl -o json`."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.errors import CockpitError, UsageError
from cockpit.printable import printable

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cockpit.sglang.catalog.flags import Catalog
    from cockpit.sglang.explain.explain import Explanation
    from cockpit.traceback.model import Traceback


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "explain",
        help="the failing statement of a traceback, and the flags it reads",
        description="Reads a traceback (text or journalctl -o json), opens the failing "
        "frame's source and prints the statement and the SGLang flags it reads.",
    )
    p.add_argument("file", metavar="TRACEBACK_FILE", help="the traceback (- for standard input)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--source-root",
        metavar="DIR",
        help="a local directory holding the release's site-packages (the frame paths are "
        "mapped under it by their part after site-packages/)",
    )
    where.add_argument("--host", help="read the files from this host (a config host or ssh_config alias)")
    p.add_argument(
        "--flags",
        metavar="ARGS",
        help="the server's command line (a unit's ExecStart, quoted as one argument): its values are "
        "said beside each flag, decide which of the release's resolution hooks ran, and give "
        "--model-path, whose config.json (read locally with --source-root, else on --host) gives "
        "the model's values",
    )
    p.add_argument(
        "--index",
        type=int,
        metavar="N",
        help="which traceback of the file, 1 for the first (default: the last); -1 is the last",
    )
    return p


def pick_traceback(path: str, index: int | None = None) -> Traceback:
    """The traceback to explain: the last one with a frame, or the `index`-th; with several in the
    file, says on stderr which was picked and how to pick another."""
    from cockpit.traceback.fold import fold_lines
    from cockpit.traceback.model import Traceback

    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    found = [r for r in fold_lines(data.splitlines()).records if isinstance(r, Traceback) and r.sites]
    if not found:
        raise UsageError(f"{path}: no Python traceback with a frame in it")
    k = len(found) if index in (None, -1) else index if index > 0 else len(found) + index + 1
    if not 1 <= k <= len(found):
        raise UsageError(f"--index {index}: {path} holds {len(found)} traceback{'s' * (len(found) != 1)} with frames")
    tb = found[k - 1]
    if len(found) > 1:
        which = "the last" if k == len(found) else "the first" if k == 1 else f"number {k}"
        first = tb.times[0] if tb.times else None
        at = f" at {datetime.fromtimestamp(first / 1e6):%Y-%m-%d %H:%M:%S}" if first is not None else ""
        print(
            f"cockpit: {path} holds {len(found)} tracebacks; explaining {which} ({printable(tb.exception or '')}{at}); "
            "--index N picks another",
            file=sys.stderr,
        )
    return tb


def local_path(root: Path, remote: str) -> Path:
    """The file under `root` for a frame path: the longest suffix of it that exists there. A
    traceback is text anyone can forge (`site-packages/../../../etc/shadow`): a candidate counts
    only when, `..` and symlinks resolved, it still lies inside `root`, as the `--host` path
    keeps to the service's roots (cockpit.remote.source)."""
    inside = root.resolve()
    suffixes = [remote.split("site-packages/", 1)[1]] if "site-packages/" in remote else []
    parts = Path(remote).parts
    suffixes += [str(Path(*parts[i:])) for i in range(1, len(parts))]
    for suffix in suffixes:
        candidate = (root / suffix).resolve()
        if candidate.is_relative_to(inside) and candidate.is_file():
            return candidate
    raise UsageError(f"{remote} is not under {root}")


def _given(argv: list[str] | None, catalog: Catalog | None) -> dict[str, str | None] | None:
    from cockpit.sglang.preflight.preflight import given_flags

    return given_flags(argv, catalog) if argv is not None and catalog is not None else None


def _explain_local(tb: Traceback, root: Path, argv: list[str] | None) -> tuple[Explanation, dict[str, str | None]]:
    import asyncio

    from cockpit.sglang.catalog.flags import load_catalog
    from cockpit.sglang.explain.explain import explain_for_unit
    from cockpit.sglang.explain.model_reads import module_files
    from cockpit.sglang.preflight.model_files import ModelFiles, config_of

    frame = tb.failing_frame
    assert frame is not None and frame.line is not None
    source = local_path(root, frame.file)
    catalog: Catalog | None = None
    if (root / "sglang" / "srt" / "server_args.py").is_file():
        catalog = load_catalog(root)
    callers: dict[str, str] = {}
    for f in tb.frames[:-1]:
        try:
            callers[f.file] = local_path(root, f.file).read_text(errors="replace")
        except UsageError:  # a frame outside the release (runpy, the standard library): the walk ends there
            continue
    given = _given(argv, catalog)

    async def read_callers() -> dict[str, str]:
        return callers

    async def module(name: str) -> str | None:
        found = next((root / f for f in module_files(name) if (root / f).is_file()), None)
        return found.read_text(errors="replace") if found is not None else None

    async def config(model_path: str) -> Mapping[str, Any] | None:
        path = Path(model_path) / "config.json"
        found = config_of(path.read_bytes()) if path.is_file() else None
        return ModelFiles(model_path, found).text if found is not None else None

    text = source.read_text(errors="replace")
    explained = asyncio.run(explain_for_unit(text, tb, catalog, read_callers(), given, module, config))
    return explained, given or {}


async def _explain_remote(
    tb: Traceback, args: argparse.Namespace, argv: list[str] | None
) -> tuple[Explanation, dict[str, str | None]]:
    from cockpit.cli.target import open_target
    from cockpit.remote.source import PACKAGE_DIRS
    from cockpit.sglang.catalog.catalogs import package_root_of

    frame = tb.failing_frame
    assert frame is not None and frame.line is not None
    async with open_target(args, unit=False) as session:
        host = session.host_named(args.host)
        # A traceback can name any file: only one inside a site-packages or dist-packages
        # directory (where SGLang lives) is read.
        source = await session.sources.get(host, frame.file, roots=PACKAGE_DIRS)
        root = package_root_of(frame.file)
        catalog = await session.catalogs.get(host, root) if root else None
        given = _given(argv, catalog)
        explained = await session.explain_failure(host, tb, source.text, catalog, PACKAGE_DIRS, given)
    return explained, given or {}


def run(args: argparse.Namespace) -> int:
    import asyncio

    try:
        tb = pick_traceback(args.file, args.index)
        frame = tb.failing_frame
        if frame is None or frame.line is None:
            raise UsageError(f"{args.file}: the traceback's last frame names no line")
        try:
            argv = shlex.split(args.flags) if args.flags is not None else None
        except ValueError as e:
            raise UsageError(f"--flags: {e}") from None
        if args.source_root:
            result, given = _explain_local(tb, Path(args.source_root), argv)
        else:
            result, given = asyncio.run(_explain_remote(tb, args, argv))
    except OSError as e:
        print(f"cockpit: cannot read {args.file}: {e.strerror or e}.", file=sys.stderr)
        return 2
    except (CockpitError, SyntaxError, ValueError) as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    out = result.to_json()
    if argv is not None:
        out["sentence"] = result.sentence(given)
    out["exception"] = tb.exception
    print(json.dumps(out))
    return 0
