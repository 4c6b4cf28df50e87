"""Restart a launch over nodes as one thing, and record it as one attempt.

Restarting one node of a running launch leaves the others waiting on a peer that comes back as a
stranger; the one rule people keep from Kubernetes' LeaderWorkerSet is "restart the whole group
when one member restarts". So: stop every node, check that each one's cgroup is empty (a rank
left over holds its GPU and its port), start node 0 and then the others, and watch them together
until the group is ready (node 0 ready, every other node's schedulers running) or a node is down.
One attempt in the deployment's own timeline says how it went, naming the node that decided it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.attempts import Attempt, AttemptLog
from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalogs import CatalogCache
from cockpit.sglang.health import DOWN, READY
from cockpit.sglang.nodes_status import BROKEN, group_readiness
from cockpit.sglang.status_read import read_status
from cockpit.systemd import processes
from cockpit.systemd.control import UnitControl
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


def attempt_log(deployment: str) -> AttemptLog:
    """The deployment's own timeline, beside its units' (`deployment:NAME` in place of a host)."""
    return AttemptLog(f"deployment:{deployment}", deployment)


async def restart_group(
    nodes: Sequence[GroupNode],
    log: AttemptLog,
    catalogs: CatalogCache,
    *,
    timeout: float = 900.0,
    note: str = "",
) -> Attempt:
    """Stop all, check all stopped, start node 0 then the others, watch to the group's ready."""
    attempt = log.new(
        flags_before={},
        flags_after={},
        texts={},
        previous_texts={},
        note=note or f"group restart of {', '.join(n.node for n in nodes)}",
    )
    started = time.monotonic()
    try:
        await asyncio.gather(*(n.control.act("stop", n.target.unit) for n in nodes))
        await _all_stopped(nodes)
        for n in nodes:
            await n.control.daemon_reload()
            await n.control.act("start", n.target.unit)
        attempt.outcome, attempt.detail = await _watch(nodes, catalogs, timeout)
    except (CockpitError, HostError) as e:
        attempt.outcome, attempt.detail = "failed", str(e)
    attempt.seconds = round(time.monotonic() - started, 2)
    log.save(attempt)
    return attempt


async def _all_stopped(nodes: Sequence[GroupNode]) -> None:
    """Every node's cgroup empty: no process of the last start left to hold a GPU or a port."""
    deadline = time.monotonic() + STOPPED_WITHIN_S
    while True:
        left = []
        for n in nodes:
            try:
                members = await processes.read(n.host, None, n.target.unit)
            except HostError:
                continue  # no cgroup: nothing left
            if members.titles:
                left.append(f"{n.node}: PID {', '.join(map(str, sorted(members.titles)))}")
        if not left:
            return
        if time.monotonic() > deadline:
            raise CockpitError(f"not every node stopped within {STOPPED_WITHIN_S:.0f} s ({'; '.join(left)})")
        await asyncio.sleep(POLL_S)


async def _watch(nodes: Sequence[GroupNode], catalogs: CatalogCache, timeout: float) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        read = await asyncio.gather(*(read_status(n.host, n.target, catalogs, gpus=False) for n in nodes))
        group = group_readiness([(n.node, status) for n, (status, _) in zip(nodes, read, strict=True)])
        if group.state == READY:
            return "ready", group.reason
        if group.state in (DOWN, BROKEN):
            return "crashed", group.reason
        await asyncio.sleep(POLL_S)
    return "timeout", f"the group was not ready within {timeout:.0f} s"
