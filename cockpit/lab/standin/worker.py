"""One tensor-parallel rank of the stand-in: logs the rank's start-up, then waits to crash.

Run as `python -m cockpit.lab.standin.worker RANK TP_SIZE STREAMS STARTUP_S ARCH STATUS_FD WATCHDOG_S FAIL_IN [meet]`;
reads `crash`, `orphan` or `hang` on stdin, reports `ready` on STATUS_FD. A crash raises through real frames of this
file, logs as SGLang's scheduler does, SIGQUITs the server; an orphan leaves the cgroup; a hang blocks. Lines are named.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from cockpit.lab.standin.engine import MAX_TOTAL_NUM_TOKENS
from cockpit.lab.standin.log import JOURNAL_IDENTIFIER, Logger, connect_own_journal_stream, rank_prefix


class StandinCudaError(RuntimeError):
    """What the simulated crash raises; named so nobody mistakes it for a real CUDA fault."""


def start_up(log: Logger, step: float, arch: str, fail_in: str) -> None:
    """One rank's start-up as SGLang 0.5.23 logs it (PHASES, below): each phase begun and ended
    by the release's own lines (the memory pool: its KV cache, its end), `step` s apiece here.
    The cockpit's start-up timeline reads them; a rank told to fail in a phase raises there.
    (This function keeps its length: the crash below is recorded with its line numbers.)"""
    for phase, begin, end in PHASES:
        if begin:
            log.info(begin)
        load_phase(phase, step, phase == fail_in)
        say(log, end, step, arch)


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


def _wait_for_peers(peers: int) -> None:
    """Where a hung rank sits: a collective whose peers never arrive (NCCL's all-reduce, as
    SGLang's hangs show it in a py-spy dump). It never returns."""
    import threading

    threading.Event().wait()


def all_reduce(peers: int) -> None:
    _wait_for_peers(peers)


def forward_hung(tp_size: int) -> None:
    all_reduce(tp_size)


def watchdog(log: Logger, timeout: float) -> None:
    """SGLang's scheduler watchdog (0.5.23 `WatchdogRaw`): no forward progress for `timeout`
    seconds, then its line, then SIGQUIT to the parent 5 s later."""
    import signal
    import threading

    def fire() -> None:
        time.sleep(timeout)
        log.info(f"Scheduler watchdog timeout (self.watchdog_timeout={timeout}, self.soft=False)")
        time.sleep(5)
        os.kill(os.getppid(), signal.SIGQUIT)

    threading.Thread(target=fire, daemon=True).start()


# (phase, first line or "", last lines) of a rank's start-up in SGLang 0.5.23: distributed/bootstrap.py,
# model_executor/model_runner.py, mem_cache/memory_pool.py and kv_cache_configurator.py,
# model_runner_components/cuda_graph_setup.py (tests/data/sglang-0.5.23/real-tp1-start.jsonl).
PHASES = (
    ("init", "Init parallel begin.", ("Init parallel ends. elapsed={elapsed:.2f} s",)),
    (
        "load_weight",
        "Load weight begin. avail mem=139.62 GB",
        ("Load weight end. elapsed={elapsed:.2f} s, type={arch}, avail mem=124.20 GB, mem usage=15.42 GB.",),
    ),
    (
        "memory_pool",
        "",
        (
            f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {MAX_TOTAL_NUM_TOKENS}, K size: 51.35 GB, "
            "V size: 51.35 GB",
            "Memory pool end. avail mem=21.49 GB",
        ),
    ),
    (
        "cuda_graph",
        "Capture target decode CUDA graph begin. backend=flashinfer, num_tokens_per_req=1, avail mem=21.41 GB",
        (
            "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32], elapsed={elapsed:.2f} s, "
            "mem usage=0.71 GB, avail mem=20.70 GB.",
        ),
    ),
)


def phase_seconds(startup_s: float, rank: int) -> float:
    """Each phase's time on a rank: `startup_s` over the phases, the last rank slowest."""
    return startup_s / len(PHASES) * (1 + 0.05 * rank)


def say(log: Logger, lines: tuple[str, ...], step: float, arch: str) -> None:
    """The lines that end a phase, each a record of its own."""
    for line in lines:
        log.info(line.format(elapsed=step, arch=arch))


MEET = False  # the launch spans nodes: the init phase waits for the meeting (argv's "meet")


def load_phase(phase: str, seconds: float, fail: bool) -> None:
    time.sleep(seconds)
    if phase == "init" and MEET:  # a node of several: the other nodes first (nodes.py), then on
        sys.stdin.readline()
    if fail:
        _allocate(phase)


def _allocate(phase: str) -> None:
    raise StandinCudaError(
        f"CUDA out of memory during {phase} (cockpit stand-in: simulated start-up failure; no GPU is involved)"
    )


def main(argv: list[str]) -> int:
    """A rank's life: its start-up, then what the server says on stdin until it closes it (SGLang's
    ShutdownReq: the rank ends, 0). An exception, in its start-up or on `crash`, ends it as
    run_scheduler_process does: the traceback, SIGQUIT to the server, exit 0."""
    import signal

    from cockpit.lab.standin.proctitle import take_title

    take_title()
    rank, tp_size, streams = int(argv[0]), int(argv[1]), argv[2]
    startup_s, arch, status_fd = float(argv[3]), argv[4], int(argv[5])
    watchdog_s, fail_in = float(argv[6]), argv[7]
    global MEET
    MEET = argv[8:9] == ["meet"]
    own = streams == "own" and connect_own_journal_stream(os.environ[JOURNAL_IDENTIFIER])
    if hasattr(sys.stdout, "reconfigure"):  # a TextIOWrapper: always, for the process the server starts
        sys.stdout.reconfigure(line_buffering=False)
    log = Logger(rank_prefix(rank, tp_size))
    try:
        start_up(log, phase_seconds(startup_s, rank), arch, fail_in)
    except StandinCudaError:
        text = "".join(traceback.format_exception(*sys.exc_info()))
        log.info(f"Scheduler hit an exception: {text}")
        os.kill(os.getppid(), signal.SIGQUIT)
        return 0
    os.write(status_fd, b"ready\n")
    os.close(status_fd)
    for line in sys.stdin:
        if line.strip() == "crash":
            crash(log, line_by_line=own)
            os.kill(os.getppid(), signal.SIGQUIT)
            return 0
        if line.strip() == "orphan":
            orphan()
        if line.strip() == "hang":
            watchdog(log, watchdog_s)
            forward_hung(tp_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
