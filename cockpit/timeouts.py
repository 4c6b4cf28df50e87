"""`within(work, seconds)`: asyncio.wait_for without the cancel it can lose.

Python 3.11's wait_for runs the work as a task of its own; when that task ends in the same
loop step as the caller is cancelled, wait_for returns the result and the cancel is gone. A
journal follower told to stop while its backlog query finished went on to follow, its
`journalctl --follow` left running on the host and the quit waiting for it (seen once in CI).
`asyncio.timeout` (3.11 and later) runs the work in the caller's own task, so a cancel
always reaches it. Python 3.10 has only wait_for, and keeps its race.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(work: Awaitable[T], seconds: float | None) -> T:
    """`await work`, or TimeoutError after `seconds` (None: no limit)."""
    import asyncio  # here: `cockpit status` imports this module before it needs an event loop

    if sys.version_info < (3, 11):
        return await asyncio.wait_for(work, seconds)
    async with asyncio.timeout(seconds):
        return await work
