"""The fleet over two labs: a two-node deployment as one row with its nodes under it, a unit
someone stopped, a configured unit the host does not have; node 1 killed while node 0 runs
shows the deployment broken at the top within the rounds of 5 s; a server frozen (SIGSTOP) is
hung once its /health, asked on the host at most every 15 s once it answered, does not answer.
Unit text that looks like systemctl's output (a newline in ExecStart's argv, a transient unit's
Description with newlines) forges no unit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.config import Config, load
from cockpit.remote.pool import HostPool
from cockpit.sglang.deployments.fleet import (
    BROKEN,
    FAILED,
    HUNG,
    READY,
    STOPPED,
    FleetReader,
    FleetRow,
    hosts_of,
    rows,
)
from cockpit.systemd.readiness import HUNG_AFTER_S, RECHECK_S
from cockpit.systemd.status import list_units
from tests.conftest import LabHandle
from tests.lab.standin_units import deployment_config, standin_unit
from tests.lab.test_multinode_standin_lab import NODES, two_nodes


def _by_name(lines: list[FleetRow]) -> dict[str, FleetRow]:
    return {f"{r.node or r.host}/{r.unit}": r for r in lines}


async def test_a_deployment_is_one_row_and_node_1_lost_is_broken_at_once(
    lab: LabHandle, node1: LabHandle, tmp_path: Path
) -> None:
    path = deployment_config(
        tmp_path / "cockpit.toml", "k26", [("k26-node0", lab, NODES[0]), ("k26-node1", node1, NODES[1])]
    )
    path.write_text(path.read_text() + f'[units.gone]\nhost = "{lab.name}"\nunit = "sglang-gone.service"\n')
    config = load(path)
    pool = HostPool(config)
    reader = FleetReader(pool.get)
    try:
        with two_nodes(lab, node1), standin_unit(lab, "sglang-idle.service", 30131, start=False):
            deadline = time.monotonic() + 90
            while True:
                lines = rows(config, await reader.round(hosts_of(config)))
                if (
                    lines
                    and lines[-1].trouble == STOPPED
                    and any(r.unit == "k26" and r.trouble == READY for r in lines)
                ):
                    break
                assert time.monotonic() < deadline, lines
                await asyncio.sleep(1)
            named = _by_name(lines)
            assert lines[0] == named[f"{lab.name}/sglang-gone.service"]  # failed first
            assert lines[0].reason == f"sglang-gone.service is not on {lab.name}"
            deployment = [r for r in lines if r.deployment == "k26"]
            assert [r.node for r in deployment] == ["", "k26-node0", "k26-node1"]  # its nodes folded under it
            assert "schedulers run" in named[f"k26-node1/{NODES[1]}"].reason  # not its dummy /health
            assert named[f"{lab.name}/sglang-demo.service"].trouble == READY
            assert "GPUs busy" in named[f"{lab.name}/sglang-demo.service"].gpus
            assert lines[-1] == named[f"{lab.name}/sglang-idle.service"]

            node1.ssh("systemctl", "kill", "--signal=SIGKILL", NODES[1])
            killed = time.monotonic()
            while True:
                lines = rows(config, await reader.round(hosts_of(config)))
                head = next(r for r in lines if r.unit == "k26")
                if head.trouble == BROKEN:
                    break
                assert time.monotonic() - killed < 5, head
                await asyncio.sleep(1)
            assert "k26-node1" in head.reason and "restart the group" in head.reason
            assert lines[0].unit == "sglang-gone.service" and lines[1] == head  # worst first, by group
            assert [(r.node, r.trouble) for r in lines[2:4]] == [("k26-node0", READY), ("k26-node1", FAILED)]
            lab.ssh("systemctl", "start", "sglang-idle.service")
            while True:
                idle = _by_name(rows(config, await reader.round(hosts_of(config))))[f"{lab.name}/sglang-idle.service"]
                if idle.trouble == READY:
                    break
                assert time.monotonic() < deadline + 60, idle
                await asyncio.sleep(1)
            lab.ssh("systemctl", "kill", "--signal=SIGSTOP", "sglang-idle.service")
            stopped = time.monotonic()
            try:
                # /health_generate: a token, so asked again RECHECK_S after its 200.
                while True:
                    idle = _by_name(rows(config, await reader.round(hosts_of(config))))[
                        f"{lab.name}/sglang-idle.service"
                    ]
                    if idle.trouble != READY or time.monotonic() - stopped > RECHECK_S + 10:
                        break
                    await asyncio.sleep(1)
            finally:
                lab.ssh("systemctl", "kill", "--signal=SIGCONT", "sglang-idle.service")
            assert (idle.trouble, idle.reason.split(" (")[0]) == (
                HUNG,
                f"/health_generate: no answer within {HUNG_AFTER_S:g} s",
            )
    finally:
        await pool.close()


FORGER = "sglang-forger.service"
# The argv's last word holds newlines that look like the next unit's `systemctl show` block.
FORGED_BLOCK = "x\\n\\nId=sglang-phantom.service\\nLoadState=loaded\\nActiveState=failed\\nResult=exit-code\\n\\n"
FORGER_UNIT = (
    "[Unit]\nDescription=cockpit test: an ExecStart argv with newlines in it\n"
    f'[Service]\nExecStart=/bin/sh -c "exec sleep infinity" sh --port 30997 "{FORGED_BLOCK}"\n'
)
TELLER = "sglang-teller"  # a transient unit: its Description may hold newlines


@pytest.fixture
def forging_units(lab: LabHandle) -> Iterator[tuple[str, str]]:
    lab.ssh("tee", f"/etc/systemd/system/{FORGER}", input=FORGER_UNIT)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "start", FORGER)
    description = "told\n\nId=sglang-phantom2.service\nActiveState=failed\nsglang-phantom3.service x"
    lab.ssh("systemd-run", "--unit", TELLER, "--description", description, "sleep", "infinity")
    try:
        yield FORGER, f"{TELLER}.service"
    finally:
        lab.ssh("systemctl", "stop", FORGER, f"{TELLER}.service", check=False)
        lab.ssh("rm", "-f", f"/etc/systemd/system/{FORGER}", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


async def test_unit_text_cannot_forge_a_unit_in_the_fleet_or_the_picker(
    lab: LabHandle, forging_units: tuple[str, str]
) -> None:
    """systemctl prints ExecStart's argv as it is: the blank line in it began a block of its own,
    and the fleet showed sglang-phantom.service, failed. The Description's further lines listed
    `Id=sglang-phantom2.service` and sglang-phantom3.service as units in the fleet and the picker."""
    forger, teller = forging_units
    pool = HostPool(Config())
    try:
        reader = FleetReader(pool.get)
        deadline = time.monotonic() + 30
        while True:
            [found] = await reader.round({lab.name: []})
            units = {u.unit: u for u in found.units}
            if found.error is None and forger in units and teller in units:
                break
            assert time.monotonic() < deadline, found
        assert not [u for u in units if "phantom" in u], sorted(units)
        assert units[forger].status.active_state == "active" and units[forger].trouble != FAILED
        assert "30997" in units[forger].reason  # its --port, read from the whole argv
        listed = await list_units(pool.get(lab.name))
        assert forger in listed and teller in listed
        assert not [u for u in listed if "phantom" in u], listed
    finally:
        await pool.close()
