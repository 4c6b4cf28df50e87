"""One attempt, start to finish: pre-flight, write, reload, restart, watch, record.

The flag editor and the rollback key both end here, so every change to a unit is checked the
same way and lands in the attempt log with its outcome. So does a restart with nothing written
(the app's `r`): its outcome is the new start's, and the start it stopped is said as stopped,
not crashed, however badly it died of the stop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from cockpit.attempts import Attempt, AttemptLog
from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.preflight.preflight import Finding, check_static, given_flags
from cockpit.sglang.preflight.unit_preflight import check_unit
from cockpit.sglang.server.health import HealthScan, ending_cause
from cockpit.sglang.server.logparse import READY_TEXT
from cockpit.systemd.deploy import UnitFeed, restart_and_watch, write_files
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.unit import Unit
from cockpit.systemd.unit_syntax import parse_unit_file
from cockpit.targets import Target
from cockpit.traceback.fold import fold_entries, last_with_frames

RESTART_NOTE = "restart"  # an attempt that wrote nothing: the unit restarted as it is


def preflight(unit: Unit, catalog: Catalog | None) -> list[Finding]:
    """The static checks of the command line, then the unit's own settings; a unit whose
    release is unknown runs no SGLang the cockpit can say anything of."""
    return [*check_static(unit.exec(), catalog), *check_unit(unit)] if catalog is not None else []


def flags_of(unit: Unit, catalog: Catalog | None) -> dict[str, str | list[str] | None]:
    if catalog is not None:
        given: dict[str, str | list[str] | None] = {**given_flags(unit.exec(), catalog)}
        return given
    return {i.name: i.json_value for i in unit.flags() if i.name is not None}


def with_files(unit: Unit, texts: dict[str, str]) -> Unit:
    """`unit` with some of its files replaced by `texts` as an edit (rolling back to the texts an
    earlier attempt found): `changed()` then names exactly those files."""
    files = tuple(parse_unit_file(f.path, texts[f.path]) if f.path in texts else f for f in unit.files)
    return replace(unit, files=files)


async def apply(
    host: Host,
    cfg: HostConfig,
    target: Target,
    loaded: Unit,
    edited: Unit,
    *,
    catalog: Catalog | None,
    log: AttemptLog,
    note: str = "",
    timeout: float = 900.0,
    on_entries: Callable[[list[JournalEntry]], None] | None = None,
    feed: UnitFeed | None = None,
    address: tuple[str, int] | None = None,
) -> Attempt:
    """Write `edited` over `loaded` (refused when the host's files changed meanwhile, or when the
    host is read-only here), restart, watch, and record the attempt whatever happens."""
    changed = edited.changed()
    previous = {p: loaded.texts[p] for p in changed}
    attempt = log.new(
        flags_before=flags_of(loaded, catalog),
        flags_after=flags_of(edited, catalog),
        texts=changed,
        previous_texts=previous,
        findings=[f.to_json() for f in preflight(edited, catalog)],
        note=note,
    )

    async def write() -> None:
        attempt.backups = await write_files(host, cfg, target.unit, changed, previous)

    return await _watched(host, cfg, target, attempt, log, write, timeout, on_entries, feed, address)


async def restart(
    host: Host,
    cfg: HostConfig,
    target: Target,
    unit: Unit | None,
    *,
    catalog: Catalog | None,
    log: AttemptLog,
    timeout: float = 900.0,
    on_entries: Callable[[list[JournalEntry]], None] | None = None,
    feed: UnitFeed | None = None,
    address: tuple[str, int] | None = None,
) -> Attempt:
    """Restart the unit as it is and watch the next start, recorded as an attempt that wrote
    nothing (`unit`: as loaded, for the flags it runs with; None where it could not be read)."""
    host.refuse_changes("nothing was restarted")  # before the attempt is recorded: none was made
    flags = flags_of(unit, catalog) if unit is not None else {}
    attempt = log.new(flags_before=flags, flags_after=flags, texts={}, previous_texts={}, note=RESTART_NOTE)
    return await _watched(host, cfg, target, attempt, log, None, timeout, on_entries, feed, address)


async def _watched(
    host: Host,
    cfg: HostConfig,
    target: Target,
    attempt: Attempt,
    log: AttemptLog,
    write: Callable[[], Awaitable[None]] | None,
    timeout: float,
    on_entries: Callable[[list[JournalEntry]], None] | None,
    feed: UnitFeed | None,
    address: tuple[str, int] | None,
) -> Attempt:
    """`write` (None: nothing to write, and no daemon-reload), restart, watch the next start,
    and record the attempt whatever happens."""
    started = time.monotonic()
    try:
        if write is not None:
            await write()
        watch = await restart_and_watch(
            host,
            cfg,
            target.unit,
            address or target.url_host_port,
            ready_line=lambda entry: READY_TEXT in entry.message,
            feed=feed,
            timeout=timeout,
            on_entries=on_entries,
            reload=write is not None,
        )
    except CockpitError as e:
        attempt.outcome, attempt.detail = "failed", str(e)
        attempt.seconds = time.monotonic() - started
        log.save(attempt)
        return attempt
    attempt.outcome, attempt.seconds = watch.outcome, watch.seconds
    before = f"the start before it: {watch.ended}" if watch.ended else ""
    attempt.detail = "; ".join(d for d in (watch.detail, _ended_itself(watch.entries), before) if d)
    if watch.outcome != "ready":
        tb = last_with_frames(fold_entries(watch.entries))  # the new invocation's own lines
        attempt.traceback = tb.to_json() if tb is not None else None
    log.save(attempt)
    return attempt


def _ended_itself(entries: list[JournalEntry]) -> str:
    """What ended the watched start where SGLang ended it itself (`scheduler 0 crashed, exit -9`:
    a child's death prints no traceback at tp 1), else empty."""
    scan = HealthScan()
    scan.feed(entries)
    starts = [e.invocation_id for e in entries if e.invocation_id and e.pid != 1]
    signals = scan.of(starts[-1] if starts else None)
    return ending_cause(signals) if signals.ending_at is not None else ""
