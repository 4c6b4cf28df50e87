"""A health that tells the truth, against the lab's stand-in: a hang reads `hung` before its
watchdog fires (/health too gets no answer: it generates a token, as 0.5.23's does) and its
stacks are real py-spy stacks of the ranks; under a server whose /health still answers 200
(SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0), a dead detokenizer reads `degraded`, naming the
process, and a hang `hung`, in the app, `cockpit status` and the fleet alike. Through the session
(what the app shows) and the headless commands."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.config import Config
from cockpit.incident import render
from cockpit.lab.lab import Lab, fault
from cockpit.session import Session
from cockpit.sglang.server.health import DEGRADED, DOWN, HUNG, READY
from cockpit.systemd.processes import rank_of
from cockpit.targets import Target
from cockpit.traceback.stack_dump import folded
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit

UNIT, PORT, WATCHDOG_S = "sglang-faults.service", 30100, 45
COCKPIT = str(Path(sys.executable).with_name("cockpit"))


@pytest.fixture
def fault_unit(lab: LabHandle) -> Iterator[str]:
    """The demo's stand-in on a port of its own, with a short watchdog and no restart."""
    with standin_unit(lab, UNIT, PORT, flags=f"--watchdog-timeout {WATCHDOG_S}", restart=False) as name:
        yield name


@pytest.fixture
def quiet_health_unit(lab: LabHandle) -> Iterator[str]:
    """The same, with /health answering at once without the model, as 0.5.23's does where the
    unit's environment turns SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION off."""
    off = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0"
    with standin_unit(lab, UNIT, PORT, flags=f"--watchdog-timeout {WATCHDOG_S}", env=off, restart=False) as name:
        yield name


def cockpit(lab: LabHandle, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COCKPIT, *argv, "--host", lab.name, "--unit", UNIT], capture_output=True, text=True, timeout=90
    )


async def ready(session: Session) -> None:
    session.start()
    await until(lambda: session.status is not None and session.status.readiness == READY, 60, "ready")


async def test_a_hang_reads_hung_before_its_watchdog_and_its_stacks_are_real(lab: LabHandle, fault_unit: str) -> None:
    from cockpit.remote.pool import HostPool
    from cockpit.sglang.deployments import fleet

    session = Session(Config(), Target(lab.name, fault_unit))
    pool = HostPool(Config())
    reader, wanted = fleet.FleetReader(pool.get), fleet.hosts_of(Config(), [Target(lab.name, fault_unit)])

    async def fleet_says(state: str, timeout: float) -> fleet.FleetRow:
        deadline = time.monotonic() + timeout
        while True:
            row = next(r for r in fleet.rows(Config(), await reader.round(wanted)) if r.unit == fault_unit)
            if row.trouble == state:
                return row
            assert time.monotonic() < deadline, row
            await asyncio.sleep(1)

    try:
        await ready(session)
        await fleet_says(fleet.READY, 30)  # what `V` said all through the hang, once
        hung_at = time.monotonic()
        fault(Lab(lab.name), "hang", PORT)
        await until(lambda: session.status.readiness == HUNG, WATCHDOG_S, lambda: session.status)
        seen_after = time.monotonic() - hung_at
        # The fleet asks the same generating check, at most every RECHECK_S once it answered: it
        # says hung too, before the watchdog, and so puts the hang first.
        row = await fleet_says(fleet.HUNG, WATCHDOG_S - (time.monotonic() - hung_at))
        assert "no answer within" in row.reason, row
        said = lab.ssh("journalctl", "-u", fault_unit, "-o", "cat").stdout
        assert "watchdog timeout" not in said, "hung only once the watchdog fired"
        assert seen_after < WATCHDOG_S and "/health_generate: no answer within 10 s" in session.status.readiness_reason

        capture = await session.stacks()
        ranks = {rank_of(p.title): p for p in capture.processes if rank_of(p.title)}
        assert sorted(ranks) == [f"TP{r}" for r in range(8)]
        for stack in ranks.values():
            main = stack.main
            assert main is not None and "_wait_for_peers" in [f.function for f in main.frames], stack
        rows = folded(capture.processes, capture.at)
        assert sorted(tb.rank for _, tb in rows.tracebacks() if tb.rank) == sorted(ranks)

        headless = cockpit(lab, "stacks", "--json")
        assert headless.returncode == 0, headless.stderr
        dumped = json.loads(headless.stdout)["processes"]
        assert sorted(p["rank"] for p in dumped if p["rank"]) == sorted(ranks)
        status = cockpit(lab, "status", "--json")  # /health: the stand-in's generates, as 0.5.23's does
        told = json.loads(status.stdout)
        assert status.returncode == 1 and told["readiness"] == HUNG, told
        assert told["readiness_reason"].startswith("/health: no answer within 10 s"), told

        note = render(await session.incident())  # one note: the stacks, the GPU table, the start-up
        assert note.count("### TP") >= 8 and "## Stacks (py-spy dump at " in note
        assert "## GPUs" in note and "## Start-up" in note and "| load weight |" in note

        # Then each rank's watchdog fires, SIGQUITs the server, and it ends.
        await until(lambda: session.status.readiness == DOWN, WATCHDOG_S + 30, lambda: session.status)
        said = lab.ssh("journalctl", "-u", fault_unit, "-o", "cat").stdout
        assert said.count("Scheduler watchdog timeout (self.watchdog_timeout=45.0") == 8
    finally:
        await session.close()
        await pool.close()


async def test_a_dead_detokenizer_under_a_200_health_reads_degraded(lab: LabHandle, quiet_health_unit: str) -> None:
    session = Session(Config(), Target(lab.name, quiet_health_unit))
    try:
        await ready(session)
        titles = session.status.processes.titles if session.status.processes else {}
        detokenizer = next((p for p, t in titles.items() if t == "sglang::detokenizer"), None)
        assert detokenizer is not None, (session.status.processes, session.status.control_group)
        fault(Lab(lab.name), "kill-detokenizer", PORT)
        await until(lambda: session.status.readiness == DEGRADED, 60, lambda: session.status)
        reason = session.status.readiness_reason
        assert reason.startswith(f"sglang::detokenizer (PID {detokenizer}) is gone while the main process"), reason
        health = lab.ssh(
            "python3", "-c", f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{PORT}/health').status)"
        )
        assert health.stdout.strip() == "200"  # what a health check that asks only /health believes

        status = cockpit(lab, "status", "--json")  # /health_generate, as the app asks, and the processes now
        told = json.loads(status.stdout)
        assert status.returncode == 1 and told["readiness"] == DEGRADED, told
        assert told["readiness_reason"].startswith("sglang::detokenizer is gone")
        health = told["health"]
        assert (health["path"], health["status"], health["generates"]) == ("/health_generate", None, True), health
        assert health["detail"] == (
            "no answer within 10 s; not /health, which asks the model nothing: "
            "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 in the unit's environment"
        ), health
    finally:
        await session.close()


async def test_a_hang_behind_a_health_that_asks_nothing_reads_hung_in_status_and_the_fleet(
    lab: LabHandle, quiet_health_unit: str
) -> None:
    """Where the unit's environment turns /health's generation off, /health answers 200 from a hung
    server: `cockpit status` and the fleet asked it and read `ready` while the app read `hung`.
    Every view asks an endpoint that generates now, and all three say hung."""
    from cockpit.remote.pool import HostPool
    from cockpit.sglang.deployments import fleet

    session = Session(Config(), Target(lab.name, quiet_health_unit))
    pool = HostPool(Config())
    reader, wanted = fleet.FleetReader(pool.get), fleet.hosts_of(Config(), [Target(lab.name, quiet_health_unit)])
    try:
        await ready(session)
        before = json.loads(cockpit(lab, "status", "--json").stdout)
        assert before["readiness"] == READY and before["health"]["path"] == "/health_generate", before
        fault(Lab(lab.name), "hang", PORT)
        hung_at = time.monotonic()
        health = lab.ssh(
            "python3", "-c", f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{PORT}/health').status)"
        )
        assert health.stdout.strip() == "200"  # what status and the fleet asked before, and believed
        # Within the watchdog's 45 s, before the server ends: each says hung, none says down.
        row = next(r for r in fleet.rows(Config(), await reader.round(wanted)) if r.unit == quiet_health_unit)
        assert row.trouble == fleet.HUNG and row.reason.startswith("/health_generate: no answer within 10 s"), row
        status = cockpit(lab, "status", "--json")
        told = json.loads(status.stdout)
        assert status.returncode == 1 and told["readiness"] == HUNG, told
        assert told["readiness_reason"].startswith("/health_generate: no answer within 10 s"), told
        await until(lambda: session.status.readiness == HUNG, WATCHDOG_S, lambda: session.status)
        assert time.monotonic() - hung_at < WATCHDOG_S
    finally:
        await session.close()
        await pool.close()


SLEEPER = "sglang-sleeper.service"  # in the fleet's `sglang*`, serving nothing


@pytest.fixture
def sleeper(lab: LabHandle) -> Iterator[int]:
    """A unit running `sleep` with no --port while the demo's stand-in serves SGLang's default
    port 30000; the stand-in's main PID."""
    lab.ssh("tee", f"/etc/systemd/system/{SLEEPER}", input="[Service]\nExecStart=/bin/sleep infinity\n")
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "start", SLEEPER)
    try:
        yield int(lab.ssh("systemctl", "show", "-p", "MainPID", "--value", "sglang-demo.service").stdout)
    finally:
        lab.ssh("systemctl", "stop", SLEEPER, check=False)
        lab.ssh("rm", "-f", f"/etc/systemd/system/{SLEEPER}", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


async def test_another_units_server_on_the_default_port_is_not_the_units_readiness(
    lab: LabHandle, sleeper: int
) -> None:
    """cockpit status, the fleet and the app all say whose port 30000 is, and none says ready."""
    from cockpit.remote.pool import HostPool
    from cockpit.sglang.deployments.fleet import STARTING, FleetReader

    whose = f"PID {sleeper} (python) of sglang-demo.service listens on 127.0.0.1:30000, not {SLEEPER}"
    argv = [COCKPIT, "status", "--host", lab.name, "--unit", SLEEPER, "--json"]
    out = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=90)
    assert out.returncode == 1, out.stdout + out.stderr
    told = json.loads(out.stdout)
    assert told["readiness"] == "starting" and whose in told["readiness_reason"], told
    assert told["health"]["status"] is None
    pool = HostPool(Config())
    try:
        [host] = await FleetReader(pool.get).round({lab.name: [SLEEPER]})
    finally:
        await pool.close()
    fleet = host.unit(SLEEPER)
    assert fleet is not None and (fleet.trouble, fleet.reason) == (STARTING, told["readiness_reason"])
    assert host.unit("sglang-demo.service").trouble == READY  # its own server is asked, and ready
    session = Session(Config(), Target(lab.name, SLEEPER))
    session.start()
    try:
        await until(lambda: session.status is not None and session.status.health is not None, 30, "no health")
        said = told["readiness_reason"].replace("/health:", "/health_generate:", 1)  # what the app asks
        # after the start-up phase a young start is in (`in imports for 2 s; `)
        assert session.status.readiness == "starting" and session.status.readiness_reason.endswith(said)
    finally:
        await session.close()
