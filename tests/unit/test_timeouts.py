"""`within` keeps a cancel that arrives in the loop step where the work ends; on Python 3.11
asyncio.wait_for returns the result instead, and the task told to stop goes on."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from cockpit.timeouts import within


async def _cancelled_as_the_work_ends(limit: Callable[[Awaitable[int], float], Awaitable[int]]) -> str:
    work: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def caller() -> str:
        value = await limit(work, 10)
        await asyncio.sleep(0)  # a task that still runs here has lost its cancel
        return f"went on with {value}"

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)  # the caller now waits on the work
    work.set_result(1)
    task.cancel()  # the same loop step
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def test_a_cancel_that_comes_as_the_work_ends_is_kept() -> None:
    assert await _cancelled_as_the_work_ends(within) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's wait_for is built on asyncio.timeout")
async def test_the_race_is_real_with_wait_for() -> None:
    """The scenario above is the one that loses the cancel with wait_for (so it tests something)."""
    assert await _cancelled_as_the_work_ends(asyncio.wait_for) == "went on with 1"


async def test_the_limit_still_holds() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(5), 0.05)
    assert await within(asyncio.sleep(0, "done"), None) == "done"
