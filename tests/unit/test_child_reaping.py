"""A command cancelled while its child ends must leave the reaping to asyncio's child watcher.

Popen's own `kill()` polls first and can reap the child before the watcher's thread does; the
watcher then logs "Unknown child process pid N, will report returncode 255", which landed on
`cockpit status`'s stderr under its one sentence (a CI failure of test_cli_status_json)."""

from __future__ import annotations

import asyncio
import logging
import random

from cockpit.remote.local import LocalHost


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_cancelled_commands_leave_no_child_to_the_watcher_unknown() -> None:
    said = _Said()
    logger = logging.getLogger("asyncio")
    logger.addHandler(said)

    async def storm() -> int:
        host, rng, cancelled = LocalHost(), random.Random(7), 0
        for _ in range(400):  # with Popen.kill(), 20 to 40 of 400 ended in the race
            task = asyncio.ensure_future(host.run(["true"]))
            await asyncio.sleep(rng.uniform(0, 0.004))
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
        return cancelled

    try:
        cancelled = asyncio.run(storm())
    finally:
        logger.removeHandler(said)
    assert cancelled > 50  # the storm did cancel commands in flight
    assert [m for m in said.messages if "Unknown child process" in m] == []
