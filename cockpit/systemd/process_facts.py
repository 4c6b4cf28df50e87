"""Whose a host process is: its cgroup (so its unit), parent, age and systemd INVOCATION_ID,
read for a list of PIDs in the same round trip as what named them (nvidia-smi's GPU
processes, `ss`'s listeners).

The invocation ID tells a left-over of an earlier start of a unit from the start that runs
now, even after the process left the unit's cgroup (SGLang's schedulers reparented to PID 1
after a crash, sglang #23627): systemd puts it in every service process's environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.remote.base import Host, HostError

SEP, PID_MARK, ENV_MARK = "\x1e", "\x1f", "\x1d"
NO_TOOL = 127  # what a probe script exits with when the host has not got its tool

# Shell: a SEP line, uptime and clock ticks, then for each PID in $pids a PID_MARK line, its
# stat line and its cgroup lines, then an ENV_MARK line and each INVOCATION_ID found (where this
# user may read the environment) as grep -z -H prints it: `/proc/PID/environ:INVOCATION_ID=...`,
# NUL-ended. Files are read with the shell's own `read`, and every environment with one grep: a
# process per file made it 42 ms for the nine processes of an 8-rank start, the most of the GPU
# table's round trip.
FACTS = """
printf '\\036\\n'
read -r up _ < /proc/uptime; printf '%s\\n' "$up"
getconf CLK_TCK
environs=
for pid in $pids; do
  printf '\\037%s\\n' "$pid"
  { read -r line < "/proc/$pid/stat" && printf '%s\\n' "$line"; } 2>/dev/null || echo
  { while read -r line; do printf '%s\\n' "$line"; done < "/proc/$pid/cgroup"; } 2>/dev/null
  environs="$environs /proc/$pid/environ"
done
printf '\\035\\n'
[ -z "$environs" ] || grep -a -z -H '^INVOCATION_ID=' $environs 2>/dev/null || true
"""


@dataclass(frozen=True)
class Viewpoint:
    """Whose side: a unit, its start that runs now, and the starts of it seen before (the
    journal's and the status poll's invocation IDs)."""

    unit: str
    invocation: str | None = None  # the start that is up now (None: the unit is not running)
    earlier: frozenset[str] = frozenset()


class Owned:
    """Whose a process is, for a record that holds its facts as `cgroup`, `ppid`, `invocation`
    and `start_ticks` (a GPU process, a listener, the facts alone)."""

    cgroup: str | None
    ppid: int | None
    invocation: str | None
    start_ticks: int | None

    @property
    def unit(self) -> str | None:
        return unit_of(self.cgroup) if self.cgroup is not None else None

    def earlier_start(self, view: Viewpoint) -> bool:
        """A process of an earlier start of the view's unit, in its cgroup or out of it."""
        ours = self.invocation is not None and (self.invocation in view.earlier or self.unit == view.unit)
        return ours and self.invocation != view.invocation

    def owner(self, view: Viewpoint) -> str:
        """Whose the process is, said from the view's unit."""
        if self.cgroup is None:
            return "gone, or not readable here"
        if self.earlier_start(view):
            parent = "PID 1's child" if self.ppid == 1 else f"child of {self.ppid}"
            left = "" if self.unit == view.unit else f", out of its cgroup (now {self.cgroup})"
            return f"{parent} from {view.unit}'s earlier invocation {str(self.invocation)[:12]}{left}"
        if self.unit is None:
            return f"no unit (cgroup {self.cgroup})"
        if (other := self.other_unit(view)) is not None:
            return f"unit {other}"
        if view.invocation is None:
            return f"left in {view.unit}'s cgroup while it is not running"
        return view.unit

    def outside(self, view: Viewpoint) -> bool:
        """Not a process of the unit's running start: a restart of the unit leaves it be."""
        return self.owner(view) != view.unit

    def other_unit(self, view: Viewpoint) -> str | None:
        """The unit other than the view's whose cgroup holds the process now: ending it takes
        a part of that running unit away (TP0 of another server takes the server down). None
        for a process in no unit, in the view's unit, or left over from its earlier start."""
        if self.cgroup is None or self.unit in (None, view.unit) or self.earlier_start(view):
            return None
        return self.unit


@dataclass(frozen=True)
class Facts(Owned):
    cgroup: str | None = None  # None: the process is gone, or this user may not read it
    ppid: int | None = None
    age_s: float | None = None
    invocation: str | None = None
    start_ticks: int | None = None  # /proc/PID/stat's starttime: with the PID, which process it is


async def probe(host: Host, script: str, tool: str) -> str | None:
    """What `script` printed, on a channel of its own (the status poll's query channel would
    wait behind it); None where the host has no `tool` (the script exits NO_TOOL)."""
    result = await host.run(["sh", "-c", script], timeout=30)
    if result.returncode == NO_TOOL:
        return None
    if not result.ok:
        said = (result.text + "\n" + result.error_text).strip().splitlines()
        raise HostError(f"{tool} on {host.name} failed ({result.returncode}): {said[-1] if said else 'no output'}")
    return result.text


def unit_of(cgroup: str) -> str | None:
    """The unit of a cgroup v2 path: its last component that names a unit (a service or a
    scope inside a slice); None for the root, a slice alone, or a path outside systemd."""
    for part in reversed(cgroup.strip("/").split("/")):
        if part.endswith((".service", ".scope", ".socket", ".mount")):
            return part
    return None


def number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _stat(line: str, uptime: float | None, ticks: int | None) -> tuple[int | None, int | None, float | None]:
    """(ppid, start in clock ticks after boot, age in s) from a /proc/PID/stat line; the name
    field can hold spaces and ')'."""
    if ")" not in line:
        return None, None, None
    fields = line.rsplit(")", 1)[1].split()
    if len(fields) < 20:
        return None, None, None
    ppid, start = number(fields[1]), number(fields[19])
    age = uptime - start / ticks if uptime is not None and ticks and start is not None else None
    return ppid, start, (max(age, 0.0) if age is not None else None)


def parse_facts(text: str) -> dict[int, Facts]:
    """What FACTS printed (after its SEP line)."""
    blocks_text, _, environs = text.partition(ENV_MARK)
    head, *blocks = blocks_text.split(PID_MARK)
    numbers = head.split()
    uptime = float(numbers[0]) if numbers and numbers[0].replace(".", "", 1).isdigit() else None
    ticks = number(numbers[1]) if len(numbers) > 1 else None
    invocations = {}
    for found in environs.split("\0"):  # /proc/PID/environ:INVOCATION_ID=...
        path, _, variable = found.strip("\n").partition(":")
        pid = number(path.removeprefix("/proc/").removesuffix("/environ"))
        if pid is not None and variable.startswith("INVOCATION_ID="):
            invocations[pid] = variable.split("=", 1)[1]
    facts = {}
    for block in blocks:
        lines = block.splitlines()
        pid = number(lines[0]) if lines else None
        if pid is None:
            continue
        ppid, start, age = _stat(lines[1] if len(lines) > 1 else "", uptime, ticks)
        cgroup = next((ln.split("::", 1)[1] for ln in lines[2:] if ln.startswith("0::")), None)
        facts[pid] = Facts(cgroup, ppid, age, invocations.get(pid), start)
    return facts
