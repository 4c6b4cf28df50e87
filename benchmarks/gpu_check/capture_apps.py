"""Capture the real nvidia-smi formats the cockpit's GPU hygiene reads, on a real GPU machine.

Idle, then with two processes holding memory (torch allocations of different sizes), each
query is run in the forms the cockpit and its lab stand-in use: `--format=csv` (header and
units) and `--format=csv,noheader,nounits`, for the compute apps (with `gpu_uuid`) and the
per-GPU memory. The holders' own PIDs are recorded beside, so the capture says whether
nvidia-smi names the PIDs the processes see. Everything goes to one JSON file (stdout, stderr
and exit status per command, as text exactly as printed), from which tests/data/nvidia-smi/
keeps the fixtures.

Usage: python3 benchmarks/gpu_check/capture_apps.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

APPS = "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid"
GPUS = "--query-gpu=index,uuid,memory.used,memory.total"
FORMS = ("--format=csv", "--format=csv,noheader,nounits")
HOLD = (
    "import os, sys, time, torch\n"
    "x = torch.empty(int(sys.argv[1]) << 20, dtype=torch.uint8, device='cuda')\n"
    "torch.cuda.synchronize()\n"
    "print(os.getpid(), flush=True)\n"
    "time.sleep(600)\n"
)


def run(argv: list[str]) -> dict[str, object]:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return {"argv": argv, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


def queries(label: str) -> list[dict[str, object]]:
    out = []
    for query in (APPS, GPUS):
        for form in FORMS:
            out.append({"when": label, **run(["nvidia-smi", query, form])})
    out.append({"when": label, **run(["nvidia-smi"])})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    record: dict[str, object] = {"captures": queries("idle")}
    holders = [
        subprocess.Popen([sys.executable, "-c", HOLD, str(mib)], stdout=subprocess.PIPE, text=True)
        for mib in (20480, 8192)
    ]
    try:
        pids = [int(h.stdout.readline()) for h in holders]  # type: ignore[union-attr]
        record["holder_pids"] = pids
        record["holder_popen_pids"] = [h.pid for h in holders]
        record["holder_cgroups"] = [Path(f"/proc/{pid}/cgroup").read_text() for pid in pids]
        time.sleep(2)
        record["captures"] += queries("two holders (20480 and 8192 MiB asked)")  # type: ignore[operator]
        record["help_head"] = run(["nvidia-smi", "--help"])["stdout"].splitlines()[:5]  # type: ignore[union-attr]
        record["version"] = run(["nvidia-smi", "--version"])
    finally:
        for h in holders:
            h.kill()
            h.wait()
    time.sleep(2)
    record["captures"] += queries("after the holders ended")  # type: ignore[operator]
    (args.out / "apps-capture.json").write_text(json.dumps(record, indent=1))
    print(json.dumps({"pids": record["holder_pids"]}))


if __name__ == "__main__":
    main()
