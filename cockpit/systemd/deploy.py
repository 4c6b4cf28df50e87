"""Writing a changed unit and restarting it: the one round-trip the flag editor makes.

Order matters, and every step can stop the round with one sentence and nothing half-done:
the files are re-read and compared with what was loaded (someone may have edited them on the
host meanwhile); the new text is checked by `systemd-analyze verify` where the host has it;
each file is backed up from what is on disk, then replaced through the one write contract
(cockpit.remote.replace: a temp file beside it, read back, re-checked, renamed; as root over
SFTP, with `sudo = true` through `sudo -n install` and `sudo -n mv`); then daemon-reload,
restart, and a watch until the ready line and a 200 from /health, or the crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.remote.replace import FileChanged, replace_file
from cockpit.remote.sudo import privileged
from cockpit.systemd import journal
from cockpit.systemd.control import ControlError, UnitControl
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.readiness import is_ready
from cockpit.systemd.status import UnitStatus, exit_words, fetch, main_exit_of, stop_job_began
from cockpit.systemd.unit import decode, encode

BACKUPS_KEPT = 10
BACKUP_TAG = ".cockpit-bak."
RESTART = "the cockpit's restart"  # who stopped the start a restart replaced (status.exit_words)


class ChangedOnHost(CockpitError):
    pass


@dataclass
class Watch:
    """How a restart ended."""

    outcome: str  # "ready", "crashed", "timeout"
    seconds: float
    entries: list[JournalEntry] = field(default_factory=list)  # the journal of the new invocation
    detail: str = ""
    ended: str | None = None  # how the restart's stop ended the start before (status.exit_words)


def backup_name(path: str, stamp: float | None = None) -> str:
    """`PATH.cockpit-bak.20261201T080412.123456-3f9a01c2`: microseconds and a random tail, so two
    writes in one second never share a name, and names sort by time."""
    when = stamp if stamp is not None else time.time()
    micros = int(round((when % 1) * 1e6)) % 1_000_000
    return f"{path}{BACKUP_TAG}{time.strftime('%Y%m%dT%H%M%S', time.gmtime(when))}.{micros:06d}-{secrets.token_hex(4)}"


async def _verify(host: Host, unit_name: str, texts: dict[str, str]) -> None:
    """`systemd-analyze verify` on a copy of the new unit file, before it replaces the old one."""
    fragment = next((t for p, t in texts.items() if posixpath.basename(p) == unit_name), None)
    if fragment is None:
        return  # only drop-ins changed: verified with the unit after the reload
    work = f"/tmp/cockpit-verify-{secrets.token_hex(4)}"
    try:
        made = await host.run(["mkdir", "-m", "0700", work])
        if not made.ok:
            return
        await replace_file(host, f"{work}/{unit_name}", encode(fragment))
        result = await host.run(["systemd-analyze", "verify", f"{work}/{unit_name}"], timeout=60)
        if result.returncode == 127:
            return  # the host has no systemd-analyze
        problems = [
            line
            for line in (result.error_text + "\n" + result.text).splitlines()
            if line.strip() and unit_name in line and "Unit configuration has fatal error" not in line
        ]
        if not result.ok and problems:
            raise ControlError(f"systemd-analyze verify refuses the new {unit_name}: {problems[0].strip()}")
    finally:
        await host.run(["rm", "-rf", work], timeout=10)


async def write_files(
    host: Host,
    cfg: HostConfig,
    unit_name: str,
    new: dict[str, str],
    loaded: dict[str, str],
    *,
    before_rename: Callable[[], Awaitable[None]] | None = None,
) -> list[str]:
    """Replace each changed file (cockpit.remote.replace), refused when the host's copy is not
    the text the edit started from; returns where the texts on disk were backed up.

    The backup is made from the bytes read at write time, and the file is compared with those
    bytes once more right before its rename, under the file's lock: another cockpit's edit is
    refused, and one made by hand in the last instant is at least in no way lost silently (the
    modal says this check is best-effort). Once a file is renamed, nothing after it (pruning old
    backups) can make its write a failed one."""
    host.refuse_changes("nothing was written")
    on_disk: dict[str, bytes] = {}
    for path in new:
        try:
            on_disk[path] = await host.read_file(path)
        except HostError as e:
            raise ChangedOnHost(f"cannot re-read {path} on {host.name}: {e}") from None
        if decode(on_disk[path]) != loaded.get(path):
            raise ChangedOnHost(
                f"{path} changed on {host.name} since it was loaded: reload it and make "
                "your change again (nothing was written)"
            )
    await _verify(host, unit_name, new)
    backups = []
    stamp = time.time()
    for path, text in new.items():
        backup = backup_name(path, stamp)
        try:
            await replace_file(host, backup, on_disk[path], sudo=cfg.sudo)  # a name no other write has
            await replace_file(
                host, path, encode(text), sudo=cfg.sudo, expect=on_disk[path], before_rename=before_rename
            )
        except FileChanged as e:
            raise ChangedOnHost(str(e)) from None
        except HostError as e:
            raise ControlError(str(e)) from None
        backups.append(backup)
        await _prune(host, cfg, path, backup)
    return backups


async def _prune(host: Host, cfg: HostConfig, path: str, keep: str) -> None:
    """Keep the last BACKUPS_KEPT backups of `path`, `keep` (this write's) always among them, the
    others newest first by the host's own mtimes: their names carry the clock of whichever jump
    box wrote them, and one running ahead made the backup just written the first to go. Best
    effort: the write is done, and the next one prunes again."""
    directory, name = posixpath.split(path)
    with contextlib.suppress(HostError, ValueError):
        backups = ["-type", "f", "-name", f"{name}{BACKUP_TAG}*"]
        listed = await host.run(["find", directory, "-maxdepth", "1", *backups, "-printf", "%T@ %p\\0"], timeout=30)
        found = [record.split(" ", 1) for record in listed.text.split("\0") if " " in record]
        others = sorted(((float(mtime), p) for mtime, p in found if p != keep), reverse=True)
        old = [p for _, p in others[BACKUPS_KEPT - 1 :]]
        if listed.ok and old:
            await host.run(privileged(cfg.sudo, ["rm", "-f", "--", *old]), timeout=30)


class UnitFeed(Protocol):
    """Where a restart watch hears the unit: the session's one journal feed and status poll, so
    a restart opens no second follow and no second poll beside them."""

    def subscribe(self, on_entries: Callable[[list[JournalEntry]], None]) -> Callable[[], None]:
        """Call `on_entries` with each batch from now on; returns the unsubscribe."""
        ...

    async def next_status(self) -> UnitStatus:
        """The next status the poll reads."""
        ...


class OwnFeed:
    """A UnitFeed of its own, for a caller that has no session: a follower from the journal's
    current end and a status read every half second."""

    def __init__(self, host: Host, unit: str) -> None:
        self.host, self.unit = host, unit
        self._task: asyncio.Task[None] | None = None
        self._subscribers: list[Callable[[list[JournalEntry]], None]] = []

    async def start(self) -> None:
        last = await journal.tail(self.host, self.unit, 1)
        follower = journal.JournalFollower(
            self.host, self.unit, backlog=0, after_cursor=last[-1].cursor if last else None
        )
        self._task = asyncio.create_task(follower.run(self._deliver))

    def _deliver(self, batch: list[JournalEntry]) -> None:
        for subscriber in list(self._subscribers):
            subscriber(batch)

    def subscribe(self, on_entries: Callable[[list[JournalEntry]], None]) -> Callable[[], None]:
        self._subscribers.append(on_entries)
        return lambda: self._subscribers.remove(on_entries)

    async def next_status(self) -> UnitStatus:
        await asyncio.sleep(0.5)
        return await fetch(self.host, self.unit)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def restart_and_watch(
    host: Host,
    cfg: HostConfig,
    unit: str,
    url_host_port: tuple[str, int],
    *,
    ready_line: Callable[[JournalEntry], bool],
    feed: UnitFeed | None = None,
    timeout: float = 900.0,
    on_entries: Callable[[list[JournalEntry]], None] | None = None,
    reload: bool = True,
) -> Watch:
    """daemon-reload (unless `reload` is False: nothing was written), restart, then watch the
    new invocation until it is ready or dies: ready is the server's own ready line
    (`ready_line`, which the caller knows; systemd does not) and then a 200 from /health.

    Only the next start is watched. The start the restart stops may die badly of it (SGLang
    under KillMode=control-group ends `failed`, 9/KILL, as in a crash: docs/facts.md); its lines
    and its end are the restart's, said in `ended`, never the watched start's crash."""
    control = UnitControl(host, cfg)
    if reload:
        await control.daemon_reload()
    before = await fetch(host, unit)
    own: OwnFeed | None = None
    source: UnitFeed
    if feed is None:
        source = own = OwnFeed(host, unit)
        await own.start()
    else:
        source = feed
    entries: list[JournalEntry] = []
    stopped: list[JournalEntry] = []  # systemd's lines about the start the restart stops
    seen_ready = False

    def collect(batch: list[JournalEntry]) -> None:
        nonlocal seen_ready
        new = []
        for e in batch:
            if before.invocation_id is None or e.invocation_id != before.invocation_id:
                new.append(e)
            elif e.pid == 1:
                stopped.append(e)
        entries.extend(new)
        seen_ready = seen_ready or any(ready_line(e) for e in new)
        if on_entries is not None:
            on_entries(batch)

    def ended() -> str | None:
        how = next((h for e in stopped if (h := main_exit_of(e.message)) is not None), None)
        return exit_words(how, RESTART) if any(stop_job_began(e.pid, e.message) for e in stopped) else how

    unsubscribe = source.subscribe(collect)
    started = time.monotonic()
    try:
        await control.act("restart", unit)
        while time.monotonic() - started < timeout:
            status = await source.next_status()
            new_invocation = status.invocation_id != before.invocation_id
            died = status.active_state in ("failed", "inactive") or status.sub_state == "auto-restart"
            if new_invocation and (died or (status.n_restarts > before.n_restarts and not seen_ready)):
                await asyncio.sleep(1.0)  # journald may still be reading the last lines
                return Watch(
                    "crashed",
                    time.monotonic() - started,
                    list(entries),
                    f"{status.active_state} ({status.last_exit or status.result})",
                    ended(),
                )
            if seen_ready and status.active_state == "active" and await is_ready(host, *url_host_port):
                return Watch("ready", time.monotonic() - started, list(entries), ended=ended())
        return Watch("timeout", time.monotonic() - started, list(entries), f"not ready after {timeout:.0f} s", ended())
    finally:
        unsubscribe()
        if own is not None:
            await own.stop()
