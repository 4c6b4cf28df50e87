"""The session in the lab: its deployment found once, and an edit applied through it (write,
restart, watch) that follows the journal once: the restart watch hears the session's own feed."""

from __future__ import annotations

import asyncio
import time

from cockpit.config import Config
from cockpit.session import Session
from cockpit.session.feeds import POLL_S, SETTLED_READ_S
from cockpit.targets import Target
from tests.conftest import LAB_SITE, LabHandle, until
from tests.lab.test_rollout_lab import seed_unit  # noqa: F401 - the fixture

FOLLOWS = ["pgrep", "-fc", "[j]ournalctl -u sglang-demo.service .*--follow"]  # [j]: not the shell asking


async def test_an_edit_applied_through_the_session_follows_the_journal_once(
    lab: LabHandle,
    seed_unit,  # noqa: F811
) -> None:
    session = Session(Config(), Target(lab.name, "sglang-demo.service"))
    session.start()
    try:
        await until(lambda: session.deployment is not None and session.status is not None, 30)
        found = session.deployment
        assert found is not None and found.problems == []
        assert found.package_root == LAB_SITE and found.catalog is not None
        assert found.address == ("127.0.0.1", 30000)  # from the unit's own --host and --port
        await until(lambda: session.journal.state == "following", 30)

        counts: list[int] = []

        async def count_follows() -> None:
            while True:
                result = await session.host.run(FOLLOWS)
                counts.append(int(result.text.strip() or 0))
                await asyncio.sleep(0.3)

        counter = asyncio.create_task(count_follows())
        loaded = session.unit
        assert loaded is not None
        fixed = loaded.set_flag("--speculative-num-steps", "3").set_flag("--speculative-num-draft-tokens", "8")
        try:
            attempt = await session.apply(loaded, fixed)
        finally:
            counter.cancel()
        assert attempt.outcome == "ready", attempt.detail
        assert len(counts) >= 3 and max(counts) == 1, counts  # the session's follow, and no second one
        # the watch saw the new invocation's ready line through the session's feed, and the
        # session read the deployment again: the next edit starts from the unit as written
        assert session.unit is not None and "--speculative-num-steps" in " ".join(session.unit.exec())
        assert any("ready to roll" in r.text for r in session.rows.folder.records if hasattr(r, "text"))
    finally:
        await session.close()


async def test_a_settled_unit_is_read_when_systemd_speaks(lab: LabHandle) -> None:
    """Ready and followed, the unit is read in full every SETTLED_READ_S only, a heartbeat keeping
    its time current meanwhile (the pane never reads stale); a stop behind the cockpit's back is
    read as soon as systemd's journal line about it arrives, not at the next timed read."""
    lab.wait_ready()
    session = Session(Config(), Target(lab.name, "sglang-demo.service"))
    session.start()
    try:
        await until(
            lambda: (
                session.status is not None and session.status.ready is True and session.journal.state == "following"
            ),
            60,
        )
        poll = session.poll
        assert poll is not None
        reads: list[float] = []
        read = poll.poll_once

        async def counted() -> None:
            reads.append(time.monotonic())
            await read()

        poll.poll_once = counted  # type: ignore[method-assign]
        ages = []
        for _ in range(14):
            await asyncio.sleep(0.5)
            assert session.status is not None
            ages.append(time.time() - session.status.checked_at)
        assert len(reads) <= 1, reads  # 7 s settled: one timed read at most (every SETTLED_READ_S)
        assert max(ages) < 2 * POLL_S + 0.5, ages  # confirmed each POLL_S all the same
        await until(lambda: bool(reads) and time.monotonic() - reads[-1] < 0.5, 2 * SETTLED_READ_S)
        sent = time.monotonic()  # the next timed read is 9.5 s away
        stopping = asyncio.ensure_future(asyncio.to_thread(lab.ssh, "systemctl", "stop", "sglang-demo"))
        await until(lambda: session.status is not None and session.status.active_state != "active", 15)
        assert time.monotonic() - sent < 3.0  # systemd's "Stopping" line asked for the read
        await stopping
        await until(lambda: session.status is not None and session.status.active_state in ("inactive", "failed"), 15)
    finally:
        await session.close()
        lab.ssh("systemctl", "start", "sglang-demo")
        lab.wait_ready()  # the modules after this one find it serving, as they found it before
