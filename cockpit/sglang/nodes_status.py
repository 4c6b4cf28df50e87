"""The readiness of a launch over several nodes, as one thing.

Node 0 serves the API; the other nodes run schedulers and a dummy `/health` that answers 200
whatever they do (their readiness is their schedulers: cockpit.sglang.health). The group is
ready only when node 0 is ready and every other node's schedulers run. When one node is down
while another still runs, the group is broken: SGLang's other nodes block in their next
collective until their watchdogs end them (sglang #3099), node 0's `/health` (which generates a
token from 0.5.2) answering nothing meanwhile, so a group's read does not wait for it
(cockpit.sglang.status_read's read_group).
"""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.sglang.health import DOWN, READY, Readiness
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
