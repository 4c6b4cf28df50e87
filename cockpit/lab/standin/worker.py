"""One tensor-parallel rank of the stand-in: logs the rank's start-up, then waits to crash.

Run as `python -m cockpit.lab.standin.worker RANK TP_SIZE STREAMS STARTUP_S ARCH STATUS_FD`; reads
`crash` or `orphan` on stdin, reports `ready` on STATUS_FD. A crash raises a real exception through
real frames of this file, logs it as SGLang's scheduler does (`Scheduler hit an exception: ...`) and
exits 1; an orphan leaves the unit's cgroup and lives on. Tests name the frames' line numbers.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from cockpit.lab.standin.log import Logger, connect_own_journal_stream, rank_prefix


class StandinCudaError(RuntimeError):
    """What the simulated crash raises; named so nobody mistakes it for a real CUDA fault."""


def start_up(log: Logger, startup_s: float, arch: str) -> None:
    step = startup_s / 4
    log.info("Load weight begin. avail mem=78.52 GB")
    time.sleep(step)
    log.info(f"Load weight end. elapsed={step:.2f} s, type={arch}, avail mem=63.10 GB, mem usage=15.42 GB.")
    log.info("Memory pool end. avail mem=9.87 GB")
    time.sleep(step)
    log.info("Capture cuda graph begin. This can take up to several minutes. avail mem=9.80 GB")
    time.sleep(step)
    log.info(f"Capture cuda graph end. Time elapsed: {step:.2f} s. mem usage=0.71 GB. avail mem=9.09 GB.")


def _launch_kernel(batch: int) -> None:
    raise StandinCudaError(
        "CUDA error: an illegal memory access was encountered (cockpit stand-in: simulated crash, "
        f"batch {batch}; no GPU is involved)")


def _forward(batch: int) -> None:
    _launch_kernel(batch)


def run_batch(batch: int) -> None:
    _forward(batch)


def crash(log: Logger, line_by_line: bool) -> None:
    try:
        run_batch(7)
    except Exception:
        text = "".join(traceback.format_exception(*sys.exc_info()))
    message = f"Scheduler hit an exception: {text}"
    if not line_by_line:
        log.info(message)  # one write, as logging does: the block arrives whole
        return
    # With its own journal stream, each line of each rank arrives as written: interleaved.
    first, *rest = message.split("\n")  # the traceback's own final newline leaves the blank line logging adds
    log.info(first)
    for line in rest:
        time.sleep(0.002)
        log.plain(line)


# Where a process can leave its unit: the hierarchy systemd tracks units by (v1 `name=systemd` on
# a hybrid host), the unified one, or the cgroup2 root of a pure-v2 host.
CGROUP_ROOTS = ("/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")


def orphan() -> None:
    """Out of the unit's cgroup into /cockpit-orphans, so that stopping the unit does not reach
    this process; then it waits, stuck and silent, until something ends it by PID."""
    for root in CGROUP_ROOTS:
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        try:
            os.makedirs(os.path.join(root, "cockpit-orphans"), exist_ok=True)
            with open(os.path.join(root, "cockpit-orphans", "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            continue
    while True:
        time.sleep(3600)


def main(argv: list[str]) -> int:
    rank, tp_size, streams = int(argv[0]), int(argv[1]), argv[2]
    startup_s, arch, status_fd = float(argv[3]), argv[4], int(argv[5])
    own = streams == "own" and connect_own_journal_stream(f"sglang-tp{rank}")
    if hasattr(sys.stdout, "reconfigure"):  # a TextIOWrapper: always, for the process the server starts
        sys.stdout.reconfigure(line_buffering=False)
    log = Logger(rank_prefix(rank, tp_size))
    start_up(log, startup_s, arch)
    os.write(status_fd, b"ready\n")
    os.close(status_fd)
    for line in sys.stdin:
        if line.strip() == "crash":
            crash(log, line_by_line=own)
            return 1
        if line.strip() == "orphan":
            orphan()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
