"""One edit to both nodes of a launch (node 0 in the test lab, node 1 in a second lab): written to
both, or, when node 1's unit directory is read-only, to neither: node 0 gets its old text back,
and node 1 too where its refusal came after a rename; nothing after a rename makes the write a
failed one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cockpit.config import HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.rollout.single import with_files
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.sglang.deployments.deployment import read_deployment
from cockpit.systemd.group_write import GroupWriteFailed, NodeWrite, write_group
from cockpit.targets import Target
from tests.conftest import LabHandle
from tests.lab.standin_units import standin_unit

DIR = "/etc/systemd/system"
NODES = ("sglang-gw-node0.service", "sglang-gw-node1.service")


@pytest.fixture
async def nodes(lab: LabHandle, node1: LabHandle) -> AsyncIterator[list[NodeWrite]]:
    """Both nodes' units as read, each with --mem-fraction-static 0.8 in place of 0.85."""
    flags = "--tp-size 16 --nnodes 2 --dist-init-addr 10.213.0.2:5959"
    hosts = [SSHHost(HostConfig(name=lab.name)), SSHHost(HostConfig(name=node1.name))]
    with (
        standin_unit(lab, NODES[0], 30140, flags=f"{flags} --node-rank 0", start=False),
        standin_unit(node1, NODES[1], 30140, flags=f"{flags} --node-rank 1", start=False),
    ):
        writes = []
        for node, host, unit in zip(("n0", "n1"), hosts, NODES, strict=True):
            found = await read_deployment(host, Target(host.name, unit), catalogs=CatalogCache(), python=False)
            assert found.unit is not None, found.problems
            edited = found.unit.set_flag("--mem-fraction-static", "0.8")
            writes.append(NodeWrite(node, host, host.config, found.unit, edited))
        try:
            yield writes
        finally:
            for host in hosts:
                await host.close()
            lab.ssh("sh", "-c", f"rm -f {DIR}/{NODES[0]}.cockpit-bak.*", check=False)
            node1.ssh("sh", "-c", f"rm -f {DIR}/{NODES[1]}.cockpit-bak.*", check=False)


def unit_text(lab: LabHandle, unit: str) -> str:
    return lab.ssh("cat", f"{DIR}/{unit}").stdout


async def test_one_edit_is_written_to_every_node(lab: LabHandle, node1: LabHandle, nodes: list[NodeWrite]) -> None:
    backups = await write_group(nodes)
    assert set(backups) == {"n0", "n1"}
    for handle, unit, rank in ((lab, NODES[0], 0), (node1, NODES[1], 1)):
        text = unit_text(handle, unit)
        assert "--mem-fraction-static 0.8 " in text and f"--node-rank {rank}" in text  # each keeps its rank


async def test_a_node_that_refuses_leaves_every_node_as_it_was(
    lab: LabHandle, node1: LabHandle, nodes: list[NodeWrite]
) -> None:
    before = unit_text(lab, NODES[0])
    node1.ssh("sh", "-c", f"mount --bind {DIR} {DIR} && mount -o remount,ro,bind {DIR}")
    try:
        with pytest.raises(GroupWriteFailed) as failed:
            await write_group(nodes)
    finally:
        node1.ssh("umount", DIR, check=False)
    said = str(failed.value)
    assert said.startswith("n1: ") and "read-only file system" in said and "Put back as they were: n0." in said
    assert unit_text(lab, NODES[0]) == before  # node 0 was written, then put back
    assert "--mem-fraction-static 0.85" in unit_text(node1, NODES[1])


async def test_a_backup_that_cannot_be_pruned_leaves_the_write_done(
    lab: LabHandle, node1: LabHandle, nodes: list[NodeWrite]
) -> None:
    """A directory where node 1's oldest backup name would be, among ten backups: pruning it
    failed after node 1's rename, and the group write took node 1 for unwritten, put back node 0
    alone and said nothing changed while the two units differed."""
    stamps = [f"2020010{i // 10}T0000{i % 10}0.000000-0000000{i % 10}" for i in range(10)]
    node1.ssh(
        "sh",
        "-c",
        f"mkdir {DIR}/{NODES[1]}.cockpit-bak.20000101T000000.000000-00000000 && "
        + " && ".join(f": > {DIR}/{NODES[1]}.cockpit-bak.{s}" for s in stamps),
    )
    try:
        await write_group(nodes)
        for handle, unit in ((lab, NODES[0]), (node1, NODES[1])):
            assert "--mem-fraction-static 0.8 " in unit_text(handle, unit)
    finally:
        node1.ssh("sh", "-c", f"rm -rf {DIR}/{NODES[1]}.cockpit-bak.*", check=False)


async def test_a_node_whose_write_failed_after_its_rename_is_put_back_too(
    lab: LabHandle, node1: LabHandle, nodes: list[NodeWrite]
) -> None:
    """Node 1's edit renames its unit file, then its drop-in's directory refuses: which nodes hold
    new text is read from the hosts, so node 1's unit file is put back beside node 0's."""
    dropin = f"{DIR}/{NODES[1]}.d"
    node1.ssh("mkdir", "-p", dropin)
    node1.ssh("tee", f"{dropin}/env.conf", input="[Service]\nEnvironment=COCKPIT_STANDIN_NOTE=1\n")
    node1.ssh("systemctl", "daemon-reload")
    head, other = nodes
    found = await read_deployment(other.host, Target(other.host.name, NODES[1]), catalogs=CatalogCache(), python=False)
    assert found.unit is not None and f"{dropin}/env.conf" in found.unit.texts, found.problems
    both = with_files(
        found.unit.set_flag("--mem-fraction-static", "0.8"),
        {f"{dropin}/env.conf": "[Service]\nEnvironment=COCKPIT_STANDIN_NOTE=2\n"},
    )
    other = NodeWrite(other.node, other.host, other.cfg, found.unit, both)
    assert list(other.new) == [f"{DIR}/{NODES[1]}", f"{dropin}/env.conf"]  # the unit file first
    before = [unit_text(lab, NODES[0]), unit_text(node1, NODES[1])]
    node1.ssh("sh", "-c", f"mount --bind {dropin} {dropin} && mount -o remount,ro,bind {dropin}")
    try:
        with pytest.raises(GroupWriteFailed) as failed:
            await write_group([head, other])
    finally:
        node1.ssh("umount", dropin, check=False)
        node1.ssh("rm", "-rf", dropin, check=False)
    assert "read-only file system" in str(failed.value) and "Put back as they were: n0, n1." in str(failed.value)
    assert failed.value.unchanged
    assert [unit_text(lab, NODES[0]), unit_text(node1, NODES[1])] == before
