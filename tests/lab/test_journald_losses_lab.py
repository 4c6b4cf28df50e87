"""journald's own losses in a lab whose journald rate-limits (the lab's own turns it off): the
stand-in's eight ranks crash past the limit, journald reports it in the unit's journal, and the
cockpit says so, marks the crash's tracebacks as possibly incomplete in the incident note, and
says how to lift the limit.

The limit here is 20 messages per 5 s, which journald scales up with its free space (about 3.5x
on the lab's 1 GB journal): a crash of eight ranks (80 lines, in a fresh window) passes it every
time and keeps most of each traceback, where journald's default (10,000 per 30 s) needs a flood
beside the crash."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from cockpit.config import Config
from cockpit.incident import render
from cockpit.lab.lab import Lab, crash
from cockpit.session import Listener, Session
from cockpit.targets import Target
from tests.conftest import LabHandle, until

UNIT = "sglang-demo.service"
DROPIN = "/etc/systemd/journald.conf.d/zz-cockpit-test-rate-limit.conf"


@pytest.fixture
def rate_limited(lab: LabHandle) -> Iterator[None]:
    lab.ssh("tee", DROPIN, input="[Journal]\nRateLimitIntervalSec=5s\nRateLimitBurst=20\n")
    lab.ssh("systemctl", "restart", "systemd-journald")
    yield
    lab.ssh("rm", "-f", DROPIN)
    lab.ssh("systemctl", "restart", "systemd-journald")


async def test_a_crash_past_journalds_limit_is_marked_possibly_incomplete(lab: LabHandle, rate_limited: None) -> None:
    heard: list[str] = []

    class Heard(Listener):
        def notice(self, sentence: str) -> None:
            heard.append(sentence)

    session = Session(Config(), Target(lab.name, UNIT))
    session.listener = Heard()
    session.start()
    try:
        await until(
            lambda: session.status is not None and session.status.ready and session.journal.state == "following", 60
        )
        await asyncio.sleep(6)  # a fresh window: the crash's lines are the first in it
        before = len(heard)
        assert crash(Lab(lab.name)) == 8
        # journald reports at the unit's first line after the window: the restart's, 5 s later.
        await until(lambda: any(h.startswith("journald dropped") for h in heard[before:]), 60, heard)
        said = next(h for h in heard[before:] if h.startswith("journald dropped"))
        assert re.match(r"journald dropped \d+ messages from sglang-demo.service between ", said), said
        assert "`systemctl edit sglang-demo.service`, add `[Service]` `LogRateLimitIntervalSec=0`" in said
        note = render(await session.incident())
        assert "## journald's losses" in note
        marked = re.findall(r"^### \d+\. TP\d .*⚠ possibly incomplete: journald dropped lines then$", note, re.M)
        assert marked, note
    finally:
        await session.close()
