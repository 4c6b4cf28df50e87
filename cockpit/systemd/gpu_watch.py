"""The host's GPU table for as long as the app watches a unit: one `nvidia-smi -q -d MEMORY,PIDS
-l N` on the host, its blocks read as they come (issue 29: what the cockpit costs the GPU host).

The table was read every 5 s by a fresh channel running a shell, two `nvidia-smi` queries, cut,
sort and getconf: 41 to 49 ms of the host's CPU each time, half of what the idle app cost a GPU
host. On a real H200 (tests/data/nvidia-smi/q-memory-pids/) a one-shot query costs 14 to 15 ms of
CPU, mostly NVML's start; the same tool in its own loop mode starts once (10 ms) and then prints
a whole block each period for about 1.5 ms: every GPU's memory and every process on it. Each
process's facts (process_facts: cgroup, parent, age, INVOCATION_ID) need a shell, so they are
read only when the set of PIDs on the GPUs changes, not every period.

`--query-compute-apps` in loop mode prints nothing for a period with no process, so its periods
cannot be told apart; `-q` prints every period whole, which is why it is the stream here. The
GPUs of a block come in nvidia-smi's index order; their UUIDs are asked once, when the stream
starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cockpit.remote.base import Host, HostError
from cockpit.systemd.gpu_use import FORMAT, Gpu, GpuProcess, GpuUse
from cockpit.systemd.process_facts import FACTS, NO_TOOL, SEP, Facts, number, parse_facts, probe

HEADER = "==============NVSMI LOG=============="
UUID_QUERY = "--query-gpu=index,uuid"


def watch_argv(period_s: int) -> list[str]:
    return ["nvidia-smi", "-q", "-d", "MEMORY,PIDS", "-l", str(period_s)]


@dataclass
class Block:
    """One period of the stream: each GPU's memory in index order, and the processes on each."""

    attached: int | None = None
    gpus: list[tuple[int, int]] = field(default_factory=list)  # (used MiB, total MiB), index order
    processes: list[tuple[int, int, str, int | None]] = field(default_factory=list)  # (GPU, PID, name, MiB)
    at: float = 0.0  # the jump box's clock when its first line came


class BlockReader:
    """Lines of `nvidia-smi -q -d MEMORY,PIDS` in, whole blocks out: a block is done when its
    last GPU's section has ended (the blank line after it), so it is not held until the next
    period's header."""

    def __init__(self) -> None:
        self.block: Block | None = None
        self._section = ""  # the 4-space heading the 8-space fields belong to
        self._open_gpu = False
        self._process: dict[str, str] | None = None

    def feed(self, line: str, now: float | None = None) -> Block | None:
        if line.strip() == HEADER:
            self.block = Block(at=time.time() if now is None else now)
            self._open_gpu = False
            return None
        block = self.block
        if block is None:
            return None
        if not line.strip():
            return self._end_gpu() if self._open_gpu else None
        key, _, value = line.partition(" : ")
        name, value = key.strip(), value.strip()
        if not line.startswith(" "):
            if name == "Attached GPUs":
                block.attached = number(value)
            elif name.startswith("GPU "):
                if self._open_gpu:  # a section that ended without its blank line
                    self._end_gpu()
                block.gpus.append((0, 0))
                self._open_gpu, self._section = True, ""
            return None
        if not self._open_gpu:
            return None
        if not line.startswith("     "):  # a section heading: `    FB Memory Usage`, `    Processes : None`
            self._flush_process()
            self._section = name
        elif self._section == "FB Memory Usage" and name in ("Used", "Total"):
            used, total = block.gpus[-1]
            mib = number(value.removesuffix(" MiB"))
            block.gpus[-1] = (mib or 0, total) if name == "Used" else (used, mib or 0)
        elif self._section == "Processes":
            if name == "GPU instance ID":  # each process's first field
                self._flush_process()
                self._process = {}
            elif self._process is not None:
                self._process[name] = value
        return None

    def _flush_process(self) -> None:
        said, self._process = self._process, None
        if said is None or self.block is None or not said.get("Process ID", "").isdigit():
            return
        mib = number(said.get("Used GPU Memory", "").removesuffix(" MiB"))
        self.block.processes.append((len(self.block.gpus) - 1, int(said["Process ID"]), said.get("Name", ""), mib))

    def _end_gpu(self) -> Block | None:
        self._flush_process()
        self._open_gpu = False
        block = self.block
        if block is not None and block.attached is not None and len(block.gpus) >= block.attached:
            self.block = None
            return block
        return None


async def read_facts(host: Host, pids: list[int]) -> dict[int, Facts]:
    """Each PID's facts, in one round trip (nothing where there are none)."""
    if not pids:
        return {}
    text = await probe(host, f"pids='{' '.join(map(str, pids))}'\n{FACTS}", "sh")
    if text is None or SEP + "\n" not in text:
        return {}
    return parse_facts(text.split(SEP + "\n", 1)[1])


class GpuWatch:
    """The stream, read until cancelled: each block becomes a GpuUse for `on_use`, with each
    process's facts read again only when the set of PIDs changed (or `refresh` asks)."""

    def __init__(self, host: Host, on_use: Callable[[GpuUse], None], period_s: int) -> None:
        self.host, self.on_use, self.period_s = host, on_use, period_s
        self._pids: tuple[int, ...] | None = None
        self._facts: dict[int, Facts] = {}
        self._facts_at = 0.0  # when they were read: a process's age goes on from there
        self._uuids: dict[int, str] = {}

    def refresh(self) -> None:
        """Read the facts again with the next block (a new start: its processes may be the
        same PIDs' children, or the start before's left behind)."""
        self._pids = None

    async def run(self) -> None:
        """Until cancelled; returns when the host has no nvidia-smi (said as `no_tool`)."""
        uuids = await self.host.run(
            [
                "sh",
                "-c",
                f"command -v nvidia-smi >/dev/null 2>&1 || exit {NO_TOOL}; exec nvidia-smi {UUID_QUERY} {FORMAT}",
            ],
            timeout=30,
        )
        if uuids.returncode == NO_TOOL:
            self.on_use(GpuUse(missing=f"no nvidia-smi on {self.host.name}", no_tool=True))
            return
        if not uuids.ok:
            raise HostError(f"nvidia-smi on {self.host.name} failed ({uuids.returncode}): {uuids.text.strip()[-200:]}")
        self._uuids = {
            int(index): uuid.strip()
            for index, _, uuid in (line.partition(",") for line in uuids.text.splitlines())
            if index.strip().isdigit()
        }
        reader = BlockReader()
        async with self.host.stream(watch_argv(self.period_s)) as lines:
            async for raw in lines:
                block = reader.feed(raw.decode("utf-8", "replace"))
                if block is not None:
                    self.on_use(await self._use(block))
        raise HostError(f"nvidia-smi's loop on {self.host.name} ended")

    async def _use(self, block: Block) -> GpuUse:
        pids = tuple(sorted({pid for _, pid, _, _ in block.processes}))
        if pids != self._pids:
            self._facts, self._pids, self._facts_at = await read_facts(self.host, list(pids)), pids, block.at
        since = block.at - self._facts_at
        gpus = [Gpu(i, self._uuids.get(i, ""), used, total) for i, (used, total) in enumerate(block.gpus)]
        processes = [
            GpuProcess.of(pid, name, mib, gpu, self._uuids.get(gpu, ""), self._facts.get(pid, Facts()), since)
            for gpu, pid, name, mib in block.processes
        ]
        return replace(GpuUse(gpus, processes), read_at=block.at)
