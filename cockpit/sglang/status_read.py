"""One unit's status with its readiness, read as `cockpit status` reads it: systemd's status, with
the health answer, the unit's processes, its start's health lines and the GPU table asked beside
it, each on a channel of its own (the host's systemd names the cgroup and the start). Shared by
`cockpit status` (one unit, or every node of a deployment) and the group restart's watch.

The answer says what it cost: how long it took, and whether the endpoint generated a token for
this unit (cockpit.sglang.generation: the release's own source, found through the service's
Python, and the unit's environment), read while the endpoint is asked.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalogs import CatalogCache
from cockpit.sglang.deployment import Deployment, read_deployment
from cockpit.sglang.generation import Generation, generation
from cockpit.sglang.health import WATCHED_PATTERN, HealthScan, assess
from cockpit.sglang.ranks import node_rank, ranks_on_node
from cockpit.systemd import gpu_use, journal, processes
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.readiness import GENERATE, HEALTH, Probe, own_probe
from cockpit.systemd.remote_unit import service_python
from cockpit.systemd.status import UnitStatus, fetch
from cockpit.targets import Target

HEALTH_LINES = 500  # of this start's journal lines that say something of its health: the last ones


async def read_status(
    host: Host, target: Target, catalogs: CatalogCache, generate: bool = False, gpus: bool = True
) -> tuple[UnitStatus, GpuUse]:
    """One unit's status with its readiness assessed, and (with `gpus`) its host's GPU table. What
    needs nothing of the status is asked beside it, each on a channel of its own: the GPU table,
    the unit's processes and its start's health lines (the host's systemd says which cgroup and
    which start). A watch that polls readiness alone leaves nvidia-smi out."""

    async def members() -> processes.UnitProcesses | None:
        try:
            return await processes.read(host, None, target.unit)
        except HostError:
            return None

    gpus_read = asyncio.ensure_future(gpu_use.read_or_say(host) if gpus else _not_read())
    members_read = asyncio.ensure_future(members())
    said_read = asyncio.ensure_future(journal.matching(host, target.unit, WATCHED_PATTERN, HEALTH_LINES, timeout=5))
    try:
        status = await fetch(host, target.unit)

        async def answer() -> tuple[Probe | None, int | None, bool]:
            """The health answer, where it listens (the config's url, or the unit's own flags)
            and only if the unit's own cgroup listens there; how many scheduler ranks those
            flags put on this node; whether it is a node of rank > 0 (whose /health is a dummy,
            not asked)."""
            found = await read_deployment(host, target, catalogs=catalogs, status=status, python=False)
            flags = found.unit.flag_values() if found.unit else {}
            ranks = ranks_on_node(flags) if found.unit else None
            if node_rank(flags) > 0:
                return None, ranks, True
            path = GENERATE if generate else HEALTH
            said, cost = await asyncio.gather(
                own_probe(host, target.unit, *found.address, path, timeout=10), _generation(host, found, catalogs, path)
            )
            return replace(said, generates=cost.generates, generation=cost.why), ranks, False

        scan, schedulers, read_journal, worker = HealthScan(), None, False, False
        if status.active_state == "active":
            (health, schedulers, worker), members_now, said = await asyncio.gather(answer(), members_read, said_read)
            if said is not None:
                scan.feed(said)
                read_journal = True
            status = replace(status, ready=health.ok if health else None, health=health, processes=members_now)
        signals = scan.of(status.invocation_id)
        told = assess(
            status,
            signals,
            status.health,
            status.processes,
            schedulers=schedulers,
            journal=read_journal,
            worker_node=worker,
        )
        status = replace(status, readiness=told.state, readiness_reason=told.reason)
        return status, await gpus_read
    finally:
        for side in (gpus_read, members_read, said_read):
            side.cancel()
        await asyncio.gather(gpus_read, members_read, said_read, return_exceptions=True)


async def _generation(host: Host, found: Deployment, catalogs: CatalogCache, path: str) -> Generation:
    """Whether asking `path` makes the unit's server generate a token: its release's source,
    where the service's Python keeps it, and the unit's environment. Not known (None) where the
    release cannot be read; `/health_generate` generates by its name all the same."""
    routes = None
    if found.unit is not None and found.interpreter is not None:
        try:
            root = (await service_python(host, found.interpreter, found.unit)).purelib
            routes = await catalogs.health_routes(host, root) if root else None
        except (HostError, CockpitError):
            routes = None
    return generation(routes, found.unit.environment() if found.unit is not None else {}, path)


async def _not_read() -> GpuUse:
    return GpuUse(missing="not read")
