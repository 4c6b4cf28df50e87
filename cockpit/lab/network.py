"""The lab's network: its own namespace joined to the jump box by one veth pair.

Lab N gets 10.213.N.0/30: the jump box side is .1, the lab is .2. The lab's only route is
to 10.213.0.0/16, and forwarding is switched on for the lab veths alone (never globally),
so labs reach each other (one lab can be another's ProxyJump) and nothing else. An
`unreachable` route for 10.213.0.0/16 (below every lab's own) keeps a lab whose link is
down, or that is gone, from being looked for through the jump box's default route: the
connection fails at once with "no route to host", as it would for a host whose network is
down, and nothing leaves the machine.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from cockpit.errors import CockpitError

PREFIX = "10.213"


@dataclass(frozen=True)
class LabNet:
    name: str
    index: int

    @property
    def netns(self) -> str:
        return f"cockpit-lab-{self.name}"

    @property
    def host_if(self) -> str:
        return f"cklab{self.index}"  # at most 15 characters, unique per running lab

    @property
    def host_address(self) -> str:
        return f"{PREFIX}.{self.index}.1"

    @property
    def address(self) -> str:
        return f"{PREFIX}.{self.index}.2"

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise CockpitError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc


UNREACHABLE_METRIC = "4242"


def create(net: LabNet) -> None:
    remove(net)
    _ip("route", "replace", "unreachable", f"{PREFIX}.0.0/16", "metric", UNREACHABLE_METRIC)
    _ip("netns", "add", net.netns)
    _ip("link", "add", net.host_if, "type", "veth", "peer", "name", "host0", "netns", net.netns)
    _ip("addr", "add", f"{net.host_address}/30", "dev", net.host_if)
    _ip("link", "set", net.host_if, "up")
    _ip("-n", net.netns, "addr", "add", f"{net.address}/30", "dev", "host0")
    _ip("-n", net.netns, "link", "set", "host0", "up")
    _ip("-n", net.netns, "link", "set", "lo", "up")
    _ip("-n", net.netns, "route", "add", f"{PREFIX}.0.0/16", "via", net.host_address)
    Path(f"/proc/sys/net/ipv4/conf/{net.host_if}/forwarding").write_text("1\n")


def remove(net: LabNet) -> None:
    """Delete the namespace (which takes the veth pair with it); safe when already gone."""
    if Path(net.netns_path).exists():
        _ip("netns", "delete", net.netns, check=False)
    if Path(f"/sys/class/net/{net.host_if}").exists():
        _ip("link", "delete", net.host_if, check=False)


def set_link(net: LabNet, up: bool) -> None:
    """Take the jump box's end of the link down or up (fault tests)."""
    _ip("link", "set", net.host_if, "up" if up else "down")
