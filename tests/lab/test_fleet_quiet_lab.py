"""The fleet's round on a settled host (issue 29, item 1): its shell's builtins and the health
checks that are due, no `systemctl show`, no ss, no nvidia-smi (at most the states, every
STATES_S, where PID 1 ran); yet a unit file added behind its back is listed in the next round, a
restarted unit's new ExecStart is read (its alone) and asked at its new port, and a unit killed,
then reset-failed (which changes no process, only systemd's state) behind its back is read soon
after. SETTLED_READ_S and GPUS_S are pushed out of the test's reach, so only a change the shell
saw can have read anything."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import pytest

from cockpit.config import Config
from cockpit.lab.nodes import standin_unit_text
from cockpit.remote.base import Host, RunResult
from cockpit.remote.pool import HostPool
from cockpit.sglang.deployments import fleet
from cockpit.sglang.deployments.fleet import FAILED, READY, STOPPED, FleetReader, HostRound
from tests.conftest import LabHandle
from tests.lab.standin_units import standin_unit

QUIET = "sglang-quiet.service"
LATE = "sglang-late.service"


class Spy:
    """Every query the fleet sends the lab's host: which script, its words, and what it said."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], str]] = []

    def wrap(self, host: Host) -> None:
        asked = host.query

        async def query(argv: Sequence[str], **options: float) -> RunResult:
            result = await asked(argv, **options)
            script = {fleet.SCRIPT: "round", fleet.EXEC_SCRIPT: "exec"}.get(argv[2], argv[2])
            self.calls.append((script, list(argv[4:]), result.text))
            return result

        host.query = query  # type: ignore[method-assign]

    def heads(self) -> list[str]:
        """What each round script said it read (units, listeners, GPUs, unit files, states)."""
        return [text.split("\n")[0] for script, words, text in self.calls if script == "round" and words[0] == "all"]


async def _round(reader: FleetReader, lab: LabHandle) -> HostRound:
    began = time.monotonic()
    [answered] = await reader.round({lab.name: []})
    assert answered.error is None, answered.error
    await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    return answered


async def _until(
    reader: FleetReader, lab: LabHandle, done: Callable[[HostRound], bool], rounds: int, what: str
) -> HostRound:
    for _ in range(rounds):
        answered = await _round(reader, lab)
        if done(answered):
            return answered
    raise AssertionError(f"{what}: not within {rounds} rounds: {answered}")


def _read_nothing(head: str) -> bool:
    """A round that read no unit, listener, GPU or unit file (the states it may have looked at)."""
    return head.startswith("0 0 0 0 ")


def _trouble(answered: HostRound, unit: str) -> str | None:
    found = answered.unit(unit)
    return found.trouble if found else None


async def test_a_settled_round_reads_nothing_but_what_changed(lab: LabHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "SETTLED_READ_S", 3600.0)
    monkeypatch.setattr(fleet, "GPUS_S", 3600.0)
    pool = HostPool(Config())
    spy = Spy()
    spy.wrap(pool.get(lab.name))
    reader = FleetReader(pool.get)
    try:
        with standin_unit(lab, QUIET, 30141, restart=False):
            first = await _until(
                reader,
                lab,
                lambda r: _trouble(r, QUIET) == READY and _trouble(r, "sglang-demo.service") == READY,
                60,
                "both units ready",
            )
            assert spy.heads()[0] == "1 1 1 1 0"  # a first round reads everything
            assert first.gpus is not None and "GPUs busy" in first.gpus.words()

            # The round after the last read may read again, where PID 1 was still closing that
            # read's systemctl connection when the shell looked.
            await _until(reader, lab, lambda r: _read_nothing(spy.heads()[-1]), 12, "a round that reads nothing")
            spy.calls.clear()
            quiet = [await _round(reader, lab) for _ in range(3)]
            assert all(_read_nothing(head) for head in spy.heads()), spy.calls  # no show, ss, nvidia-smi, files
            assert [script for script, _, _ in spy.calls] == ["round"] * 3  # no ExecStart read, no probe of its own
            assert all(_trouble(r, QUIET) == READY for r in quiet)
            assert all(r.gpus == first.gpus for r in quiet)  # the last table kept

            spy.calls.clear()
            lab.ssh("tee", f"/etc/systemd/system/{LATE}", input=standin_unit_text(30143))
            try:
                late = await _round(reader, lab)
                assert spy.heads()[0].split()[3] == "1", spy.calls  # the unit files listed again
                assert _trouble(late, LATE) == STOPPED  # in the very next round, never started
            finally:
                lab.ssh("rm", "-f", f"/etc/systemd/system/{LATE}")

            # A new ExecStart behind the fleet's back, then a restart: read, for that unit alone.
            spy.calls.clear()
            lab.ssh("sed", "-i", "s/--port 30141/--port 30142/", f"/etc/systemd/system/{QUIET}")
            lab.ssh("systemctl", "daemon-reload")
            lab.ssh("systemctl", "kill", "--signal=SIGKILL", QUIET)
            lab.ssh("systemctl", "restart", QUIET)
            await _until(reader, lab, lambda r: _trouble(r, QUIET) == READY, 60, "the restarted unit ready")
            reads = [words for script, words, _ in spy.calls if script == "exec"]
            assert [QUIET] in reads, spy.calls
            assert not [words for words in reads if "sglang-demo.service" in words]  # its start did not change
            asked = [" ".join(words) for script, words, _ in spy.calls if script == "round"]
            assert any(f"{QUIET} 127.0.0.1 30142" in words for words in asked), asked  # at its new port

            # Killed, then reset-failed behind its back: systemd's doing, read in the next rounds.
            lab.ssh("systemctl", "kill", "--signal=SIGKILL", QUIET)
            await _until(reader, lab, lambda r: _trouble(r, QUIET) == FAILED, 5, "the killed unit failed")
            await _until(reader, lab, lambda r: _read_nothing(spy.heads()[-1]), 12, "a round that reads nothing")
            spy.calls.clear()
            lab.ssh("systemctl", "reset-failed", QUIET)
            limit = round(fleet.STATES_S) + 3  # at once where nothing else runs PID 1
            await _until(reader, lab, lambda r: _trouble(r, QUIET) == STOPPED, limit, "the reset unit stopped")
            assert spy.heads()[-1] == "1 0 0 0 1", spy.calls  # PID 1 ran: the states looked at, then the units
    finally:
        await pool.close()
