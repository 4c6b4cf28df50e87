"""One unit's status with its readiness, read as `cockpit status` reads it: systemd's status, with
the health answer, the unit's processes, its start's health lines and the GPU table asked beside
it, each on a channel of its own (the host's systemd names the cgroup and the start). Shared by
`cockpit status` (one unit, or every node of a deployment) and the group restart's watch.

The endpoint asked is one that generates a token, as the app's and the fleet's are: `/health`
where the unit's release makes it the generating handler, else `/health_generate`. Which it is
comes from the release's own source, found through the service's Python, and the unit's
environment (cockpit.sglang.catalog.generation), read first; the answer says what it cost: how
long it took, whether it generated a token, and why not `/health` where it was not asked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.sglang.catalog.generation import HealthRoutes, generation
from cockpit.sglang.deployments.deployment import Deployment, read_deployment
from cockpit.sglang.server.health import DEGRADED, DOWN, WATCHED_PATTERN, HealthScan, Signals, assess
from cockpit.sglang.server.ranks import node_rank, ranks_on_node
from cockpit.systemd import gpu_use, journal, processes
from cockpit.systemd.endings import PATTERN as ENDINGS_PATTERN
from cockpit.systemd.endings import Endings
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.readiness import GENERATE, HEALTH, HUNG_AFTER_S, LastAnswer, Probe, own_probe
from cockpit.systemd.remote_unit import service_python
from cockpit.systemd.status import UnitStatus, fetch
from cockpit.targets import Target

HEALTH_LINES = 500  # of the unit's journal lines that say something of its health or its starts: the last ones
# What the unit's journal is read for: each start's health lines (cockpit.sglang.server.health), and
# systemd's lines of its starts and ends (cockpit.systemd.endings: how the start before this
# one ended, which systemd forgets at the next start, and whether a stop job ended it).
SAID_PATTERN = f"{WATCHED_PATTERN}|{ENDINGS_PATTERN}"
GROUP_GRACE_S = 1.0  # a broken group's reads still running after this wait on a health answer


async def read_status(
    host: Host,
    target: Target,
    catalogs: CatalogCache,
    generate: bool = False,
    gpus: bool = True,
    asked: dict[tuple[str, str], LastAnswer] | None = None,
) -> tuple[UnitStatus, GpuUse]:
    """One unit's status with its readiness assessed, and (with `gpus`) its host's GPU table. What
    needs nothing of the status is asked beside it, each on a channel of its own: the GPU table,
    the unit's processes and its start's health lines (the host's systemd says which cgroup and
    which start). A watch that polls readiness alone leaves nvidia-smi out, and one that polls
    for ever hands `asked`, each (host, unit)'s last health answer, kept between its reads: an
    endpoint that generates a token is then asked again only when that answer is due
    (readiness.LastAnswer: at most every 15 s once it answered), its age said meanwhile."""

    async def members() -> processes.UnitProcesses | None:
        try:
            return await processes.read(host, None, target.unit)
        except HostError:
            return None

    gpus_read = asyncio.ensure_future(gpu_use.read_or_say(host) if gpus else _not_read())
    members_read = asyncio.ensure_future(members())
    said_read = asyncio.ensure_future(journal.matching(host, target.unit, SAID_PATTERN, HEALTH_LINES, timeout=5))
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
            now = time.monotonic()
            last = asked.get((host.name, target.unit)) if asked is not None else None
            same = last is not None and (last.invocation, last.address) == (status.invocation_id, found.address)
            if last is not None and same and not last.due(now):
                return last.aged(now), ranks, False
            answered = await _ask(host, target.unit, found, catalogs, generate)
            if asked is not None:
                asked[(host.name, target.unit)] = LastAnswer(status.invocation_id, found.address, answered, now)
            return answered, ranks, False

        scan, schedulers, worker = HealthScan(), None, False
        if status.active_state == "active":
            (health, schedulers, worker), members_now, said = await asyncio.gather(answer(), members_read, said_read)
            status = replace(status, ready=health.ok if health else None, health=health, processes=members_now)
        else:
            said = await said_read
        if said is not None:
            scan.feed(said)
            status = Endings().feed(said).of(status)
            if status.processes is not None:
                scan.saw(status.invocation_id, status.processes, schedulers)
        signals = scan.of(status.invocation_id)
        told = assess(
            status,
            signals,
            status.health,
            status.processes,
            schedulers=schedulers,
            journal=said is not None,
            worker_node=worker,
        )
        status = replace(status, readiness=told.state, readiness_reason=told.reason, ready_since=signals.ready_at)
        return status, await gpus_read
    finally:
        for side in (gpus_read, members_read, said_read):
            side.cancel()
        await asyncio.gather(gpus_read, members_read, said_read, return_exceptions=True)


async def read_group(
    host_of: Callable[[str], Host],
    targets: Sequence[Target],
    catalogs: CatalogCache,
    *,
    generate: bool = False,
    gpus: bool = True,
    asked: dict[tuple[str, str], LastAnswer] | None = None,
) -> list[tuple[UnitStatus, GpuUse] | CockpitError]:
    """Every node's `read_status` at once (node 0 first), each its own or the CockpitError it
    raised. A node down while another runs makes the group broken (cockpit.sglang.deployments.nodes_status)
    whatever the others' health says, and then node 0's /health, which generates a token, gets
    no answer (its ranks block in the collective the token needs; a generating endpoint waits
    20 s): so each node's systemd state is read beside the reads, and where it already says
    broken, a read still waiting on its health answer after GROUP_GRACE_S is not waited for
    (that node is said as it runs, its health not asked)."""

    async def one(target: Target) -> tuple[UnitStatus, GpuUse]:
        return await read_status(host_of(target.host), target, catalogs, generate, gpus, asked)

    async def bare(target: Target) -> UnitStatus | None:
        try:
            return await fetch(host_of(target.host), target.unit)
        except CockpitError:
            return None

    reads = [asyncio.ensure_future(one(t)) for t in targets]
    try:
        states = await asyncio.gather(*(bare(t) for t in targets))
        known = [s for s in states if s is not None]
        down = any(assess(s, Signals(), None, None).state == DOWN for s in known)
        broken = down and any(s.active_state == "active" for s in known)
        if reads:
            await asyncio.wait(reads, timeout=GROUP_GRACE_S if broken else None)
        return [
            _read_or_running(read, state, target) for read, state, target in zip(reads, states, targets, strict=True)
        ]
    finally:
        for read in reads:
            read.cancel()
        await asyncio.gather(*reads, return_exceptions=True)


def _read_or_running(
    read: asyncio.Future[tuple[UnitStatus, GpuUse]], state: UnitStatus | None, target: Target
) -> tuple[UnitStatus, GpuUse] | CockpitError:
    """A node's read where it ended, else its systemd state, its health not waited for."""
    if read.done():
        error = read.exception()
        if isinstance(error, CockpitError):
            return error
        return read.result()
    if state is None:
        return CockpitError(f"{target.unit} on {target.host}: no status within {GROUP_GRACE_S:g} s")
    why = "another node of its launch is down: its ranks block in their next collective (its health not waited for)"
    return replace(state, readiness=DEGRADED, readiness_reason=why), GpuUse(missing="not read")


async def _ask(host: Host, unit: str, found: Deployment, catalogs: CatalogCache, generate: bool) -> Probe:
    """The answer of an endpoint that generates a token, as the app and the fleet ask one:
    `/health` where the unit's release makes it the generating handler, else `/health_generate`
    (a `/health` that asks the model nothing answers 200 from a hung server too), and with
    `generate`, `/health_generate` itself. The answer says what it cost, and why not `/health`."""
    routes = await _routes(host, found, catalogs)
    environment = found.unit.environment() if found.unit is not None else {}
    health = generation(routes, environment, HEALTH)
    path = HEALTH if not generate and health.generates is not False else GENERATE
    cost = health if path == HEALTH else generation(routes, environment, GENERATE)
    said = await own_probe(host, unit, *found.address, path, timeout=HUNG_AFTER_S)
    if path == GENERATE and not generate and cost.generates:
        instead = f"not /health, which asks the model nothing: {health.why}"
        said = replace(said, detail="; ".join(d for d in (said.detail, instead) if d))
    return replace(said, generates=cost.generates, generation=cost.why)


async def _routes(host: Host, found: Deployment, catalogs: CatalogCache) -> HealthRoutes | None:
    """What the unit's release says of its health endpoints, from its source where the service's
    Python keeps it; None where it cannot be read (`/health_generate` generates by its name all
    the same)."""
    if found.unit is None or found.interpreter is None:
        return None
    try:
        root = (await service_python(host, found.interpreter, found.unit)).purelib
        return await catalogs.health_routes(host, root) if root else None
    except (HostError, CockpitError):
        return None


async def _not_read() -> GpuUse:
    return GpuUse(missing="not read")
