"""Who holds each GPU's memory, by systemd unit: the host's GPU processes tied to their units.

After a crash, SGLang's `sglang::scheduler_TP*` workers can outlive their unit, reparented to
PID 1, still holding most of each GPU (sglang #23627); the next start then fails with "The
memory capacity is unbalanced". nvitop shows such a process, but not whose it is. Here each
PID nvidia-smi names is read on the host in the same round trip: its cgroup (so its unit, or
none), its parent (1 for a reparented orphan), its age, and the `INVOCATION_ID` systemd gave
it (so a left-over of an earlier start of the same unit is told from the running one).

The two queries are the real tool's (`--format=csv,noheader,nounits`; the real output of an
H200 is in tests/data/nvidia-smi/). A host without nvidia-smi has no GPU use to show: that is
`GpuUse.missing`, never an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from cockpit.remote.base import Host, HostError

GPU_QUERY = "--query-gpu=index,uuid,memory.used,memory.total"
APPS_QUERY = "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid"
FORMAT = "--format=csv,noheader,nounits"
NO_TOOL = 127  # what the script exits with when the host has no nvidia-smi
SEP, PID_MARK = "\x1e", "\x1f"
UP = ("active", "reloading")  # the unit states in which its invocation is a start that runs

# One round trip: both queries, then for each PID its stat line, cgroup and INVOCATION_ID.
SCRIPT = f"""
command -v nvidia-smi >/dev/null 2>&1 || exit {NO_TOOL}
nvidia-smi {GPU_QUERY} {FORMAT} || exit
printf '\\036\\n'
apps=$(nvidia-smi {APPS_QUERY} {FORMAT}) || exit
printf '%s\\n' "$apps"
printf '\\036\\n'
cut -d' ' -f1 /proc/uptime
getconf CLK_TCK
for pid in $(printf '%s\\n' "$apps" | cut -d, -f1 | sort -un); do
  printf '\\037%s\\n' "$pid"
  cat "/proc/$pid/stat" 2>/dev/null || echo
  cat "/proc/$pid/cgroup" 2>/dev/null
  tr '\\0' '\\n' < "/proc/$pid/environ" 2>/dev/null | grep '^INVOCATION_ID=' || true
done
"""


@dataclass(frozen=True)
class Viewpoint:
    """Whose GPUs: a unit, its current start, and the starts of it seen before (the journal's
    and the status poll's invocation IDs), so a left-over of an earlier start is named as one
    even after it left the unit's cgroup."""

    unit: str
    invocation: str | None = None  # the start that is up now (None: the unit is not running)
    earlier: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    used_mib: int
    total_mib: int


@dataclass(frozen=True)
class GpuProcess:
    """One process's memory on one GPU (a process on two GPUs is two of these, as nvidia-smi
    lists it)."""

    pid: int
    name: str
    used_mib: int | None  # None: nvidia-smi could not say ([N/A])
    gpu: int | None  # the GPU's index (None: its uuid was not in the GPU list)
    gpu_uuid: str
    unit: str | None = None  # the systemd unit its cgroup belongs to (None: no unit, or gone)
    cgroup: str | None = None
    ppid: int | None = None
    age_s: float | None = None
    invocation: str | None = None  # systemd's INVOCATION_ID in its environment

    def owner(self, view: Viewpoint) -> str:
        """Whose it is, said from the view's unit (the unit whose GPUs these are)."""
        if self.cgroup is None:
            return "gone, or not readable here"
        ours = self.invocation is not None and (self.invocation in view.earlier or self.unit == view.unit)
        if ours and self.invocation != view.invocation:
            parent = "PID 1's child" if self.ppid == 1 else f"child of {self.ppid}"
            left = "" if self.unit == view.unit else f", out of its cgroup (now {self.cgroup})"
            return f"{parent} from {view.unit}'s earlier invocation {str(self.invocation)[:12]}{left}"
        if self.unit is None:
            return f"no unit (cgroup {self.cgroup})"
        if self.unit != view.unit:
            return f"unit {self.unit}"
        if view.invocation is None:
            return f"left in {view.unit}'s cgroup while it is not running"
        return view.unit

    def outside(self, view: Viewpoint) -> bool:
        """Not a process of the unit's current start: it will still hold its memory when the
        unit starts again."""
        return self.owner(view) != view.unit


@dataclass
class GpuUse:
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    missing: str | None = None  # why there is nothing to show ("no nvidia-smi on H")

    def to_json(self, view: Viewpoint) -> list[dict]:
        """`cockpit status --json`'s `gpus`: one entry per GPU, with who holds it."""
        out = []
        for gpu in self.gpus:
            held = []
            for p in self.processes:
                if p.gpu == gpu.index:
                    held.append({**asdict(p), "owner": p.owner(view), "outside": p.outside(view)})
            out.append({**asdict(gpu), "processes": held})
        return out


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]


def _unit_of(cgroup: str) -> str | None:
    """The unit of a cgroup v2 path: its last component that names a unit (a service or a
    scope inside a slice); None for the root, a slice alone, or a path outside systemd."""
    for part in reversed(cgroup.strip("/").split("/")):
        if part.endswith((".service", ".scope", ".socket", ".mount")):
            return part
    return None


def _stat(line: str, uptime: float | None, ticks: int | None) -> tuple[int | None, float | None]:
    """(ppid, age in s) from a /proc/PID/stat line; the name field can hold spaces and ')'."""
    if ")" not in line:
        return None, None
    fields = line.rsplit(")", 1)[1].split()
    if len(fields) < 20:
        return None, None
    ppid, start = _int(fields[1]), _int(fields[19])
    age = uptime - start / ticks if uptime is not None and ticks and start is not None else None
    return ppid, (max(age, 0.0) if age is not None else None)


def parse(text: str) -> GpuUse:
    """The script's output; also nvidia-smi's two outputs alone, joined by a SEP line."""
    parts = text.split(SEP + "\n")
    gpus = [
        Gpu(int(r[0]), r[1], _int(r[2]) or 0, _int(r[3]) or 0)
        for r in _rows(parts[0])
        if len(r) >= 4 and r[0].isdigit()
    ]
    by_uuid = {g.uuid: g.index for g in gpus}
    apps = [r for r in _rows(parts[1]) if len(r) >= 4 and r[0].isdigit()] if len(parts) > 1 else []
    facts: dict[int, tuple[int | None, float | None, str | None, str | None]] = {}
    if len(parts) > 2:
        head, *blocks = parts[2].split(PID_MARK)
        numbers = head.split()
        uptime = float(numbers[0]) if numbers and numbers[0].replace(".", "", 1).isdigit() else None
        ticks = _int(numbers[1]) if len(numbers) > 1 else None
        for block in blocks:
            lines = block.splitlines()
            pid = _int(lines[0]) if lines else None
            if pid is None:
                continue
            ppid, age = _stat(lines[1] if len(lines) > 1 else "", uptime, ticks)
            cgroup = next((ln.split("::", 1)[1] for ln in lines[2:] if ln.startswith("0::")), None)
            invocation = next((ln.split("=", 1)[1] for ln in lines[2:] if ln.startswith("INVOCATION_ID=")), None)
            facts[pid] = (ppid, age, cgroup, invocation)
    processes = []
    for r in apps:
        pid = int(r[0])
        ppid, age, cgroup, invocation = facts.get(pid, (None, None, None, None))
        processes.append(
            GpuProcess(
                pid=pid,
                name=", ".join(r[1:-2]),  # a process name with a comma spans cells
                used_mib=_int(r[-2]),
                gpu=by_uuid.get(r[-1]),
                gpu_uuid=r[-1],
                unit=_unit_of(cgroup) if cgroup is not None else None,
                cgroup=cgroup,
                ppid=ppid,
                age_s=age,
                invocation=invocation,
            )
        )
    return GpuUse(gpus, processes)


async def read(host: Host) -> GpuUse:
    """The host's GPUs and who holds them; `missing` says why not where it has no nvidia-smi."""
    result = await host.query(["sh", "-c", SCRIPT])
    if result.returncode == NO_TOOL:
        return GpuUse(missing=f"no nvidia-smi on {host.name}")
    if not result.ok:
        said = result.text.strip().splitlines()
        raise HostError(f"nvidia-smi on {host.name} failed ({result.returncode}): {said[-1] if said else 'no output'}")
    return parse(result.text)


async def read_or_say(host: Host) -> GpuUse:
    """`read`, with a failure as `missing` (a status is never lost to its GPU table)."""
    try:
        return await read(host)
    except HostError as e:
        return GpuUse(missing=str(e))


def summary_lines(use: GpuUse, view: Viewpoint) -> list[str]:
    """Per GPU: used of total, and by whom (the status pane's and `cockpit status`'s lines); a
    holder outside the unit's current start is marked ⚠."""
    if use.missing:
        return [use.missing]
    lines = []
    for gpu in use.gpus:
        held = [p for p in use.processes if p.gpu == gpu.index]
        who = ", ".join(
            f"{'⚠ ' if p.outside(view) else ''}PID {p.pid} ("
            + ("" if p.owner(view) == view.unit else f"{p.owner(view)}, ")
            + f"{p.used_mib if p.used_mib is not None else '?'} MiB)"
            for p in held
        )
        lines.append(f"GPU {gpu.index}: {gpu.used_mib} / {gpu.total_mib} MiB" + (f", {who}" if who else ", free"))
    return lines
