"""The session in the lab: its deployment found once, and an edit applied through it (write,
restart, watch) that follows the journal once: the restart watch hears the session's own feed."""

from __future__ import annotations

import asyncio

from cockpit.config import Config
from cockpit.session import Session
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
