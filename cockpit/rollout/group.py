"""Restart a launch over nodes as one thing, and record it as one attempt.

Restarting one node of a running launch leaves the others waiting on a peer that comes back as a
stranger; the one rule people keep from Kubernetes' LeaderWorkerSet is "restart the whole group
when one member restarts". So: stop every node, check that each one's cgroup is empty (a rank
left over holds its GPU and its port), start node 0 and then the others, and watch them together
until the group is ready (node 0 ready, every other node's schedulers running) or a node is down.
One attempt in the deployment's own timeline says how it went, naming the node that decided it.

An edit of the group is node 0's flag changes carried to every node's unit as read now (each
keeps its `--node-rank`), checked before anything is written (each node's static checks and
what must agree between the nodes), then written to all or none (cockpit.systemd.group_write).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cockpit.attempts import Attempt, AttemptLog
from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.deployments.deployment import read_deployment
from cockpit.sglang.deployments.nodes_status import BROKEN, group_readiness
from cockpit.sglang.deployments.status_read import read_group
from cockpit.sglang.preflight.nodes_preflight import NodeFacts, cross_node_findings, on_node
from cockpit.sglang.preflight.preflight import Finding, check_static, flags_only
from cockpit.sglang.server.health import DOWN, READY
from cockpit.systemd import processes
from cockpit.systemd.control import UnitControl
from cockpit.systemd.group_write import NodeWrite
from cockpit.systemd.unit import Unit, environment_changes
from cockpit.targets import Target

STOPPED_WITHIN_S = 60.0  # SGLang's ranks end within systemd's stop timeout; past this, say who is left
POLL_S = 1.0


@dataclass(frozen=True)
class GroupNode:
    node: str  # the deployment's [units] entry
    target: Target
    host: Host
    cfg: HostConfig

    @property
    def control(self) -> UnitControl:
        return UnitControl(self.host, self.cfg)


NODE_RANK = "--node-rank"


async def node_writes(
    nodes: Sequence[GroupNode], catalogs: CatalogCache, edit: Callable[[Unit], Unit]
) -> list[tuple[NodeWrite, Catalog | None]]:
    """Every node's unit as read now, and as `edit` makes it, with its release's flag catalog."""
    writes = []
    for n in nodes:
        found = await read_deployment(n.host, n.target, catalogs=catalogs, python=True)
        if found.unit is None:
            raise CockpitError(f"{n.node}: {found.problems[0] if found.problems else 'the unit could not be read'}")
        writes.append((NodeWrite(n.node, n.host, n.cfg, found.unit, edit(found.unit)), found.catalog))
    return writes


def checked(writes: Sequence[tuple[NodeWrite, Catalog | None]]) -> list[Finding]:
    """The edited command lines, before any write: each node's static checks, and what must agree
    between the nodes."""
    findings, facts = [], []
    for w, catalog in writes:
        argv = flags_only(w.edited.exec())
        if catalog is not None:
            findings += on_node(check_static(argv, catalog), w.node)
        facts.append(NodeFacts(w.node, w.host.name, argv, catalog))
    return findings + cross_node_findings(facts)


def carried(loaded: Unit, edited: Unit) -> Callable[[Unit], Unit]:
    """Node 0's edit (`loaded` to `edited`) as an edit of any node's unit: each flag and
    `Environment=` variable it set, changed or unset, the same on that node, whose own
    `--node-rank` stays. CockpitError when the edit changed other lines, which a node's own unit
    file may word differently."""
    before, after = loaded.flag_values(), edited.flag_values()
    sets = [(name, value) for name, value in after.items() if name != NODE_RANK and (name, value) not in before.items()]
    unsets = [name for name in before if name not in after and name != NODE_RANK]
    env_sets, env_unsets = environment_changes(loaded, edited)

    def edit(unit: Unit) -> Unit:
        for name, value in sets:
            unit = unit.set_flag(name, value)
        for name in unsets:
            unit = unit.unset_flag(name)
        for key, value in env_sets.items():
            unit = unit.set_env(key, value)
        for key in env_unsets:
            if key in unit.environment():
                unit = unit.unset_env(key)
        return unit

    if edit(loaded).changed() != edited.changed():
        raise CockpitError(
            "the edit changes more than flags and Environment= variables: a deployment's edit carries those "
            "to every node; change the other lines in each node's unit file"
        )
    return edit


def attempt_log(deployment: str, targets: Sequence[Target]) -> AttemptLog:
    """The deployment's own timeline, beside its units' (`deployment:NAME` in place of a host),
    keyed by its nodes (each one's host and unit): two users' `k26` on different hosts once
    shared one file."""
    nodes = "\n".join(f"{t.host}\t{t.unit}" for t in targets)
    return AttemptLog(
        f"deployment:{deployment}", deployment, key=f"{deployment}-{hashlib.sha256(nodes.encode()).hexdigest()[:16]}"
    )


async def restart_group(
    nodes: Sequence[GroupNode],
    log: AttemptLog,
    catalogs: CatalogCache,
    *,
    timeout: float = 900.0,
    note: str = "",
    flags: tuple[dict, dict] = ({}, {}),
    step: Callable[[str], None] = lambda what: None,
) -> Attempt:
    """Stop all, check all stopped, start node 0 then the others, watch to the group's ready;
    `flags`: node 0's before and after, where an edit was written first; `step` hears each
    step as it begins (a node's stop can take its whole TimeoutStopSec, minutes of nothing
    else to see). A read-only node refuses before any node is stopped (one stopped alone would
    leave the others waiting)."""
    _refuse_read_only(nodes, "no node of the group was stopped or started")
    attempt = log.new(
        flags_before=flags[0],
        flags_after=flags[1],
        texts={},
        previous_texts={},
        note=note or f"group restart of {', '.join(n.node for n in nodes)}",
    )
    started = time.monotonic()
    try:
        step("stopping every node")
        await stop_group(nodes)
        step("checking that no process of any node is left")
        await _all_stopped(nodes)
        step("starting node 0, then the others")
        for n in nodes:
            await n.control.daemon_reload()
            await n.control.act("start", n.target.unit)
        step("watching the group to ready")
        attempt.outcome, attempt.detail = await _watch(nodes, catalogs, timeout)
    except (CockpitError, HostError) as e:
        attempt.outcome, attempt.detail = "failed", str(e)
    attempt.seconds = round(time.monotonic() - started, 2)
    log.save(attempt)
    return attempt


def _refuse_read_only(nodes: Sequence[GroupNode], what: str) -> None:
    for n in nodes:
        n.host.refuse_changes(what)


async def stop_group(nodes: Sequence[GroupNode]) -> None:
    """Every node stopped at once; a read-only node refuses before any node is stopped."""
    _refuse_read_only(nodes, "no node of the group was stopped")
    await asyncio.gather(*(n.control.act("stop", n.target.unit) for n in nodes))


async def _all_stopped(nodes: Sequence[GroupNode]) -> None:
    """Every node's cgroup empty: no process of the last start left to hold a GPU or a port. A
    node whose cgroup cannot be read is not stopped: node 0 started beside it would be a launch
    that waits on a peer still running the last one (an unreachable node once counted as stopped)."""
    deadline = time.monotonic() + STOPPED_WITHIN_S
    while True:
        left = []
        for n in nodes:
            try:
                members = await processes.read(n.host, None, n.target.unit)
            except processes.NoCgroup:
                continue  # nothing left
            except HostError as e:
                raise CockpitError(f"{n.node} could not be read after its stop, so no node was started: {e}") from None
            if members.titles:
                left.append(f"{n.node}: PID {', '.join(map(str, sorted(members.titles)))}")
        if not left:
            return
        if time.monotonic() > deadline:
            raise CockpitError(f"not every node stopped within {STOPPED_WITHIN_S:.0f} s ({'; '.join(left)})")
        await asyncio.sleep(POLL_S)


async def _watch(nodes: Sequence[GroupNode], catalogs: CatalogCache, timeout: float) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    hosts = {n.target.host: n.host for n in nodes}
    while time.monotonic() < deadline:
        read = []
        for answer in await read_group(hosts.__getitem__, [n.target for n in nodes], catalogs, gpus=False):
            if isinstance(answer, CockpitError):
                raise answer
            read.append(answer[0])
        group = group_readiness([(n.node, status) for n, status in zip(nodes, read, strict=True)])
        if group.state == READY:
            return "ready", group.reason
        if group.state in (DOWN, BROKEN):
            return "crashed", group.reason
        await asyncio.sleep(POLL_S)
    return "timeout", f"the group was not ready within {timeout:.0f} s"
