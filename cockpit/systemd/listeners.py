"""Who listens on a TCP port of the host, by systemd unit: `ss -Hltnp`, with each PID's facts
(process_facts) in the same round trip.

A tokenizer worker that outlived `kill -9` keeps SGLang's `--port` (sglang #15165), and the
next start fails to bind it. `ss` names a listener's PID only to root or to its owner; a port
held by a process this user may not see is still named, without a PID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.remote.base import Host
from cockpit.systemd.process_facts import FACTS, NO_TOOL, SEP, Facts, Owned, Viewpoint, parse_facts, probe

SCRIPT = (
    f"""
command -v ss >/dev/null 2>&1 || exit {NO_TOOL}
out=$(ss -Hltnp) || exit
printf '%s\\n' "$out"
pids=$(printf '%s\\n' "$out" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -un)
"""
    + FACTS
)
_USER = re.compile(r'\("((?:[^"\\]|\\.)*)",pid=(\d+),fd=\d+\)')


@dataclass(frozen=True)
class PortHolder(Owned):
    port: int
    address: str  # as ss prints it: 127.0.0.1, 0.0.0.0, [::], *
    pid: int | None  # None: ss did not say (another user's process, seen without root)
    name: str
    cgroup: str | None = None
    ppid: int | None = None
    age_s: float | None = None
    invocation: str | None = None
    start_ticks: int | None = None

    def owner(self, view: Viewpoint) -> str:
        return super().owner(view) if self.pid is not None else "a process this login may not see"

    def outside(self, view: Viewpoint) -> bool:
        return self.pid is None or super().outside(view)


def _port_of(local: str) -> tuple[str, int] | None:
    address, _, port = local.rpartition(":")
    return (address, int(port)) if port.isdigit() else None


def parse(text: str) -> list[PortHolder]:
    listing, _, rest = text.partition(SEP + "\n")
    facts = parse_facts(rest) if rest else {}
    holders = []
    for line in listing.splitlines():
        cells = line.split()
        if len(cells) < 4 or (where := _port_of(cells[3])) is None:
            continue
        users = _USER.findall(line)
        for name, pid in users or [("", "")]:
            known = facts.get(int(pid), Facts()) if pid else Facts()
            holders.append(
                PortHolder(
                    where[1],
                    where[0],
                    int(pid) if pid else None,
                    name,
                    known.cgroup,
                    known.ppid,
                    known.age_s,
                    known.invocation,
                    known.start_ticks,
                )
            )
    return holders


async def read(host: Host) -> list[PortHolder]:
    """Every TCP listener of the host (empty where it has no `ss`)."""
    text = await probe(host, SCRIPT, "ss")
    return parse(text) if text is not None else []
