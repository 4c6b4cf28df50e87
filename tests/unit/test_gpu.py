"""GPU telemetry: the parser on real nvidia-smi output, the sampler on a scripted nvidia-smi."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cockpit.load.gpu import (
    QUERY_FIELDS,
    GpuLineError,
    GpuNotice,
    GpuSample,
    GpuSampler,
    _Rounds,
    fields_from_header,
    parse_line,
    query_argv,
)
from cockpit.remote.local import LocalHost
from tests.conftest import FIXTURES, ROOT

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
    assert fields_from_header(header) == (
        "timestamp",
        "index",
        "utilization.gpu",
        "utilization.memory",
        "memory.used",
        "memory.total",
        "power.draw",
        "temperature.gpu",
        "clocks.current.sm",
    )
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
        0.0,
        22.0,
        80.15,
        37.0,
        1980.0,
    )
    assert (ramp.util_pct, ramp.mem_util_pct, ramp.mem_used_mib, ramp.power_w) == (100.0, 26.0, 62579.0, 189.44)
    assert steady.stamp == "2026/11/30 05:55:28.129"
    assert (steady.util_pct, steady.mem_util_pct, steady.mem_used_mib, steady.mem_total_mib) == (
        100.0,
        25.0,
        62579.0,
        143771.0,
    )
    assert (steady.power_w, steady.temp_c, steady.sm_clock_mhz) == (692.64, 58.0, 1500.0)
    assert (last.util_pct, last.power_w, last.temp_c, last.sm_clock_mhz) == (100.0, 691.44, 62.0, 1470.0)
    loaded = rows[1:]
    assert all(r.util_pct >= 99 and r.mem_used_mib == 62579 for r in loaded)
    assert min(r.power_w for r in rows[3:]) == 689.09 and max(r.power_w for r in rows[3:]) == 695.13


def test_the_same_values_without_units_in_the_samplers_own_column_order() -> None:
    line = f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, 100, 25, 62579, 143771, 692.64, 700.00, 58, 1500\n"
    s = parse_line(line.encode(), now=5.0)
    assert s == GpuSample(
        index=0,
        time=5.0,
        stamp="2026/11/30 05:55:28.129",
        uuid=UUID,
        name="NVIDIA H200",
        util_pct=100.0,
        mem_util_pct=25.0,
        mem_used_mib=62579.0,
        mem_total_mib=143771.0,
        power_w=692.64,
        power_limit_w=700.0,
        temp_c=58.0,
        sm_clock_mhz=1500.0,
    )


def test_values_the_gpu_cannot_give_are_none_and_named() -> None:
    line = (
        f"2026/11/30 05:55:28.129, 3, {UUID}, NVIDIA H200, 100, [N/A], 62579, 143771, [Not Supported], [N/A], 58, 1500"
    )
    s = parse_line(line)
    assert s.index == 3 and s.util_pct == 100.0 and s.sm_clock_mhz == 1500.0
    assert s.mem_util_pct is None and s.power_w is None and s.power_limit_w is None
    assert s.missing == ("utilization.memory: [N/A]", "power.draw: [Not Supported]", "power.limit: [N/A]")


@pytest.mark.parametrize(
    "line",
    [
        "",
        "No devices were found",
        "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error",
        "timestamp, index, uuid, name, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
        "memory.total [MiB], power.draw [W], power.limit [W], temperature.gpu, clocks.current.sm [MHz]",
        f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, busy, 25, 62579, 143771, 692.64, 700.00, 58, 1500",
        f"2026/11/30 05:55:28.129, 0, {UUID}, NVIDIA H200, 100, 25, 62579",
    ],
)
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
    rows = "\n".join(
        [
            ROW.format(i=0, p="692.64"),
            ROW.format(i=1, p="690.00"),
            "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error",
            ROW.format(i=0, p="[N/A]"),
            ROW.format(i=1, p="691.00"),
            ROW.format(i=0, p="[N/A]"),
            ROW.format(i=1, p="689.50"),
        ]
    )
    smi = script(
        tmp_path,
        f"cat <<'EOF'\n{rows}\nEOF\n"
        "echo 'Failed to initialize NVML: GPU access blocked by the operating system' >&2\n"
        "exit 15\n",
    )
    rec = Recorder()
    end = await GpuSampler(LocalHost("gpu-7"), nvidia_smi=smi).run_once(rec.on_samples, rec.on_notice)
    assert [[(s.index, s.power_w) for s in r] for r in rec.rounds] == [
        [(0, 692.64), (1, 690.0)],
        [(0, None), (1, 691.0)],
        [(0, None), (1, 689.5)],
    ]
    assert [(n.kind, n.message) for n in rec.notices] == [
        ("garbage", "nvidia-smi on gpu-7 printed a line that is not a sample"),
        ("unsupported", "GPU 0 on gpu-7 gives no power.draw: [N/A]"),  # once, not every period
    ]
    assert rec.notices[0].detail == "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error"
    assert end.kind == "ended"
    assert end.message == (
        "GPU telemetry from gpu-7 stopped (nvidia-smi exited with status 15): "
        "Failed to initialize NVML: GPU access blocked by the operating system"
    )


async def test_a_stopped_stream_is_started_again(tmp_path: Path) -> None:
    count = tmp_path / "starts"
    smi = script(tmp_path, f"echo x >> {count}\necho '{ROW.format(i=0, p='80.15')}'\nexit 1\n")
    rec = Recorder()
    task = asyncio.create_task(
        GpuSampler(LocalHost("gpu-7"), nvidia_smi=smi, restart_s=0.01).run(rec.on_samples, rec.on_notice)
    )
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
    smi = script(
        tmp_path, f"echo $$ > {pid_file}\nwhile true; do echo '{ROW.format(i=0, p='80.15')}'; sleep 0.05; done\n"
    )
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
    await asyncio.wait_for(
        GpuSampler(LocalHost("cpu-box"), nvidia_smi=str(tmp_path / "nvidia-smi")).run(rec.on_samples, rec.on_notice), 5
    )
    assert [(n.kind, n.message) for n in rec.notices] == [("unavailable", "no GPU telemetry on cpu-box")]
    # Over SSH the remote shell answers 127 and "command not found".
    smi = script(tmp_path, "echo 'bash: line 1: nvidia-smi: command not found' >&2\nexit 127\n", "smi-127")
    end = await GpuSampler(LocalHost("cpu-box"), nvidia_smi=smi).run_once(rec.on_samples, rec.on_notice)
    assert (end.kind, end.message, end.detail) == (
        "unavailable",
        "no GPU telemetry on cpu-box",
        "bash: line 1: nvidia-smi: command not found",
    )
    assert rec.rounds == []


async def test_an_error_printed_on_stdout_explains_the_end(tmp_path: Path) -> None:
    """What the real nvidia-smi did on the H200 when asked for a field it does not know."""
    smi = script(tmp_path, "echo 'Field \"no.such.field\" is not a valid field to query.'\nexit 2\n")
    rec = Recorder()
    end = await GpuSampler(LocalHost("vm"), fields=("index", "no.such.field"), nvidia_smi=smi).run_once(
        rec.on_samples, rec.on_notice
    )
    assert [n.kind for n in rec.notices] == ["garbage"]
    assert end.message == (
        "GPU telemetry from vm stopped (nvidia-smi exited with status 2): "
        'Field "no.such.field" is not a valid field to query.'
    )


# --- the H200 run: the sampler against nvidia-smi's own output of the same 44 seconds ---------

H200 = ROOT / "tests" / "data" / "gpu"


def h200_raw() -> list[GpuSample]:
    header, *rows = (H200 / "nvidia-smi-raw.csv").read_text().splitlines()
    return [parse_line(row, fields_from_header(header), now=0.0) for row in rows]


def h200_sampler() -> tuple[list[GpuSample], list[dict]]:
    samples, notices = [], []
    for line in (H200 / "sampler.jsonl").read_text().splitlines():
        record = json.loads(line)
        kind = record.pop("kind")
        if kind == "sample":
            samples.append(GpuSample(**{**record, "missing": tuple(record["missing"])}))
        else:
            notices.append({"kind": kind, **record})
    return samples, notices


def stamp_s(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


def test_h200_raw_output_parses_to_the_recorded_numbers() -> None:
    rows = h200_raw()
    assert len(rows) == 89
    assert {(r.index, r.name, r.uuid, r.mem_total_mib, r.power_limit_w) for r in rows} == {
        (0, "NVIDIA H200", "GPU-17070c7d-3aa3-721e-6fbf-08849cadda34", 143771.0, 700.0)
    }
    idle, start, loaded, after = rows[0], rows[18], rows[20], rows[-1]
    assert (idle.stamp, idle.util_pct, idle.mem_used_mib, idle.power_w, idle.temp_c, idle.sm_clock_mhz) == (
        "2026/11/30 10:16:23.410",
        0.0,
        0.0,
        78.21,
        41.0,
        345.0,
    )
    assert (start.stamp, start.util_pct, start.mem_used_mib, start.power_w, start.sm_clock_mhz) == (
        "2026/11/30 10:16:32.532",
        3.0,
        42189.0,
        168.23,
        1560.0,
    )
    assert (
        loaded.util_pct,
        loaded.mem_util_pct,
        loaded.mem_used_mib,
        loaded.power_w,
        loaded.temp_c,
        loaded.sm_clock_mhz,
    ) == (100.0, 24.0, 42189.0, 697.11, 63.0, 1515.0)
    assert (after.util_pct, after.mem_used_mib, after.power_w, after.sm_clock_mhz) == (0.0, 0.0, 79.0, 345.0)


def test_h200_sampler_agrees_with_nvidia_smi() -> None:
    load = json.loads((H200 / "load.json").read_text())
    lo, hi = load["load_start"] + 2, load["load_end"] - 1
    raw = [r for r in h200_raw() if lo <= stamp_s(r.stamp) <= hi]
    samples, _ = h200_sampler()
    mine = [s for s in samples if lo <= stamp_s(s.stamp) <= hi]
    assert len(mine) == len(raw) == 54  # 27 s at two samples a second
    # The stream arrived line by line, not in buffered bursts: one row every 0.5 s, promptly.
    gaps = sorted(b.time - a.time for a, b in itertools.pairwise(samples))
    assert 0.49 < gaps[len(gaps) // 2] < 0.51 and gaps[-1] < 0.7
    assert max(s.time - stamp_s(s.stamp) for s in samples) < 0.2

    def mean(rows: list[GpuSample], attr: str) -> float:
        return sum(getattr(r, attr) for r in rows) / len(rows)

    assert mean(mine, "util_pct") == pytest.approx(mean(raw, "util_pct"), abs=1.0)
    assert mean(mine, "util_pct") > 99.5
    assert mean(mine, "power_w") == pytest.approx(mean(raw, "power_w"), rel=0.01)
    assert 688 < mean(mine, "power_w") < 695
    assert {s.mem_used_mib for s in mine} == {r.mem_used_mib for r in raw} == {42189.0}
    # torch's own view of the same memory (free vs total from the driver) says the same.
    assert round(load["cuda_used_mib"]) == 42189
    # Each sample against nvidia-smi's row nearest in time: the two processes read the driver
    # within a few milliseconds of each other, so the values agree within the sampling jitter.
    for s in mine:
        r = min(raw, key=lambda r: abs(stamp_s(r.stamp) - stamp_s(s.stamp)))
        assert abs(stamp_s(r.stamp) - stamp_s(s.stamp)) < 0.25
        assert abs(s.util_pct - r.util_pct) <= 1 and abs(s.power_w - r.power_w) <= 0.02 * r.power_w
        assert s.mem_used_mib == r.mem_used_mib and s.sm_clock_mhz == r.sm_clock_mhz


def test_h200_query_report_mid_load_matches_the_samples() -> None:
    q = (H200 / "q-load.txt").read_text()
    used = re.search(r"FB Memory Usage\n.*\n.*\n\s+Used\s+: (\d+) MiB", q)
    power = re.search(r"Average Power Draw\s+: ([\d.]+) W", q)
    assert used and power
    samples, _ = h200_sampler()
    loaded = [s for s in samples if s.util_pct >= 99]
    assert int(used.group(1)) == 42189 == loaded[0].mem_used_mib
    assert min(s.power_w for s in loaded) <= float(power.group(1)) <= max(s.power_w for s in loaded)


def test_h200_failure_paths_against_the_real_program() -> None:
    _, notices = h200_sampler()
    assert [(n["kind"], n["message"]) for n in notices] == [
        ("garbage", "nvidia-smi on vm printed a line that is not a sample"),
        ("ended", "GPU telemetry from vm stopped (nvidia-smi exited with status 2)"),
        ("unavailable", "no GPU telemetry on vm"),
    ]
    assert notices[0]["detail"] == 'Field "no.such.field" is not a valid field to query.'
