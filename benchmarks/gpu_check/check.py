"""The one real-GPU check of cockpit.load.gpu: the sampler against nvidia-smi's own output.

On a GPU machine, at the same time: the GpuSampler over LocalHost (what the cockpit would
show), nvidia-smi's own CSV with its header and units (the reference, a separate process),
and matmul_load.py loading GPU 0 between an idle lead-in and an idle tail. Afterwards the
sampler meets a real nvidia-smi that refuses its query and a path with no nvidia-smi, and
the two recordings are compared in the loaded steady state. Everything lands in --out;
tests/data/gpu/ keeps it as a fixture.

Only the standard library and the cockpit package are imported here (torch only in the
load's own process), so it runs with the GPU machine's plain python3.

Usage: python3 benchmarks/gpu_check/check.py --out DIR [--idle 4] [--load 30] [--tail 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, TextIO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

# E402: these come after the sys.path insert above, which puts the checkout's package first.
from cockpit.load.gpu import (  # noqa: E402
    QUERY_FIELDS,
    GpuNotice,
    GpuSample,
    GpuSampler,
    fields_from_header,
    parse_line,
)
from cockpit.remote.local import LocalHost  # noqa: E402


def stamp_time(stamp: str) -> float:
    """nvidia-smi's `2026/11/30 05:55:26.624`, local time of the machine that printed it."""
    return datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def stats(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "mean": round(statistics.fmean(values), 3), "min": min(values), "max": max(values)}


async def record(args: argparse.Namespace, out: Path, log: TextIO, raw_file: BinaryIO) -> dict:
    """Sampler rows and notices to `log` (JSON lines), nvidia-smi's own CSV to `raw_file`."""
    host = LocalHost(socket.gethostname())
    samples: list[GpuSample] = []
    notices: list[dict] = []

    def on_samples(batch: list[GpuSample]) -> None:
        for s in batch:
            samples.append(s)
            log.write(json.dumps({"kind": "sample", **asdict(s)}) + "\n")

    def on_notice(n: GpuNotice) -> None:
        notices.append({"kind": "notice", "at": time.time(), **asdict(n)})
        log.write(json.dumps(notices[-1]) + "\n")

    raw = await asyncio.create_subprocess_exec(
        "nvidia-smi",
        f"--query-gpu={','.join(QUERY_FIELDS)}",
        "--format=csv",
        "-lms",
        "500",
        stdout=raw_file,
        stderr=asyncio.subprocess.STDOUT,
    )
    sampler = asyncio.create_task(GpuSampler(host).run(on_samples, on_notice))
    await asyncio.sleep(args.idle)
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "matmul_load.py"),
        "--seconds",
        str(args.load),
        "--ballast-gib",
        str(args.ballast_gib),
        "--out",
        str(out / "load.json"),
        stdout=asyncio.subprocess.PIPE,
    )
    assert load.stdout is not None
    first = await load.stdout.readline()  # {"event": "load_start"}: warm, ballast held
    print("load:", first.decode().strip(), flush=True)
    await asyncio.sleep(args.load / 2)
    q = await asyncio.to_thread(
        subprocess.run,
        ["nvidia-smi", "-q", "-d", "UTILIZATION,MEMORY,POWER,CLOCK,TEMPERATURE"],
        capture_output=True,
        text=True,
    )
    (out / "q-load.txt").write_text(q.stdout + q.stderr)
    await load.communicate()
    await asyncio.sleep(args.tail)
    sampler.cancel()
    await asyncio.gather(sampler, return_exceptions=True)
    raw.terminate()
    await raw.wait()

    # The failure paths against the real program: a query it refuses, and no program at all.
    on_notice(await GpuSampler(host, fields=("index", "no.such.field")).run_once(lambda b: None, on_notice))
    on_notice(await GpuSampler(host, nvidia_smi="/nonexistent/nvidia-smi").run_once(lambda b: None, on_notice))
    return {"samples": samples, "notices": notices}


def compare(samples: list[GpuSample], raw_lines: list[str], load: dict) -> dict:
    """Steady state (2 s after the load starts to 1 s before it ends): both sources' stats,
    and each sampler row against the raw row nearest in nvidia-smi time."""
    fields = fields_from_header(raw_lines[0])
    raw = [parse_line(line, fields) for line in raw_lines[1:] if line.strip()]
    lo, hi = load["load_start"] + 2, load["load_end"] - 1
    mine = [s for s in samples if s.stamp and lo <= stamp_time(s.stamp) <= hi]
    ref = [r for r in raw if r.stamp and lo <= stamp_time(r.stamp) <= hi]
    idle_mine = [s for s in samples if s.stamp and stamp_time(s.stamp) < load["started"]]
    idle_ref = [r for r in raw if r.stamp and stamp_time(r.stamp) < load["started"]]
    ref_t = [(stamp_time(r.stamp), r) for r in ref]
    pairs = []
    for s in mine:
        t = stamp_time(s.stamp)
        _, r = min(ref_t, key=lambda x: abs(x[0] - t))
        pairs.append((s, r, abs(stamp_time(r.stamp) - t)))
    gaps = [b.time - a.time for a, b in zip(samples, samples[1:], strict=False)]
    lag = [s.time - stamp_time(s.stamp) for s in samples if s.stamp]

    def both(attr: str) -> dict:
        return {
            "sampler": stats([getattr(s, attr) for s in mine]),
            "nvidia_smi": stats([getattr(r, attr) for r in ref]),
        }

    return {
        "device": load["device"],
        "torch": load["torch"],
        "tflops": round(load["tflops"], 1),
        "torch_view_used_mib": round(load["cuda_used_mib"]),
        "ballast_mib": load["ballast_bytes"] >> 20,
        "steady_state_s": round(hi - lo, 1),
        "util_pct": both("util_pct"),
        "mem_used_mib": both("mem_used_mib"),
        "power_w": both("power_w"),
        "temp_c": both("temp_c"),
        "sm_clock_mhz": both("sm_clock_mhz"),
        "mem_util_pct": both("mem_util_pct"),
        "idle": {
            "sampler_util_pct": stats([s.util_pct for s in idle_mine]),
            "sampler_power_w": stats([s.power_w for s in idle_mine]),
            "sampler_mem_used_mib": stats([s.mem_used_mib for s in idle_mine]),
            "nvidia_smi_power_w": stats([r.power_w for r in idle_ref]),
        },
        "pairs": {
            "n": len(pairs),
            "stamp_gap_s": stats([round(g, 3) for _, _, g in pairs]),
            "abs_util_diff": stats([abs(s.util_pct - r.util_pct) for s, r, _ in pairs]),
            "abs_power_diff_w": stats([round(abs(s.power_w - r.power_w), 2) for s, r, _ in pairs]),
            "abs_mem_diff_mib": stats([abs(s.mem_used_mib - r.mem_used_mib) for s, r, _ in pairs]),
        },
        "arrival_gap_s": {"p50": round(pct(gaps, 50), 3), "p99": round(pct(gaps, 99), 3), "max": round(max(gaps), 3)},
        "arrival_after_stamp_s": {"p50": round(pct(lag, 50), 3), "max": round(max(lag), 3)},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--idle", type=float, default=4.0)
    ap.add_argument("--load", type=float, default=30.0)
    ap.add_argument("--tail", type=float, default=4.0)
    ap.add_argument("--ballast-gib", type=float, default=40.0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sampler.jsonl", "w") as log, open(out / "nvidia-smi-raw.csv", "wb") as raw_file:
        got = asyncio.run(record(args, out, log, raw_file))
    load = json.loads((out / "load.json").read_text())
    summary = compare(got["samples"], (out / "nvidia-smi-raw.csv").read_text().splitlines(), load)
    summary.update(notices=got["notices"], tz=os.environ.get("TZ") or time.strftime("%Z"))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
