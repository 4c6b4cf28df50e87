"""The readiness of a launch over several nodes, as one thing.

Node 0 serves the API; the other nodes run schedulers and a dummy `/health` that answers 200
whatever they do (their readiness is their schedulers: cockpit.sglang.server.health). The group is
ready only when node 0 is ready and every other node's schedulers run. When one node is down
while another still runs, the group is broken: SGLang's other nodes block in their next
collective until their watchdogs end them (sglang #3099), node 0's `/health` (which generates a
token from 0.5.2) answering nothing meanwhile, so a group's read does not wait for it
(cockpit.sglang.deployments.status_read's read_group).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cockpit.sglang.server.health import DOWN, READY, Readiness
from cockpit.systemd.status import UnitStatus

BROKEN = "broken"


def group_readiness(nodes: Sequence[tuple[str, UnitStatus]]) -> Readiness:
    """One readiness for the nodes (node 0 first), naming the node that decides it: where
    several have ended, the one that ended first (a group restart's poll on a busy jump box
    can find node 0 already dead of node 1's crash, and must not blame it)."""
    down = [(node, s) for node, s in nodes if s.readiness == DOWN]
    running = [node for node, s in nodes if s.active_state == "active"]
    if down and running:
        node, status = down[0]
        one = len(running) == 1
        return Readiness(
            BROKEN,
            f"{node} ({status.unit} on {status.host}) is down: {status.readiness_reason or status.active_state}; "
            f"{', '.join(running)} still run{'s' if one else ''}, and {'its' if one else 'their'} ranks block "
            "in their next collective until the watchdogs end them: restart the group",
        )
    left = _left_the_launch(nodes)
    if left is not None:
        return left
    ended = sorted(
        ((s.exec_main_exit, i) for i, (_, s) in enumerate(nodes) if s.active_state != "active" and s.exec_main_exit),
    )
    if ended:  # the first to end decides it: the others' ranks died of it (each host's clock)
        nodes = [nodes[ended[0][1]], *(n for i, n in enumerate(nodes) if i != ended[0][1])]
    for node, status in nodes:
        if status.readiness != READY:
            return Readiness(status.readiness or DOWN, f"{node}: {status.readiness_reason or status.active_state}")
    head = nodes[0][0] if nodes else "?"
    return Readiness(READY, f"{head} is ready and every node's schedulers run")


JOIN_SLACK_S = 2.0  # the hosts' clocks, NTP-close, may differ by this much


def _left_the_launch(nodes: Sequence[tuple[str, UnitStatus]]) -> Readiness | None:
    """A node whose running start began after node 0's start was ready has left its launch
    (systemd restarted it alone): no node can join a launch whose distributed set-up is done, so
    node 0's ranks wait on peers that are gone, `/health` answering until they block. Broken until
    the group restarts. Needs node 0's ready line, read from its journal."""
    if not nodes:
        return None
    head, first = nodes[0]
    if first.ready_since is None or first.active_state != "active":
        return None
    for node, status in nodes[1:]:
        began = status.exec_main_start
        if status.active_state == "active" and began is not None and began > first.ready_since + JOIN_SLACK_S:
            return Readiness(
                BROKEN,
                f"{node} ({status.unit} on {status.host}) started again alone at {_clock(began)}, after {head}'s "
                f"start was ready at {_clock(first.ready_since)}: it has left the launch, and {head}'s ranks wait "
                "on peers that are gone: restart the group",
            )
    return None


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
