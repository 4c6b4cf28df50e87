"""What the incident note needs, read over a Host: the unit's status, its command line, the
SGLang version, the journal of the period (`--since TIME`, or by default the unit's current and
previous invocation), the tracebacks folded from it, the attempts recorded on this jump box in
that period, and the failing statement's source and explanation. What cannot be read becomes
one sentence in `Incident.problems`, not an error.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cockpit.attempts import AttemptLog, flags_in_effect
from cockpit.errors import CockpitError
from cockpit.incident.model import Incident, SourceExcerpt, attempts_in, unit_events
from cockpit.remote.base import Host, HostError
from cockpit.remote.source import SourceCache, SourceRoots, staleness
from cockpit.sglang.catalog.catalogs import CatalogCache, package_root_of, remote_version
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.deployments.deployment import read_deployment
from cockpit.sglang.explain.explain import explain_traceback
from cockpit.sglang.preflight.preflight import given_flags
from cockpit.sglang.server.startup import StartupMemory, StartupScan
from cockpit.systemd import gpu_use, journal
from cockpit.systemd.endings import Endings
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.process_facts import Viewpoint
from cockpit.systemd.readiness import server_info
from cockpit.systemd.status import fetch
from cockpit.systemd.suppression import SuppressionScan
from cockpit.targets import Target
from cockpit.textlines import source_lines
from cockpit.traceback import Traceback, fold_entries, last_with_frames

CONTEXT_LINES = 4  # source lines shown before and after the failing statement
FIRST_PAGE = 2000  # journal entries read first when looking for the previous invocation
MAX_ENTRIES = 500_000  # the most journal entries one note reads


def tracebacks_in(entries: Iterable[JournalEntry]) -> list[Traceback]:
    """The tracebacks of some journal entries, in the order they began."""
    return [r for r in fold_entries(entries) if isinstance(r, Traceback)]


async def period_entries(
    host: Host, unit: str, since: str | None = None, *, invocations: int = 2, max_entries: int = MAX_ENTRIES
) -> tuple[list[JournalEntry], bool]:
    """The unit's journal for the period, oldest first, and whether it was cut at `max_entries`.

    With `since` (any time journalctl understands), everything from then on. Without it, the
    entries of the unit's last `invocations` invocations: pages are read backwards by cursor
    until an entry of an earlier invocation shows, and everything after that entry is kept."""
    if since is not None:
        entries: list[JournalEntry] = await journal.query(
            host, journal.journal_argv(unit, f"--since={since}"), timeout=120
        )
        cut = len(entries) > max_entries
        return (entries[-max_entries:] if cut else entries), cut
    entries = await journal.tail(host, unit, FIRST_PAGE)
    page = FIRST_PAGE
    while True:
        seen: list[str] = []
        for k in range(len(entries) - 1, -1, -1):
            inv = entries[k].invocation_id
            if inv is not None and inv not in seen:
                if len(seen) == invocations:
                    return entries[k + 1 :], False
                seen.append(inv)
        if len(entries) >= max_entries or not entries or entries[0].cursor is None:
            return entries, len(entries) >= max_entries
        page = min(page * 4, max_entries - len(entries))
        earlier = await journal.older(host, unit, entries[0].cursor, page)
        if not earlier:
            return entries, False
        entries = earlier + entries


def excerpt_of(
    text: str, host: str, tb: Traceback, *, catalog: Catalog | None = None, values: dict[str, str | None] | None = None
) -> SourceExcerpt:
    """The failing frame's statement in `text` (the file's source), a few lines around it, and
    what it checks; raises CockpitError when the traceback's line is not in the text."""
    frame = tb.failing_frame
    if frame is None or frame.line is None:
        raise CockpitError("the last traceback names no source line")
    lines = source_lines(text)
    if not 1 <= frame.line <= len(lines):
        raise CockpitError(
            f"{frame.file} on {host} has {len(lines)} lines, not line {frame.line}: the file changed since the crash"
        )
    start = end = frame.line
    try:
        explained = explain_traceback(text, tb, catalog)
        start, end = explained.start_line, explained.end_line
        sentence = explained.sentence(values)
    except (SyntaxError, ValueError) as e:
        sentence = f"Could not read the statement: {e}"
    first = max(1, min(start, frame.line) - CONTEXT_LINES)
    last = min(len(lines), max(end, frame.line) + CONTEXT_LINES)
    return SourceExcerpt(
        host, frame.file, frame.line, frame.function, start, end, first, lines[first - 1 : last], sentence
    )


async def excerpt(
    host: Host,
    tb: Traceback,
    *,
    sources: SourceCache,
    catalog: Catalog | None,
    values: dict[str, str | None] | None,
    roots: SourceRoots,
) -> SourceExcerpt:
    """`excerpt_of` the file as the host has it, with a warning when it changed after the crash.
    Only a file under the service's Python roots is read: the note never quotes another."""
    frame = tb.failing_frame
    if frame is None or frame.line is None:
        raise CockpitError("the last traceback names no source line")
    source = await sources.get(host, frame.file, roots=roots)
    found = excerpt_of(source.text, host.name, tb, catalog=catalog, values=values)
    crashed = tb.times[0] / 1e6 if tb.times and tb.times[0] else None
    found.warning = staleness(source, crashed)
    return found


async def gather(
    host: Host,
    target: Target,
    *,
    since: str | None = None,
    load_run: dict[str, Any] | None = None,
    attempt_log: AttemptLog | None = None,
    sources: SourceCache | None = None,
    catalogs: CatalogCache | None = None,
    period: str | None = None,
) -> Incident:
    """Everything the note needs, read over `host`. The status and the journal must be read
    (a CockpitError otherwise); anything else that fails is named in `problems`. `period`: how
    the note words `since` where the caller chose it (the app: the incident on its screen)."""
    unit = target.unit
    incident = Incident(
        host=host.name,
        unit=unit,
        load_run=load_run,
        period=period or (f"since {since}" if since else "the unit's current and previous invocation"),
    )
    sources = sources or SourceCache()
    catalogs = catalogs or CatalogCache()
    status = await fetch(host, unit)
    incident.status = status
    entries, cut = await period_entries(host, unit, since)
    if period is not None:  # the caller's period, but never less than the default's two starts
        default, default_cut = await period_entries(host, unit)
        first = [e.realtime_us for e in (entries[:1] + default[:1]) if e.realtime_us]
        if default and (not entries or (len(first) == 2 and first[1] < first[0])):
            entries, cut = default, default_cut
            incident.period = "the unit's current and previous invocation, which hold " + period.removeprefix("the ")
    incident.status = Endings().feed(entries).of(status)  # a stop said as a stop, not a crash
    incident.entries = len(entries)
    times = [e.realtime_us for e in entries if e.realtime_us]
    incident.period_start = times[0] / 1e6 if times else None
    incident.period_end = times[-1] / 1e6 if times else None
    if cut:
        incident.problems.append(
            f"the period holds more than {MAX_ENTRIES} journal entries: only the last "
            f"{MAX_ENTRIES} were read, so earlier tracebacks are missing"
        )
    incident.tracebacks = tracebacks_in(entries)
    incident.events = unit_events(entries)
    incident.suppressions = SuppressionScan(unit).feed(entries)
    startups = StartupScan()
    startups.feed(entries)
    startups.unit_started(status.invocation_id, status.exec_main_start)
    incident.startups = startups.paired(StartupMemory(host.name, unit))
    use = await gpu_use.read_or_say(host)
    running = status.running_invocation
    seen = frozenset({e.invocation_id for e in entries if e.invocation_id} - {running})
    incident.gpus = gpu_use.summary_lines(use, Viewpoint(unit, running, seen)) if use.gpus else []

    found = await read_deployment(host, target, catalogs=catalogs, status=status)
    incident.problems += found.problems
    incident.command = found.command or None
    catalog, root, roots = found.catalog, found.package_root, found.roots

    info = await server_info(host, *found.address)  # the unit's own --host/--port, unless the config says
    if info and info.get("version"):
        incident.version, incident.version_from = str(info["version"]), "/server_info"
    elif catalog is not None and catalog.version:
        incident.version, incident.version_from = catalog.version, f"the package installed under {root}"
    elif root and catalog is None:  # a catalog's own version came from the same lookup
        try:
            incident.version = await remote_version(host, root)
            incident.version_from = f"the package installed under {root}" if incident.version else None
        except HostError:
            pass
    if info and info.get("standin"):
        incident.standin = str(info["standin"])

    log = attempt_log or AttemptLog(host.name, unit)
    incident.attempts = attempts_in(log.load(), incident.period_start)

    last = last_with_frames(incident.tracebacks)
    if last is not None:
        frame_catalog = catalog
        frame_root = package_root_of(last.failing_frame.file) if last.failing_frame else None
        if frame_root and frame_root != root:
            with contextlib.suppress(CockpitError):
                frame_catalog = await catalogs.get(host, frame_root)
        values = given_flags(incident.command, frame_catalog) if incident.command and frame_catalog else None
        values_from = "the unit's current command line"
        crashed = last.times[0] / 1e6 if last.times and last.times[0] else None
        recorded = flags_in_effect(log.load(), crashed) if crashed is not None else None
        if recorded is not None:  # the invocation that printed it ran with these, not the unit's flags now
            values, attempt = recorded
            values_from = f"the flags it ran with (attempt #{attempt.number}'s record)"
        try:
            incident.source = await excerpt(
                host, last, sources=sources, catalog=frame_catalog, values=values, roots=roots
            )
            incident.source.values_from = values_from
        except CockpitError as e:
            incident.problems.append(f"the failing statement's source: {e}")
    return incident


def load_run_file(path: str | Path) -> dict[str, Any]:
    """A `cockpit bench --json` record; a CockpitError names what is wrong with the file."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise CockpitError(f"cannot read the load run {path}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CockpitError(f"the load run {path} is not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("levels"), list):
        raise CockpitError(f'the load run {path} has no "levels" list (write it with `cockpit bench --json`)')
    return data
