"""The start-up timeline of a TP-8 start of the lab's stand-in, through the session: every phase of
every rank, timed as long as the rank itself says it took; the readiness of a start under way
says which phase it is in; a start that dies names its phase and rank, and is compared with the
start before it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from cockpit.config import Config
from cockpit.incident import render
from cockpit.session import Listener, Session
from cockpit.sglang.server.health import READY, STARTING
from cockpit.sglang.server.startup import RANK_PHASES
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit

UNIT = "sglang-start.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/fail.conf"
ELAPSED = re.compile(r"\[[^]]* (TP\d)\] Load weight end\. elapsed=([\d.]+) s")


@pytest.fixture
def start_unit(lab: LabHandle) -> Iterator[str]:
    """The demo's stand-in on a port of its own, 2 s a phase, no restart, not started yet."""
    with standin_unit(lab, UNIT, 30200, env="COCKPIT_STANDIN_STARTUP_S=8", restart=False, start=False) as name:
        yield name


async def test_a_tp8_start_phase_by_phase_and_one_that_dies(lab: LabHandle, start_unit: str) -> None:
    reasons: list[str] = []

    class Heard(Listener):
        def status(self, status: UnitStatus) -> None:
            if status.readiness == STARTING:
                reasons.append(status.readiness_reason)

    session = Session(Config(), Target(lab.name, start_unit))
    session.listener = Heard()
    lab.ssh("systemctl", "start", start_unit)
    session.start()
    try:
        await until(lambda: session.status is not None and session.status.readiness == READY, 60, lambda: reasons)
        found = session.timeline()
        assert found is not None and found.timeline.ready_at is not None
        timeline = found.timeline
        assert sorted(timeline.ranks) == [f"TP{r}" for r in range(8)]
        said = dict(ELAPSED.findall(lab.ssh("journalctl", "-u", start_unit, "-o", "cat").stdout))
        started = timeline.started_at
        assert started is not None and timeline.ready_at is not None
        for rank, phases in timeline.ranks.items():
            assert all(phases.seconds(p) for p in ("init", "load_weight", "memory_pool", "cuda_graph")), (rank, phases)
            # from the unit's start, with no gap: the rank's phases add up to its part of the start
            done = phases.done_at()
            assert (
                done is not None and abs(sum(phases.seconds(p) or 0.0 for p in RANK_PHASES) - (done - started)) < 1e-6
            )
            # the measurer (journald's stamps of the two lines) against the rank's own figure
            assert abs(phases.seconds("load_weight") - float(said[rank])) < 0.5, (rank, phases, said[rank])
        assert any(re.match(r"in (distributed init|load weight|memory pool|CUDA graphs) for \d+ s", r) for r in reasons)
        assert abs(sum(timeline.durations().values()) - (timeline.ready_at - started)) < 1, timeline.durations()

        lab.ssh("mkdir", "-p", f"/etc/systemd/system/{start_unit}.d")
        lab.ssh(
            "tee",
            DROPIN,
            input="[Service]\nEnvironment=COCKPIT_STANDIN_FAIL_IN=load_weight COCKPIT_STANDIN_FAIL_RANK=3\n",
        )
        lab.ssh("systemctl", "daemon-reload")
        lab.ssh("systemctl", "restart", start_unit)
        first = timeline.invocation

        def died() -> bool:
            latest = session.timeline()
            return latest is not None and latest.timeline.invocation != first and latest.timeline.died_in() is not None

        await until(died, 60, lambda: session.timeline())
        latest = session.timeline()
        assert latest is not None and latest.timeline.died_in() == ("load_weight", "TP3")
        assert latest.last is not None and latest.last.invocation == first
        note = render(await session.incident())
        assert "died in load weight on TP3 (TP3 hit an exception)" in note and "x the last start" in note
    finally:
        await session.close()
