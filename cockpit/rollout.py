"""One attempt, start to finish: pre-flight, write, reload, restart, watch, record.

The flag editor and the rollback key both end here, so every change to a unit is checked the
same way and lands in the attempt log with its outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from cockpit.attempts import Attempt, AttemptLog
from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host
from cockpit.sglang.flags import Catalog
from cockpit.sglang.logparse import READY_TEXT
from cockpit.sglang.preflight import Finding, check_static, given_flags
from cockpit.systemd.deploy import UnitFeed, restart_and_watch, write_files
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.unit import Unit
from cockpit.systemd.unit_syntax import parse_unit_file
from cockpit.targets import Target
from cockpit.traceback.fold import fold_entries, last_with_frames


def preflight(unit: Unit, catalog: Catalog | None) -> list[Finding]:
    return check_static(unit.exec(), catalog) if catalog is not None else []


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
    started = time.monotonic()
    try:
        attempt.backups = await write_files(host, cfg, target.unit, changed, previous)
        watch = await restart_and_watch(
            host,
            cfg,
            target.unit,
            address or target.url_host_port,
            ready_line=lambda entry: READY_TEXT in entry.message,
            feed=feed,
            timeout=timeout,
            on_entries=on_entries,
        )
    except CockpitError as e:
        attempt.outcome, attempt.detail = "failed", str(e)
        attempt.seconds = time.monotonic() - started
        log.save(attempt)
        return attempt
    attempt.outcome, attempt.seconds, attempt.detail = watch.outcome, watch.seconds, watch.detail
    if watch.outcome != "ready":
        tb = last_with_frames(fold_entries(watch.entries))  # the new invocation's own lines
        attempt.traceback = tb.to_json() if tb is not None else None
    log.save(attempt)
    return attempt
