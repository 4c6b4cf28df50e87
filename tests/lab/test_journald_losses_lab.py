"""journald's own losses in a lab whose journald rate-limits (the lab's own turns it off): the
stand-in's eight ranks crash past the limit, journald reports it in the unit's journal, and the
cockpit says so, marks the crash's tracebacks as possibly incomplete in the incident note, and
says how to lift the limit.

The limit here is 20 messages per 5 s, which journald scales up with its free space (about 3.5x
on the lab's 1 GB journal): a crash of eight ranks (80 lines, in a fresh window) passes it every
time and keeps most of each traceback, where journald's default (10,000 per 30 s) needs a flood
beside the crash: the second test restores the default and floods after the crash, inside its
window."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from cockpit.config import Config
from cockpit.incident import render
from cockpit.lab.lab import Lab, crash, fault
from cockpit.session import Session
from cockpit.targets import Target
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit
from tests.listeners import Notices

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
    listener = Notices()
    heard = listener.said

    session = Session(Config(), Target(lab.name, UNIT))
    session.listener = listener
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


FLOODED, FLOOD_PORT = "sglang-flooded.service", 30400


@pytest.fixture
def default_rate_limit(lab: LabHandle) -> Iterator[str]:
    """journald's own defaults, which the lab's journald.conf.d turns off, and a unit of the
    test's own (its 100,000 lines stay out of the demo unit's journal)."""
    lab.ssh("tee", DROPIN, input="[Journal]\nRateLimitIntervalSec=30s\nRateLimitBurst=10000\n")
    lab.ssh("systemctl", "restart", "systemd-journald")
    try:
        with standin_unit(lab, FLOODED, FLOOD_PORT) as name:
            yield name
    finally:
        lab.ssh("rm", "-f", DROPIN)
        lab.ssh("systemctl", "restart", "systemd-journald")


async def test_journalds_default_limit_after_a_crash_and_a_flood(lab: LabHandle, default_rate_limit: str) -> None:
    """The crash of eight ranks, then (the restarted server logging every step of a big batch)
    100,000 decode lines inside the same 30 s window: journald's default burst, 10,000 scaled up
    with its free space (about 32,000 on the lab's 1 GB journal), drops the rest, and the crash's
    tracebacks lie in the period its report covers."""
    listener = Notices()
    heard = listener.said

    session = Session(Config(), Target(lab.name, default_rate_limit))
    session.listener = listener
    session.start()
    try:
        await until(
            lambda: session.status is not None and session.status.ready and session.journal.state == "following", 60
        )
        crashed = session.status.invocation_id
        assert crash(Lab(lab.name), FLOOD_PORT) == 8
        await until(
            lambda: session.status.ready and session.status.invocation_id != crashed, 60, lambda: session.status
        )
        fault(Lab(lab.name), "flood", FLOOD_PORT, lines=100_000)
        await until(lambda: any(h.startswith("journald dropped") for h in heard), 90, heard)
        said = next(h for h in heard if h.startswith("journald dropped"))
        assert int(re.match(r"journald dropped (\d+) messages", said).group(1)) > 10_000, heard  # type: ignore[union-attr]
        assert f"`systemctl edit {default_rate_limit}`, add `[Service]` `LogRateLimitIntervalSec=0`" in said
        note = render(await session.incident())
        marked = re.findall(r"^### \d+\. TP\d .*⚠ possibly incomplete: journald dropped lines then$", note, re.M)
        assert len(marked) >= 8, note[:4000]
    finally:
        await session.close()
