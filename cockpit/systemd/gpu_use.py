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

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from cockpit.remote.base import Host, HostError
from cockpit.systemd.process_facts import FACTS, NO_TOOL, SEP, Facts, Owned, Viewpoint, number, parse_facts, probe

GPU_QUERY = "--query-gpu=index,uuid,memory.used,memory.total"
APPS_QUERY = "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid"
FORMAT = "--format=csv,noheader,nounits"

# One round trip: both queries at once (each is an NVML start, ~22 ms on an H200 host; the GPU
# rows go straight out while the process rows are kept to follow them), then each PID's facts
# (process_facts.FACTS).
SCRIPT = (
    f"""
command -v nvidia-smi >/dev/null 2>&1 || exit {NO_TOOL}
nvidia-smi {GPU_QUERY} {FORMAT} & gpus=$!
apps=$(nvidia-smi {APPS_QUERY} {FORMAT}) || {{ said=$?; wait $gpus; exit $said; }}
wait $gpus || exit
printf '\\036\\n'
printf '%s\\n' "$apps"
pids=$(printf '%s\\n' "$apps" | cut -d, -f1 | sort -un)
"""
    + FACTS
)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    used_mib: int
    total_mib: int


@dataclass(frozen=True)
class GpuProcess(Owned):
    """One process's memory on one GPU (a process on two GPUs is two of these, as nvidia-smi
    lists it), with whose it is (process_facts)."""

    pid: int
    name: str
    used_mib: int | None  # None: nvidia-smi could not say ([N/A])
    gpu: int | None  # the GPU's index (None: its uuid was not in the GPU list)
    gpu_uuid: str
    cgroup: str | None = None  # None: gone, or not readable here
    ppid: int | None = None
    age_s: float | None = None
    invocation: str | None = None  # systemd's INVOCATION_ID in its environment
    start_ticks: int | None = None  # /proc/PID/stat's starttime: with the PID, which process it is

    @classmethod
    def of(
        cls, pid: int, name: str, used_mib: int | None, gpu: int | None, gpu_uuid: str, known: Facts, aged_s: float
    ) -> GpuProcess:
        """nvidia-smi's row with the PID's facts, read `aged_s` seconds before the row."""
        return cls(
            pid=pid,
            name=name,
            used_mib=used_mib,
            gpu=gpu,
            gpu_uuid=gpu_uuid,
            cgroup=known.cgroup,
            ppid=known.ppid,
            age_s=None if known.age_s is None else known.age_s + aged_s,
            invocation=known.invocation,
            start_ticks=known.start_ticks,
        )


@dataclass
class GpuUse:
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    missing: str | None = None  # why there is nothing to show ("no nvidia-smi on H")
    no_tool: bool = False  # the host has no nvidia-smi: nothing to read again
    read_at: float | None = None  # the jump box's clock when the read began: what it says was true then

    def to_json(self, view: Viewpoint) -> list[dict]:
        """`cockpit status --json`'s `gpus`: one entry per GPU, with who holds it."""
        out = []
        for gpu in self.gpus:
            held = []
            for p in self.processes:
                if p.gpu == gpu.index:
                    held.append({**asdict(p), "unit": p.unit, "owner": p.owner(view), "outside": p.outside(view)})
            out.append({**asdict(gpu), "processes": held})
        return out


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]


def parse(text: str) -> GpuUse:
    """The script's output; also nvidia-smi's two outputs alone, joined by a SEP line."""
    parts = text.split(SEP + "\n")
    gpus = [
        Gpu(int(r[0]), r[1], number(r[2]) or 0, number(r[3]) or 0)
        for r in _rows(parts[0])
        if len(r) >= 4 and r[0].isdigit()
    ]
    by_uuid = {g.uuid: g.index for g in gpus}
    apps = [r for r in _rows(parts[1]) if len(r) >= 4 and r[0].isdigit()] if len(parts) > 1 else []
    facts = parse_facts(parts[2]) if len(parts) > 2 else {}
    processes = []
    for r in apps:
        pid = int(r[0])
        name = ", ".join(r[1:-2])  # a process name with a comma spans cells
        processes.append(GpuProcess.of(pid, name, number(r[-2]), by_uuid.get(r[-1]), r[-1], facts.get(pid, Facts()), 0))
    return GpuUse(gpus, processes)


async def read(host: Host) -> GpuUse:
    """The host's GPUs and who holds them; `missing` says why not where it has no nvidia-smi."""
    began = time.time()
    text = await probe(host, SCRIPT, "nvidia-smi")
    if text is None:
        return GpuUse(missing=f"no nvidia-smi on {host.name}", no_tool=True)
    use = parse(text)
    use.read_at = began
    return use


async def read_or_say(host: Host) -> GpuUse:
    """`read`, with a failure as `missing` (a status is never lost to its GPU table)."""
    try:
        return await read(host)
    except HostError as e:
        return GpuUse(missing=str(e))


def by_pid(processes: Iterable[GpuProcess]) -> dict[int, list[GpuProcess]]:
    """A process's rows (one per GPU it holds memory on), in the order nvidia-smi gave them."""
    out: dict[int, list[GpuProcess]] = {}
    for p in processes:
        out.setdefault(p.pid, []).append(p)
    return out


def held_on(rows: list[GpuProcess], amount: Callable[[int | None], str]) -> str:
    """`70000 MiB on each of GPUs 0,1`, `… on GPU 2`, or `… in all on GPUs 0,1` where the
    amounts differ; `amount` words MiB (`70000 MiB`, `68.4 GiB`)."""
    gpus = ",".join(str(p.gpu) for p in rows)
    if len({p.used_mib for p in rows}) > 1:
        return f"{amount(sum(p.used_mib or 0 for p in rows))} in all on GPUs {gpus}"
    return f"{amount(rows[0].used_mib)} on {'each of GPUs' if len(rows) > 1 else 'GPU'} {gpus}"


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
