"""A group restart whose node cannot be read after its stop: node 1's link cut once it stopped,
while node 0 still stops. A node whose state cannot be read is not stopped, so node 0 is not
started alone: the restart ends there and says which node it could not read."""

from __future__ import annotations

import asyncio

from cockpit.config import HostConfig
from cockpit.lab.lab import Lab
from cockpit.lab.network import set_link
from cockpit.remote.ssh import SSHHost
from cockpit.rollout.group import GroupNode, attempt_log, restart_group
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.targets import Target
from tests.conftest import LabHandle, until

NODES = ("cockpit-gr-node0.service", "cockpit-gr-node1.service")
# Node 0 takes 5 s to stop: node 1's link is cut in that time, after node 1 stopped.
UNITS = (
    "[Service]\nExecStart=/bin/sleep infinity\nExecStop=/bin/sleep 5\n",
    "[Service]\nExecStart=/bin/sleep infinity\n",
)


def _state(lab: LabHandle, unit: str) -> str:
    return lab.ssh("systemctl", "is-active", unit, check=False).stdout.strip()


async def test_a_node_that_cannot_be_read_after_its_stop_is_not_taken_for_stopped(
    lab: LabHandle, node1: LabHandle
) -> None:
    handles = (lab, node1)
    for handle, unit, text in zip(handles, NODES, UNITS, strict=True):
        handle.ssh("tee", f"/etc/systemd/system/{unit}", input=text)
        handle.ssh("systemctl", "daemon-reload")
        handle.ssh("systemctl", "start", unit)
    hosts = [SSHHost(HostConfig(name=h.name)) for h in handles]
    nodes = [
        GroupNode(node, Target(host.name, unit), host, host.config)
        for node, host, unit in zip(("n0", "n1"), hosts, NODES, strict=True)
    ]
    cut = False
    steps: list[str] = []
    try:
        restart = asyncio.create_task(
            restart_group(
                nodes, attempt_log("gr", [n.target for n in nodes]), CatalogCache(), timeout=30, step=steps.append
            )
        )
        await until(lambda: _state(node1, NODES[1]) == "inactive", 10, "node 1 stopped")
        await asyncio.sleep(1)  # systemctl's answer to the stop is home
        assert _state(lab, NODES[0]) == "deactivating"  # node 0 still stops: the read of node 1 comes after
        assert steps == ["stopping every node"]  # what the app's group line says meanwhile (issue 26)
        set_link(Lab(node1.name).net(), up=False)
        cut = True
        attempt = await asyncio.wait_for(restart, 60)
        assert attempt.outcome == "failed", attempt
        assert attempt.detail.startswith("n1 could not be read after its stop, so no node was started"), attempt
        assert _state(lab, NODES[0]) == "inactive"  # not started alone
        assert steps == ["stopping every node", "checking that no process of any node is left"], steps
    finally:
        if cut:
            set_link(Lab(node1.name).net(), up=True)
        for host in hosts:
            await host.close()
        for handle, unit in zip(handles, NODES, strict=True):
            handle.ssh("systemctl", "stop", unit, check=False)
            handle.ssh("rm", "-f", f"/etc/systemd/system/{unit}", check=False)
            handle.ssh("systemctl", "daemon-reload", check=False)
