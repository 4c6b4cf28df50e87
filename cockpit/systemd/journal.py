"""Following a unit's journal over a Host, with the lessons of docs/facts.md built in.

- The backlog is read first with a plain `journalctl -n N`, then the follow starts at
  `--cursor=<last cursor>`, that entry dropped (or `-n all` when the unit has no entry yet):
  `-f` started before a unit logs can lose its first lines.
- A finished read is `-o json --all` (fields over 4096 bytes would otherwise come back as
  null); the follow is `-o export` (cockpit.systemd.export: it costs the host's journalctl
  less than half the CPU a json line does, and prints every field whole).
- Only the fields the cockpit reads are asked for (`--output-fields`), which keeps the
  stream small and the parse cheap; its output is buffered in 256 KiB blocks (`BUFFERED`).
- A dropped connection, or any other failure, is resumed the same way: no gap and no
  duplicate, across a reboot of the host too.
- The UI keeps a bounded window; older entries are paged on demand by cursor.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.systemd.entry import Entries, JournalEntry, parse_json_block
from cockpit.systemd.export import parse_export

OUTPUT_FIELDS = (
    "MESSAGE,_PID,PRIORITY,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,_SYSTEMD_UNIT,UNIT,SYSLOG_IDENTIFIER,"
    "OBJECT_SYSTEMD_UNIT,OBJECT_SYSTEMD_INVOCATION_ID"
)
# How a finished read prints entries: JSON, long fields whole, only the fields the cockpit reads.
OUTPUT = ("-o", "json", "--all", f"--output-fields={OUTPUT_FIELDS}", "--no-pager")
# How the follow prints them: the same fields in journald's export format (see the docstring).
FOLLOW_OUTPUT = ("-o", "export", f"--output-fields={OUTPUT_FIELDS}", "--no-pager")
RETRY = (0.5, 1.0, 2.0, 4.0)
# A flood's reads came 170 a second of about 150 lines each, and every batch costs its
# subscribers the same again whatever its size (the view's size, scroll and title, the lag's
# timer, the throughput pane): a batch at most every GAP_S, the reads meanwhile joined to it.
# A line after a quiet spell is delivered at once; the screen draws at most 60 times a second.
GAP_S = 0.02


# journalctl writes to a pipe in 4 KiB stdio blocks, and sshd sends each as its own packet: the
# client then paid its SSH costs per 4 KiB. Under `stdbuf -o 256K` the reads averaged 110 KiB and
# the follower's CPU per entry fell by three quarters (issue 14's transport benchmark). journalctl
# still flushes before it waits for more, so a quiet journal's lines are not held back. A host
# without coreutils' stdbuf runs journalctl as it is.
BUFFERED = 'if command -v stdbuf >/dev/null 2>&1; then exec stdbuf -o 256K "$@"; fi; exec "$@"'


def journalctl_argv(unit: str, *extra: str, output: tuple[str, ...] = OUTPUT) -> list[str]:
    """journalctl's own argv for the unit's entries (`journal_argv` runs it buffered)."""
    return ["journalctl", "-u", unit, *output, *extra]


def journal_argv(unit: str, *extra: str) -> list[str]:
    return ["sh", "-c", BUFFERED, "sh", *journalctl_argv(unit, *extra)]


def follow_argv(unit: str, *extra: str) -> list[str]:
    """The follow's command: `journal_argv`'s, in the export format, following."""
    return ["sh", "-c", BUFFERED, "sh", *journalctl_argv(unit, *extra, "--follow", output=FOLLOW_OUTPUT)]


async def query(host: Host, argv: list[str], timeout: float = 60) -> Entries:
    """The entries a finished `journalctl` run printed."""
    result = await host.run(argv, timeout=timeout)
    if result.returncode != 0 and not result.stdout:
        raise CockpitError(f"journalctl on {host.name} failed: {result.error_text or result.returncode}")
    return parse_json_block(result.stdout)


async def tail(host: Host, unit: str, n: int) -> Entries:
    """The last `n` entries of the unit, oldest first."""
    return await query(host, journal_argv(unit, "-n", str(n)))


async def older(host: Host, unit: str, cursor: str, n: int) -> list[JournalEntry]:
    """Up to `n` entries just before `cursor`, oldest first (paging back through history)."""
    entries = await query(host, journal_argv(unit, f"--cursor={cursor}", "--reverse", "-n", str(n + 1)))
    return [e for e in reversed(entries) if e.cursor != cursor]


async def after(host: Host, unit: str, cursor: str) -> list[JournalEntry]:
    """Every entry after `cursor` (a comparison against the follower, or a catch-up)."""
    return await query(host, journal_argv(unit, f"--after-cursor={cursor}"))


async def matching(host: Host, unit: str, pattern: str, n: int, timeout: float) -> list[JournalEntry] | None:
    """The last `n` entries of `unit`, of every start and systemd's own about it, whose message
    matches `pattern` (journalctl's own --grep, PCRE2, so only those cross the link), oldest
    first; None where the host's journalctl cannot match patterns or does not answer in
    `timeout` s. Each entry names its start: the caller keeps the ones it wants."""
    try:
        result = await host.run(journalctl_argv(unit, "--grep", pattern, "-n", str(n)), timeout=timeout)
    except (HostError, TimeoutError):
        return None
    if result.returncode not in (0, 1):  # 1: nothing matched
        return None
    # systemd 252's journalctl prints --grep's last -n entries newest first (docs/facts.md).
    return sorted(parse_json_block(result.stdout), key=lambda e: e.realtime_us or 0)


OnBatch = Callable[[list[JournalEntry]], "Awaitable[None] | None"]
OnState = Callable[[str, "str | None"], None]
OnSkipped = Callable[[int], None]


class JournalFollower:
    """Delivers a unit's journal in batches until cancelled; survives dropped connections."""

    def __init__(
        self,
        host: Host,
        unit: str,
        *,
        backlog: int = 1000,
        after_cursor: str | None = None,
        on_state: OnState | None = None,
        on_skipped: OnSkipped | None = None,
        max_pending: int = 8 << 20,
        gap_s: float = GAP_S,
    ) -> None:
        """`on_skipped(n)`: n more things the host's journalctl printed were no journal entries
        (cockpit.systemd.entry.Entries: a json line, an export entry); they are passed over,
        never a reason to reconnect.
        `max_pending`: bytes read and not yet delivered at which reading waits for the consumer;
        `gap_s`: the least time between two batches of a stream that keeps coming."""
        self.host = host
        self.unit = unit
        self.backlog = backlog
        self.cursor = after_cursor
        self.on_state = on_state
        self.on_skipped = on_skipped
        self.max_pending = max_pending
        self.gap_s = gap_s
        self.delivered = 0

    def _state(self, state: str, detail: str | None = None) -> None:
        if self.on_state:
            self.on_state(state, detail)

    async def _deliver(self, on_batch: OnBatch, entries: list[JournalEntry], skipped: int) -> None:
        if skipped and self.on_skipped:
            self.on_skipped(skipped)
        if not entries:
            return
        self.cursor = entries[-1].cursor or self.cursor
        self.delivered += len(entries)
        out = on_batch(entries)
        if inspect.isawaitable(out):
            await out

    async def run(self, on_batch: OnBatch) -> None:
        """Follow forever; cancel the task to stop (the remote journalctl ends with it).

        Whatever goes wrong (a reset connection, a host that froze, journalctl ending, a
        consumer that raised) leads to the same thing: wait, then resume after the last cursor
        delivered. The wait grows with failures in a row and starts over once a follow has
        delivered entries again."""
        failures = 0
        while True:
            delivered = self.delivered
            try:
                if self.cursor is None and self.backlog:
                    backlog = await tail(self.host, self.unit, self.backlog)
                    await self._deliver(on_batch, backlog, backlog.skipped)
                # `--cursor`, not `--after-cursor`: when the cursor's entry is gone (the host
                # rebooted with a volatile journal) journalctl seeks to the nearest entry, and
                # `--after-cursor` would skip that one, which was never delivered.
                start = [f"--cursor={self.cursor}"] if self.cursor else ["-n", "all"]
                await self._follow(follow_argv(self.unit, *start), on_batch, skip=self.cursor)
                detail = "journalctl ended"
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - every failure is a reason to reconnect, none to stop
                detail = str(e) or type(e).__name__
            if self.delivered > delivered:
                failures = 0
            failures += 1
            self._state("reconnecting", detail)
            await asyncio.sleep(RETRY[min(failures, len(RETRY)) - 1])

    async def _follow(self, argv: list[str], on_batch: OnBatch, skip: str | None = None) -> None:
        """Deliver what `argv` prints; its first entry is dropped when it is `skip` (the last
        one delivered before)."""
        async with self.host.stream(argv) as lines:
            self._state("following")
            pending: list[bytes] = []  # blocks of complete lines (LineStream.blocks)
            size = 0
            ready = asyncio.Event()
            drained = asyncio.Event()
            done = asyncio.Event()

            async def read() -> None:
                nonlocal size
                try:
                    async for block in lines.blocks():
                        pending.append(block)
                        size += len(block)
                        ready.set()
                        if size >= self.max_pending:  # back-pressure: wait for the consumer
                            drained.clear()
                            await drained.wait()
                finally:
                    done.set()
                    ready.set()

            reader = asyncio.create_task(read())
            rest = b""  # an entry still arriving
            try:
                delivered_at = -math.inf
                while True:
                    await ready.wait()
                    if (wait := delivered_at + self.gap_s - time.monotonic()) > 0 and not done.is_set():
                        await asyncio.sleep(wait)  # the reads meanwhile join this batch
                    ready.clear()
                    delivered_at = time.monotonic()
                    blocks, pending[:], size = pending[:], [], 0
                    drained.set()
                    entries = Entries()
                    if blocks:
                        buffer = rest + b"".join(blocks)
                        entries, taken = parse_export(buffer)
                        rest = buffer[taken:]
                    if done.is_set() and not pending and rest.strip():
                        entries.skipped += 1  # the stream ended within an entry: a cut one
                    if skip is not None and entries:
                        if entries[0].cursor == skip:
                            del entries[0]
                        skip = None
                    await self._deliver(on_batch, entries, entries.skipped)
                    if done.is_set() and not pending:
                        break
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
