"""`cockpit snapshot --host H --unit U [--out DIR] [--since TIME]`: the incident folder, headless.

It opens one session of the unit, reads the note's data through it, then runs the cockpit
itself headless at a fixed terminal size on the same session (one connection), waits for its status and journal,
unfolds the period's last traceback and saves that screen, opens the traceback's failing
frame in the source pane and saves that screen too, and writes the Markdown note beside the
SVG, PNG and text files. The app runs read-only: a snapshot changes nothing on the host.

Importing this module loads no Textual (only `run` does), so the CLI can register the
subcommand without slowing down or changing `cockpit status`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.errors import UsageError

if TYPE_CHECKING:
    from cockpit.config import Config
    from cockpit.incident import Image, Incident
    from cockpit.session import Session
    from cockpit.systemd.status import UnitStatus
    from cockpit.targets import Target
    from cockpit.traceback import Traceback
    from cockpit.ui.app import CockpitApp

DEFAULT_SIZE = (160, 50)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "snapshot",
        help="screenshots (SVG, PNG, text) and the Markdown incident note, without the TUI",
        description="Render the cockpit's screens headless for one unit (the journal at the period's last "
        "traceback, and the source of its failing frame) and write them with the incident note: "
        "host, unit, SGLang version, command line, attempts, every traceback of the period in full, "
        "the failing statement explained, the load-run table. Exit 0 when written, 2 when the host "
        "or unit cannot be read.",
    )
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")
    p.add_argument(
        "--deployment", metavar="NAME", help="a [deployments] entry: a note for every node, in one folder each"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="the folder to write into (default: ~/cockpit-incidents/<host>/<unit>/<YYYYmmdd-HHMMSS>/)",
    )
    p.add_argument(
        "--since",
        metavar="TIME",
        help="the period, in any form journalctl's --since takes (--since=-1h, --since='2026-11-30 10:00'); "
        "default: the unit's current and previous invocation",
    )
    p.add_argument("--load-run", metavar="FILE", help="a `cockpit bench --json` record: the note's load-run table")
    p.add_argument(
        "--size",
        default=f"{DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]}",
        metavar="COLSxROWS",
        help="the terminal size the screens are rendered at (default %(default)s)",
    )
    p.add_argument("--no-source", action="store_true", help="skip the source pane's screen")
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for the app's status and journal (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the folder and the files written as JSON")
    return p


def _size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m or int(m.group(1)) < 40 or int(m.group(2)) < 12:
        raise UsageError(f"--size {text!r}: give COLSxROWS, at least 40x12, such as 160x50")
    return int(m.group(1)), int(m.group(2))


def run(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(snapshot(args))


async def snapshot(args: argparse.Namespace) -> int:
    """The unit's incident note; with --deployment, every node's, one after the other (a note
    per node: each says what its own host saw)."""
    from cockpit.cli.target import targets_of

    cfg, nodes = targets_of(args)
    written = []
    for node, target in nodes:
        out = f"{args.out}/{node}" if args.out and args.deployment else args.out
        said = await _snapshot(args, cfg, target, out)
        written.append({"node": node, **said} if args.deployment else said)
    if args.json:
        print(json.dumps({"nodes": written} if args.deployment else written[0]))
    return 0


async def _snapshot(args: argparse.Namespace, cfg: Config, target: Target, out: str | None) -> dict[str, Any]:
    import asyncio

    from cockpit.cli.target import session_of
    from cockpit.incident import load_run_file, render
    from cockpit.ui.screenshot import NOTE_NAME

    size = _size(args.size)
    load_run = load_run_file(args.load_run) if args.load_run else None
    # Read-only: a snapshot changes nothing on the host. The note's data and the screens come
    # through one session, so through one connection.
    async with session_of(cfg, target, read_only=True) as session:
        incident = await session.gather_incident(args.since, load_run)
        folder = await asyncio.to_thread(_folder, out, target.host, target.unit)
        problems: list[str] = []
        incident.images = await render_screens(
            session, incident, folder, size=size, source=not args.no_source, timeout=args.timeout, problems=problems
        )
    incident.problems += problems
    note = folder / NOTE_NAME
    await asyncio.to_thread(note.write_text, render(incident), encoding="utf-8")
    files = await asyncio.to_thread(lambda: sorted(str(p) for p in folder.iterdir() if p.is_file()))
    if not args.json:
        print(f"incident note written: {note}")
        for image in incident.images:
            print(f"  {image.label}: " + ", ".join(x for x in (image.path, image.svg, image.text) if x))
        for problem in incident.problems:
            print(f"  not included: {problem}", file=sys.stderr)
    return {
        "dir": str(folder),
        "note": str(note),
        "files": files,
        "tracebacks": len(incident.tracebacks),
        "problems": incident.problems,
    }


def _folder(out: str | None, host: str, unit: str) -> Path:
    from cockpit.ui.screenshot import incident_dir

    folder = Path(out).expanduser() if out else incident_dir(host, unit)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def _until(predicate: Callable[[], Any], timeout: float, step: float = 0.1) -> bool:
    import asyncio

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


def _answered(status: UnitStatus | None) -> bool:
    """Whether the status pane's readiness has what a running server's health says: the screen
    is saved once the status poll's first health answer came (it asks beside its first status,
    and a generating /health takes a second), or it would read `starting: health not asked yet`
    for a ready server."""
    return status is not None and (status.active_state != "active" or status.health is not None)


def _pick(app: CockpitApp, wanted: Traceback | None) -> tuple[int, Traceback] | None:
    """The pane's record of the note's last traceback (same first journal entry), or None."""
    tracebacks = app.journal_view.model.tracebacks()  # most recent first
    if wanted is None or not tracebacks:
        return None
    for index, tb in tracebacks:
        if tb.cursor is not None and tb.cursor == wanted.cursor:
            return index, tb
    return None


async def render_screens(
    session: Session,
    incident: Incident,
    folder: Path,
    *,
    size: tuple[int, int] = DEFAULT_SIZE,
    source: bool = True,
    timeout: float = 30.0,
    problems: list[str],
) -> list[Image]:
    """Run the app headless against the unit and save its screens into `folder`."""
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.panes.source import SourcePane, cached_highlight
    from cockpit.ui.panes.tracebacks import TracebackList
    from cockpit.ui.screenshot import save_screen

    images: list[Image] = []
    target = session.target
    assert target is not None
    app = CockpitApp(session.config, session=session)
    async with app.run_test(headless=True, size=size) as pilot:
        view = app.journal_view
        arrived = await _until(lambda: app.status_pane.status is not None and view.model.rows, timeout)
        if not arrived:
            state, detail = app.status_pane.connection
            problems.append(
                f"the cockpit got no status and journal from {target.host} within {timeout:.0f} s"
                + (f" ({state}: {detail})" if detail else "")
                + ": its screen shows what it had"
            )
        elif not await _until(lambda: _answered(app.status_pane.status), timeout):
            problems.append(
                f"the server's health was not answered within {timeout:.0f} s: its screen's readiness is without it"
            )
        wanted = incident.tracebacks[-1] if incident.tracebacks else None
        picked = None
        if wanted is not None and arrived:
            await _until(lambda: _pick(app, wanted) is not None, timeout)
            picked = _pick(app, wanted)
            if picked is None:
                problems.append(
                    "the period's last traceback is older than the journal the cockpit loads: "
                    "its screen shows the journal's end"
                )
        if picked is not None:
            index, tb = picked
            # The side list hears of the tracebacks by a message of its own: drawn after the model has them.
            await _until(lambda: app.query_one(TracebackList).option_count > 0, timeout)
            view.toggle_record(index, True)
            view.jump_to_record(index)
            await pilot.pause()
            row = view.model.row_of(index)  # the unfolded traceback from the top, two lines before it
            view.scroll_to(y=max(0, row - 2), animate=False, immediate=True)
        await pilot.pause()
        images.append(
            await save_screen(
                app,
                folder,
                "journal",
                "The journal"
                + (
                    f" at the last traceback ({picked[1].rank or 'pid ' + str(picked[1].pid)}, {picked[1].exception})"
                    if picked
                    else ""
                ),
                problems,
            )
        )
        if source and picked is not None and picked[1].sites:
            tb = picked[1]
            await _until(lambda: app.session.unit is not None, min(timeout, 15.0))  # the flags, for the explanation
            worker = app.open_frame(tb, len(tb.sites) - 1)
            try:
                await worker.wait()
            except Exception as e:  # a failed worker is reported in the note, not raised
                problems.append(f"the source pane could not open {tb.sites[-1].file}: {e}")
            pane = app.query_one(SourcePane)
            if pane.refused:
                problems.append(
                    f"the failing frame's file {tb.sites[-1].file} is outside the service's Python "
                    "roots: it was not opened, and no source screen was saved"
                )
                return images
            shown = pane.view.shown
            if shown is not None and shown.mtime:
                key = (shown.host, shown.path, shown.mtime)
                await _until(lambda: cached_highlight(key) is not None, 10.0)
            await pilot.pause()
            await pilot.pause()
            frame = tb.sites[-1]
            images.append(
                await save_screen(
                    app, folder, "source", f"The failing frame's source ({frame.file}, line {frame.line})", problems
                )
            )
    return images
