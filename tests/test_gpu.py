"""GPU telemetry: the parser on real nvidia-smi output, the sampler on a scripted nvidia-smi."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from cockpit.load.gpu import (QUERY_FIELDS, GpuLineError, GpuNotice, GpuSample, GpuSampler, _Rounds,
                              fields_from_header, parse_line, query_argv)
from cockpit.remote.local import LocalHost
from tests.conftest import FIXTURES

SMI = FIXTURES / "nvidia-smi"
UUID = "GPU-4c27fcd4-a449-e79a-b9b1-ce12724c61e9"


def fixture_rows(name: str) -> list[GpuSample]:
    header, *rows = (SMI / name).read_text().splitlines()
    fields = fields_from_header(header)
    return [parse_line(row, fields, now=0.0) for row in rows]


def test_query_asks_for_the_columns_the_parser_maps() -> None:
    argv = query_argv()
    assert argv[0] == "nvidia-smi"
    assert argv[1] == "--query-gpu=" + ",".join(QUERY_FIELDS)
    assert argv[2:] == ["--format=csv,noheader,nounits", "-lms", "500"]


def test_header_of_the_real_output_names_the_fields() -> None:
    header = (SMI / "query-load-lms500.csv").read_text().splitlines()[0]
    assert fields_from_header(header) == ("timestamp", "index", "utilization.gpu", "utilization.memory",
                                          "memory.used", "memory.total", "power.draw", "temperature.gpu",
                                          "clocks.current.sm")
    # Every column the real H200 printed is one the cockpit asks for.
    assert set(fields_from_header(header)) <= set(QUERY_FIELDS)


def test_idle_h200_row() -> None:
    [s] = fixture_rows("query-idle.csv")
    assert (s.index, s.name, s.uuid) == (0, "NVIDIA H200", UUID)
    assert (s.util_pct, s.mem_util_pct, s.mem_used_mib, s.mem_total_mib) == (0.0, 0.0, 0.0, 143771.0)
    assert (s.power_w, s.power_limit_w, s.temp_c, s.sm_clock_mhz) == (127.29, 700.0, 39.0, 1980.0)
    assert s.missing == ()


def test_loaded_h200_rows() -> None:
    rows = fixture_rows("query-load-lms500.csv")
    assert len(rows) == 30
    first, ramp, steady, last = rows[0], rows[1], rows[3], rows[-1]
    assert first.stamp == "2026/11/30 05:55:26.624"
    assert (first.util_pct, first.mem_used_mib, first.power_w, first.temp_c, first.sm_clock_mhz) == (
        0.0, 22.0, 80.15, 37.0, 1980.0)
    assert (ramp.util_pct, ramp.mem_util_pct, ramp.mem_used_mib, ramp.power_w) == (100.0, 26.0, 62579.0, 189.44)
    assert steady.stamp == "2026/11/30 05:55:28.129"
    assert (steady.util_pct, steady.mem_util_pct, steady.mem_used_mib, steady.mem_total_mib) == (
        100.0, 25.0, 62579.0, 143771.0)
    assert (steady.power_w, steady.temp_c, steady.sm_clock_mhz) == (692.64, 58.0, 1500.0)
    assert (last.util_pct, last.power_w, last.temp_c, last.sm_clock_mhz) == (100.0, 691.44, 62.0, 1470.0)
    loaded = rows[1:]
    assert all(r.util_pct >= 99 and r.mem_used_mib == 62579 for r in loaded)
    assert min(r.power_w for r in rows[3:]) == 689.09 and max(r.power_w for r in rows[3:]) == 695.13


def test_the_same_values_without_units_in_the_samplers_own_column_order() -> None:
    line = f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, 100, 25, 62579, 143771, 692.64, 700.00, 58, 1500\n"
    s = parse_line(line.encode(), now=5.0)
    assert s == GpuSample(index=0, time=5.0, stamp="2026/11/30 05:55:28.129", uuid=UUID, name="NVIDIA H200",
                          util_pct=100.0, mem_util_pct=25.0, mem_used_mib=62579.0, mem_total_mib=143771.0,
                          power_w=692.64, power_limit_w=700.0, temp_c=58.0, sm_clock_mhz=1500.0)


def test_values_the_gpu_cannot_give_are_none_and_named() -> None:
    line = f"2026/11/30 05:55:28.129, 3, {UUID}, NVIDIA H200, 100, [N/A], 62579, 143771, [Not Supported], [N/A], 58, 1500"
    s = parse_line(line)
    assert s.index == 3 and s.util_pct == 100.0 and s.sm_clock_mhz == 1500.0
    assert s.mem_util_pct is None and s.power_w is None and s.power_limit_w is None
    assert s.missing == ("utilization.memory: [N/A]", "power.draw: [Not Supported]", "power.limit: [N/A]")


@pytest.mark.parametrize("line", [
    "",
    "No devices were found",
    "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error",
    "timestamp, index, uuid, name, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
    "memory.total [MiB], power.draw [W], power.limit [W], temperature.gpu, clocks.current.sm [MHz]",
    f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, busy, 25, 62579, 143771, 692.64, 700.00, 58, 1500",
    f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, 100, 25, 62579",
])
def test_garbage_is_a_typed_error(line: str) -> None:
    with pytest.raises(GpuLineError):
        parse_line(line)


def sample(index: int) -> GpuSample:
    return GpuSample(index=index, time=0.0)


def test_rounds_of_one_gpu_arrive_without_waiting_for_the_next_period() -> None:
    rounds = _Rounds()
    assert rounds.add(sample(0)) == []  # the GPU count is not known yet
    assert [[s.index for s in r] for r in rounds.add(sample(0))] == [[0], [0]]
    assert [[s.index for s in r] for r in rounds.add(sample(0))] == [[0]]


def test_rounds_of_eight_gpus() -> None:
    rounds = _Rounds()
    got = [r for i in list(range(8)) * 3 for r in rounds.add(sample(i))]
    assert [[s.index for s in r] for r in got] == [list(range(8))] * 3
    # A GPU that drops out: the short round is delivered when the next one starts.
    assert [r for i in (0, 1, 2) for r in rounds.add(sample(i))] == []
    assert [[s.index for s in r] for r in rounds.add(sample(0))] == [[0, 1, 2]]


# --- the sampler, on a scripted nvidia-smi run by LocalHost ----------------------------------

ROW = "2026/11/30 05:55:28.129, {i}, " + UUID + ", NVIDIA H200, 100, 25, 62579, 143771, {p}, 700.00, 58, 1500"


def script(tmp_path: Path, body: str, name: str = "nvidia-smi") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


class Recorder:
    def __init__(self) -> None:
        self.rounds: list[list[GpuSample]] = []
        self.notices: list[GpuNotice] = []

    def on_samples(self, batch: list[GpuSample]) -> None:
        self.rounds.append(batch)

    def on_notice(self, notice: GpuNotice) -> None:
        self.notices.append(notice)


async def test_a_stream_with_garbage_and_missing_values_then_a_crash(tmp_path: Path) -> None:
    rows = "\n".join([ROW.format(i=0, p="692.64"), ROW.format(i=1, p="690.00"),
                      "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error",
                      ROW.format(i=0, p="[N/A]"), ROW.format(i=1, p="691.00"),
                      ROW.format(i=0, p="[N/A]"), ROW.format(i=1, p="689.50")])
    smi = script(tmp_path, f"cat <<'EOF'\n{rows}\nEOF\n"
                           "echo 'Failed to initialize NVML: GPU access blocked by the operating system' >&2\nexit 15\n")
    rec = Recorder()
    end = await GpuSampler(LocalHost("gpu-7"), nvidia_smi=smi).run_once(rec.on_samples, rec.on_notice)
    assert [[(s.index, s.power_w) for s in r] for r in rec.rounds] == [
        [(0, 692.64), (1, 690.0)], [(0, None), (1, 691.0)], [(0, None), (1, 689.5)]]
    assert [(n.kind, n.message) for n in rec.notices] == [
        ("garbage", "nvidia-smi on gpu-7 printed a line that is not a sample"),
        ("unsupported", "GPU 0 on gpu-7 gives no power.draw: [N/A]"),  # once, not every period
    ]
    assert rec.notices[0].detail == "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error"
    assert end.kind == "ended"
    assert end.message == ("GPU telemetry from gpu-7 stopped (nvidia-smi exited with status 15): "
                           "Failed to initialize NVML: GPU access blocked by the operating system")


async def test_a_stopped_stream_is_started_again(tmp_path: Path) -> None:
    count = tmp_path / "starts"
    smi = script(tmp_path, f"echo x >> {count}\n"
                           f"echo '{ROW.format(i=0, p='80.15')}'\nexit 1\n")
    rec = Recorder()
    task = asyncio.create_task(GpuSampler(LocalHost("gpu-7"), nvidia_smi=smi, restart_s=0.01)
                               .run(rec.on_samples, rec.on_notice))
    for _ in range(200):
        if len(rec.rounds) >= 3:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(rec.rounds) >= 3 and all(r[0].power_w == 80.15 for r in rec.rounds)
    assert len(count.read_text().split()) >= 3
    ended = [n for n in rec.notices if n.kind == "ended"]
    assert len(ended) >= 2 and ended[0].message == "GPU telemetry from gpu-7 stopped (nvidia-smi exited with status 1)"


async def test_cancelling_the_sampler_ends_nvidia_smi(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    smi = script(tmp_path, f"echo $$ > {pid_file}\n"
                           f"while true; do echo '{ROW.format(i=0, p='80.15')}'; sleep 0.05; done\n")
    rec = Recorder()
    task = asyncio.create_task(GpuSampler(LocalHost(), nvidia_smi=smi).run(rec.on_samples, rec.on_notice))
    for _ in range(200):
        if len(rec.rounds) >= 2:
            break
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    os.kill(pid, 0)  # running
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert rec.notices == []


async def test_a_host_without_nvidia_smi(tmp_path: Path) -> None:
    rec = Recorder()
    # LocalHost: the program does not exist; run() says so once and returns instead of retrying.
    await asyncio.wait_for(GpuSampler(LocalHost("cpu-box"), nvidia_smi=str(tmp_path / "nvidia-smi"))
                           .run(rec.on_samples, rec.on_notice), 5)
    assert [(n.kind, n.message) for n in rec.notices] == [("unavailable", "no GPU telemetry on cpu-box")]
    # Over SSH the remote shell answers 127 and "command not found".
    smi = script(tmp_path, "echo 'bash: line 1: nvidia-smi: command not found' >&2\nexit 127\n", "smi-127")
    end = await GpuSampler(LocalHost("cpu-box"), nvidia_smi=smi).run_once(rec.on_samples, rec.on_notice)
    assert (end.kind, end.message, end.detail) == (
        "unavailable", "no GPU telemetry on cpu-box", "bash: line 1: nvidia-smi: command not found")
    assert rec.rounds == []
