"""How long `cockpit lab up` takes once the image is built, and until the stand-in is ready.

Prints JSON. Target (issue 2): up in under 5 s.
"""

from __future__ import annotations

import subprocess
import time

from _common import emit, pct

from cockpit.lab.image import build
from cockpit.lab.lab import Lab

RUNS = 5


def main() -> None:
    build(progress=lambda m: None)  # the image is built once, outside the timing
    lab = Lab("cockpit-bench-boot")
    lab.down()
    ups, readies = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        lab.up(progress=lambda m: None)
        ups.append(time.perf_counter() - t0)
        while True:
            out = subprocess.run(
                lab.ssh_argv("root", ["journalctl", "-u", "sglang-demo", "-o", "cat"]), capture_output=True, text=True
            ).stdout
            if "ready to roll" in out:
                break
            time.sleep(0.05)
        readies.append(time.perf_counter() - t0)
        lab.down()
    emit(
        {
            "benchmark": "lab_boot",
            "runs": RUNS,
            "up_s": {"p50": round(pct(ups, 50), 3), "max": round(max(ups), 3)},
            "standin_ready_s": {"p50": round(pct(readies, 50), 3), "max": round(max(readies), 3)},
            "target_up_s": 5.0,
            "met": max(ups) < 5.0,
        }
    )


if __name__ == "__main__":
    main()
