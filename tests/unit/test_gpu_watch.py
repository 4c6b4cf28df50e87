"""The GPU table as a stream (issue 29): `nvidia-smi -q -d MEMORY,PIDS -l N` as a real H200 printed
it (tests/data/nvidia-smi/q-memory-pids/), the lab's stand-in against it, and the watch run for
real on this machine with the stand-in as its nvidia-smi."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.lab.standin.nvidia_smi import Holder, _q_block
from cockpit.remote.local import LocalHost
from cockpit.systemd import gpu_watch
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.gpu_watch import BlockReader, GpuWatch
from tests.unit.test_gpu_use import invoked_holder, my_cgroup, standin_on_path  # noqa: F401 - fixtures

REAL = Path(__file__).parents[1] / "data" / "nvidia-smi" / "q-memory-pids"


def blocks(text: str) -> list[gpu_watch.Block]:
    reader = BlockReader()
    return [b for line in text.splitlines() if (b := reader.feed(line, now=1.0)) is not None]


def test_each_period_of_the_real_loop_is_one_block_with_its_processes() -> None:
    idle = blocks((REAL / "q-loop-none.txt").read_text())
    assert len(idle) == 4 and all(b.gpus == [(0, 143771)] and b.processes == [] for b in idle)
    two = blocks((REAL / "q-loop-two.txt").read_text())
    assert len(two) == 4
    assert all(b.gpus == [(26651, 143771)] for b in two)
    assert all(b.processes == [(0, 678, "python3", 20998), (0, 704, "python3", 5638)] for b in two)
    [one] = blocks((REAL / "one-holder.txt").read_text())
    assert one.attached == 1 and one.processes == [(0, 567, "python3", 20998)]


def test_a_block_is_given_when_its_last_gpu_ends_not_at_the_next_header() -> None:
    """The next header comes a period later: waiting for it would make the table a period old."""
    reader = BlockReader()
    lines = (REAL / "q-loop-two.txt").read_text().splitlines()
    done = [i for i, line in enumerate(lines) if reader.feed(line, now=1.0) is not None]
    headers = [i for i, line in enumerate(lines) if line == gpu_watch.HEADER]
    assert done[0] < headers[1] and len(done) == len(headers)


def _skeleton(text: str) -> list[str]:
    """Each line with its value left out: the keys, their indents and the column of `: `."""
    return [re.sub(r"^GPU \S+", "GPU ", re.sub(r": .*", ": ", line)) for line in text.splitlines()]


def test_the_standins_block_is_laid_out_as_the_real_one() -> None:
    real = (REAL / "one-holder.txt").read_text()
    ours = _q_block([Holder(567, "python3", 20998, (0,))])
    # the header and the first GPU's section, line for line (the real host had one GPU, the lab eight)
    first = ours.split("\nGPU ")[0] + "\nGPU " + ours.split("\nGPU ")[1]
    assert _skeleton(first.rstrip("\n")) == _skeleton(real.rstrip("\n"))
    parsed = blocks(ours)[0]
    assert parsed.attached == 8 and len(parsed.gpus) == 8
    assert parsed.processes == [(0, 567, "python3", 20998)] and parsed.gpus[1] == (0, 143771)
    refused = subprocess.run([sys.executable, "-m", "cockpit.lab.standin.nvidia_smi", "-q"], capture_output=True)
    assert refused.returncode == 2  # -q alone is not the query the stand-in knows


async def test_the_watch_reads_each_pids_facts_only_when_the_pids_change(
    standin_on_path: None,  # noqa: F811
    invoked_holder: subprocess.Popen[bytes],  # noqa: F811
    my_cgroup: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks every second, one set of PIDs: their facts read once (a shell each time was the cost)."""
    asked: list[list[int]] = []
    real_read = gpu_watch.read_facts

    async def counted(host: LocalHost, pids: list[int]) -> dict:
        asked.append(pids)
        return await real_read(host, pids)

    monkeypatch.setattr(gpu_watch, "read_facts", counted)
    uses: list[GpuUse] = []
    watch = GpuWatch(LocalHost("here"), uses.append, period_s=1)
    task = asyncio.create_task(watch.run())
    try:
        for _ in range(100):
            if len(uses) >= 3:
                break
            await asyncio.sleep(0.1)
    finally:
        task.cancel()
    # other processes of this machine that say they hold memory (a lab's) may come and go: a read
    # for each set of PIDs, never two for one set, fewer reads than blocks
    assert len(uses) >= 3 and len(asked) < len(uses) and len({tuple(a) for a in asked}) == len(asked), asked
    mine = [p for p in uses[-1].processes if p.pid == invoked_holder.pid]
    assert [(p.gpu, p.used_mib) for p in mine] == [(2, 1234), (5, 1234)]
    assert all(p.ppid == os.getpid() and p.invocation == "ab" * 16 and p.cgroup == my_cgroup for p in mine)
    assert uses[-1].gpus[2].uuid.startswith("GPU-") and mine[0].gpu_uuid == uses[-1].gpus[2].uuid
    assert uses[-1].read_at is not None and uses[-1].read_at > uses[0].read_at


async def test_a_host_without_nvidia_smi_is_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    uses: list[GpuUse] = []
    await asyncio.wait_for(GpuWatch(LocalHost("cpu-box"), uses.append, period_s=1).run(), 10)
    assert [(u.missing, u.no_tool) for u in uses] == [("no nvidia-smi on cpu-box", True)]
