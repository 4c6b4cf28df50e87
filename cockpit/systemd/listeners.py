"""Who listens on a TCP port of the host, by systemd unit: `ss -Hltnp --cgroup`, with each
PID's facts (process_facts) in the same round trip.

A tokenizer worker that outlived `kill -9` keeps SGLang's `--port` (sglang #15165), and the
next start fails to bind it. `ss` names a listener's PID only to root or to its owner; a port
held by a process this user may not see is still named, without a PID, and with `--cgroup`
(iproute2 5.9 and later, on a kernel that keeps a socket's cgroup) with the cgroup of the
process that opened it, which any user may read: so whose a port is can be said on a host where
the login is not root. An older `ss` is asked without it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from cockpit.remote.base import Host
from cockpit.systemd.process_facts import FACTS, NO_TOOL, SEP, Facts, Owned, Viewpoint, parse_facts, probe

SCRIPT = (
    f"""
command -v ss >/dev/null 2>&1 || exit {NO_TOOL}
out=$(ss -Hltnp --cgroup 2>/dev/null) || out=$(ss -Hltnp) || exit
printf '%s\\n' "$out"
pids=$(printf '%s\\n' "$out" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -un)
"""
    + FACTS
)
_USER = re.compile(r'\("((?:[^"\\]|\\.)*)",pid=(\d+),fd=\d+\)')
_CGROUP = re.compile(r"\scgroup:(/\S*)\s*$")  # the last word: a process name is quoted inside users:(...)
_ANY = {"0.0.0.0", "::", "*"}


@dataclass(frozen=True)
class PortHolder(Owned):
    port: int
    address: str  # as ss prints it: 127.0.0.1, 0.0.0.0, [::], *
    pid: int | None  # None: ss did not say (another user's process, seen without root)
    name: str
    cgroup: str | None = None  # the process's; where it is not read, the one the socket was opened in
    ppid: int | None = None
    age_s: float | None = None
    invocation: str | None = None
    start_ticks: int | None = None

    def owner(self, view: Viewpoint) -> str:
        if self.pid is not None:
            return super().owner(view)
        if self.unit is not None:
            return f"a process of {self.unit} this login may not see"
        return "a process this login may not see"

    def outside(self, view: Viewpoint) -> bool:
        if self.pid is None:  # only the socket's cgroup is known: the unit's own while it runs
            return self.unit != view.unit or view.invocation is None
        return super().outside(view)

    def who(self) -> str:
        """`PID 62 (python) of sglang-demo.service`, as far as this login sees it."""
        process = f"PID {self.pid} ({self.name})" if self.pid is not None else "a process"
        where = self.unit or (f"cgroup {self.cgroup}" if self.cgroup else "a cgroup not readable here")
        return f"{process} of {where}"

    def takes(self, address: str) -> bool:
        """Whether a connection to `address` on its port reaches this listener: its own
        address, any address (0.0.0.0, [::], *), or a name that is not an IP address."""
        mine = self.address.strip("[]").partition("%")[0]
        wanted = address.strip("[]")
        return mine in _ANY or mine == wanted or not _is_ip(wanted)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


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
        socket_cgroup = found.group(1) if (found := _CGROUP.search(line)) else None
        for name, pid in users or [("", "")]:
            known = facts.get(int(pid), Facts()) if pid else Facts()
            holders.append(
                PortHolder(
                    where[1],
                    where[0],
                    int(pid) if pid else None,
                    name,
                    known.cgroup or socket_cgroup,
                    known.ppid,
                    known.age_s,
                    known.invocation,
                    known.start_ticks,
                )
            )
    return holders


async def listening(host: Host) -> list[PortHolder] | None:
    """Every TCP listener of the host; None where it has no `ss`."""
    text = await probe(host, SCRIPT, "ss")
    return parse(text) if text is not None else None


async def read(host: Host) -> list[PortHolder]:
    """Every TCP listener of the host (empty where it has no `ss`)."""
    return await listening(host) or []
