"""The whole app under a journal flood (issue 14, item 7). Prints JSON.

The real `CockpitApp`, in this process (`run_test`, headless, 160x50), with a live session to a
lab of its own (`bench-flood-<4 hex>`) over SSH, opens a fresh transient unit (`flood-<4 hex>`)
that waits for a go, then prints `--rate` lines a second for `--seconds` seconds, paced by its
own clock, and last a marker line with its sequence number and the moment it was printed. Mixes:
`decode` (SGLang decode lines only) and `mixed` (mostly plain log lines, 2% decode lines, and
once every 10,000 lines an 8-rank Python traceback of 10 lines a rank, the ranks writing to
journal streams of their own so the lines interleave as real ranks' do).

What each figure measures, and why:

- `first_paint_s`: from creating the app to its first screen update (the panes drawn, the unit
  named, `connecting…`); `state_on_screen_s`: to the status pane holding the unit's state
  (asyncssh imported, connect, first `systemctl show`). Both leave out the interpreter and the
  imports before the app exists: `bench_startup.py` times a real launch from the fork.
- `cpu_us_per_line`: this process's CPU time (`time.process_time()`: every thread, so the SSH
  transport, parsing, folding and drawing alike) from the go to the last line received, over
  the flood lines received. The app's cost of keeping up, whatever the machine's core count.
  `cpu_pct_of_one_core` is the same CPU time over the window's wall time.
- `lag_s_at_end`: from the moment the unit printed its marker (the flood's own `time.time()`:
  the lab is a container on this kernel, so its clock is this clock) to the moment the batch
  holding it has been folded into the app's journal rows (`JournalFeed.deliver` returned; the
  rows are `app.session.rows`, which the journal view draws). Taken there, not by polling the
  rows, which woke the app's loop 200 times a second beside what it measured. Zero-ish means
  the app kept up; seconds mean a backlog queued somewhere
  (journald, SSH, or the app's loop). `lag_journald_to_app_s` starts at journald's receipt stamp.
- `frame_ms_p50`/`frame_ms_p95`: main-thread time per screen update: the update itself
  (`Screen._on_timer_update`: layout, the journal view's visible lines rendered, the compositor)
  plus the feed's `deliver` of every batch it draws (fold into the rows, then every subscriber:
  the throughput series, the journal view's `show_added`). `deliver_ms` (per batch) and
  `screen_update_ms` are the parts. Above ~16 ms a frame, keys wait and the screen stutters.
- `frame_to_terminal_ms` (with `--terminal`): what a person waits for. The app draws on a
  160x50 pseudo-terminal through Textual's real driver, read by another process (`cat`) as a
  terminal is (a reading thread here took the GIL from the app's own threads: to the terminal
  p95 25 ms against 18 read by `cat`, the same app); per batch, from the batch reaching
  `JournalFeed.deliver` to Textual's writer thread having
  flushed the first frame drawn after it: the wait for the next screen update, the app's own
  handler, the style pass and compositor, and the write to the terminal. It replaces the frame
  figure `bench_panes.py` printed, which timed the view's append and the visible rows'
  `render_line` only.
- `behind_max_lines`: the most the journal's title said it trailed journald by (`behind by ~N
  lines`) during the flood; 0 when it never fell behind. `journal_late_s`: how late the feed
  said the journal came (its `late_s`, what the frames' pacing reads), sampled every 50 ms.
- `gc_collections`: the cyclic collector's collections during the flood, by generation, each
  timed from `gc.callbacks` (`gc_collected_objects`: what they freed). A collection stops the
  main thread wherever an allocation set it off, so a long one is a frame's tail.
- `rss_mb`: peak resident memory of this process (`ru_maxrss`), the app's whole life.
- `lines_sent` (the flood's own count, marker included), `lines_received` (flood lines, i.e. not
  systemd's own, in the batches the session's journal feed folded into its rows), and
  `lines_in_lab_journal` (`journalctl -u UNIT` inside the lab, systemd's lines left out): `lost`
  is what the lab's journal holds and the app never received. `received_per_s` counts arrivals
  in each second after the go.

`--knee R1,R2,...` runs one flood a rate (fresh app, fresh unit, the same lab), lowest first, and
prints each rate's lag and backlog and `knee_lines_per_s`: the highest rate up to which every
flood kept up (the marker in the app within KEPT_UP_S of its printing, nothing lost). Its
anchors are measured in the same run. After each flood, `journalctl -u UNIT -o json` with the
cockpit's fields (cockpit.systemd.journal.OUTPUT) reads the flood's lines in the lab to
/dev/null, timed there: `journalctl_lines_per_s` (the median over the floods) and
`knee_over_journalctl`; that one reads a journal already written, with no flood running. The
live ones: each rate is flooded again for each of three commands, a fresh unit each, run by
OpenSSH from this machine with nothing of the cockpit: `openssh_json_follow`, the command the
issue names (`journalctl -f -o json` with the cockpit's fields), and `openssh_follower_command`,
the follower's very command (export); and `in_host_json_follow`, the issue's command as it
sustains the flood in the host: its output read there by `grep -m 1` for the marker, so only
that line crosses SSH (a few ms of the lag). `<name>_knee_lines_per_s` is the highest rate each
kept up with (the marker within KEPT_UP_S), `knee_over_<name>` the app's knee over it.

`--pin` puts the lab's processes on CPU 1 and this process (its threads, the `cat` reading its
terminal, OpenSSH's reader in `--knee`) on CPU 0 once the lab is up: the GPU host's journald,
sshd and the flood are then not on the app's core, as on a jump box whose host is elsewhere.
Unpinned, about half of the update's p95 to the terminal is the main thread waiting for a core
they hold (docs/facts.md); `pinned` in the JSON says which it was.

`--profile` runs cProfile on the main thread through the flood window (numbers then include its
overhead) and prints the top functions by cumulative time to stderr. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import resource
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from _common import emit, lab_up, pct
from bench_ssh_transport import pin
from textual.screen import Screen

from cockpit.config import Config
from cockpit.lab.lab import Lab
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.journal import follow_argv, journal_argv
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.launch import collect_less_often
from cockpit.ui.pacing import FLOOD_LATE_S

MARKER = "cockpit-bench flood end"
KEPT_UP_S = 1.0  # a flood whose marker reaches the app within this of its printing was kept up with
TRACEBACK_EVERY = 10_000  # lines between two 8-rank crashes in the mixed flood
POLL_S = 0.005
SLOW_UPDATE_MS = 16  # an update over this misses a 60 Hz frame

# Runs in the lab under Debian's python3: `flood.py RATE SECONDS MIX GO_FILE SUMMARY_FILE SITE_PACKAGES`.
FLOOD = r'''
import json, os, socket, sys, time

rate, seconds, mix, go, summary, sp = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], *sys.argv[4:7]
TB_EVERY, MARKER, RANKS = int(sys.argv[7]), sys.argv[8], 8


def stamp(rank="TP0"):
    return f"[{time.strftime('%Y-%m-%d %H:%M:%S')} {rank}]"


def decode(i, ts):
    return (f"{ts} Decode batch, #running-req: 32, #token: {i}, token usage: 0.13, cuda graph: True, "
            "gen throughput (token/s): 4351.94, #queue-req: 3\n")


def plain(i, ts):
    kind = i % 3
    if kind == 0:
        return f'INFO:     127.0.0.1:{40000 + i % 20000} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    if kind == 1:
        return (f"{ts} Prefill batch, #new-seq: 1, #new-token: {64 + i % 900}, #cached-token: {i % 512}, "
                "token usage: 0.13, #running-req: 31, #queue-req: 2\n")
    return f"{ts} Receive: obj=GenerateReqInput(rid='{i:016x}', sampling_params={{'max_new_tokens': 256}})\n"


def line(i, ts):
    if mix == "decode" or i % 50 == 0:
        return decode(i, ts)
    return plain(i, ts)


def crash_lines(rank):
    """SGLang's scheduler logging a CUDA fault: 10 lines, the first with the rank's stamp."""
    mgr, mr = f"{sp}/sglang/srt/managers/scheduler.py", f"{sp}/sglang/srt/model_executor/model_runner.py"
    return [
        f"{stamp(f'TP{rank}')} Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{mgr}", line 2990, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        f'  File "{mgr}", line 1017, in event_loop_overlap',
        "    batch_result = self.run_batch(batch)",
        f'  File "{mgr}", line 1781, in run_batch',
        "    logits_output, next_token_ids = self.tp_worker.forward_batch_generation(batch)",
        f'  File "{mr}", line 2210, in forward',
        '    raise RuntimeError("CUDA error: an illegal memory access was encountered")',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]


def rank_worker(rank, commands):
    """A rank with a journal stream of its own (journald stamps a stream with the PID that opened
    it), printing its traceback line by line for each byte read, until EOF."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect("/run/systemd/journal/stdout")
    sock.sendall(b"python3\n\n6\n0\n0\n0\n0\n")
    while os.read(commands, 1):
        for text in crash_lines(rank):
            sock.sendall(text.encode() + b"\n")
            time.sleep(0.0005)  # so that the eight ranks' lines interleave
    os._exit(0)


ranks = []
if mix == "mixed":
    for rank in range(RANKS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            for _, other in ranks:  # the earlier ranks' pipes: held open here, they would never end
                os.close(other)
            os.close(w)
            rank_worker(rank, r)
        os.close(r)
        ranks.append((pid, w))

while not os.path.exists(go):
    time.sleep(0.002)
started = time.time()
t0 = time.monotonic()
total = int(rate * seconds)
out = sys.stdout.buffer
sent = tracebacks = 0
next_tb = TB_EVERY // 2
while sent < total:
    due = min(total, int((time.monotonic() - t0) * rate))
    if due > sent:
        ts = stamp()
        chunk = []
        while sent < due:
            if ranks and sent >= next_tb and sent + RANKS * 10 <= total:
                for _, w in ranks:
                    os.write(w, b"x")
                sent += RANKS * 10
                tracebacks += 1
                next_tb += TB_EVERY
                continue
            chunk.append(line(sent, ts))
            sent += 1
        out.write("".join(chunk).encode())
        out.flush()
    time.sleep(0.001)
for pid, w in ranks:
    os.close(w)
    os.waitpid(pid, 0)
flood_s = time.monotonic() - t0
marker_at = time.time()
out.write(f"{stamp()} {MARKER}: seq={sent + 1} at={marker_at:.6f}\n".encode())
out.flush()
with open(summary + ".tmp", "w") as f:
    json.dump({"lines_sent": sent + 1, "tracebacks": tracebacks, "started": started,
               "flood_s": flood_s, "marker_at": marker_at}, f)
os.rename(summary + ".tmp", summary)
while True:
    time.sleep(3600)
'''


def ssh(lab: Lab, *argv: str, input: str | None = None, timeout: float = 60, check: bool = True) -> str:
    """`argv` as root in the lab; its stdout."""
    proc = subprocess.run(
        lab.ssh_argv("root", list(argv)), input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} in the lab failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


class Clock:
    """Times the journal feed's batches and the screen updates, while `active`; counts the flood
    lines (everything but systemd's own, PID 1) each batch brought."""

    def __init__(self) -> None:
        self.active = False
        self.deliver_ms: list[float] = []
        self.frame_ms: list[float] = []
        self.update_ms: list[float] = []
        self.batch_lines: list[int] = []
        self.received = 0
        # The flood's marker line, set once a batch holding it has been delivered (folded into
        # the app's rows): the moment is taken there, not by polling the rows from the loop.
        self.marker: JournalEntry | None = None
        self.marker_seen_at = 0.0
        self.marker_in = asyncio.Event()
        self.arrivals: list[tuple[float, int]] = []  # (monotonic, flood lines) per batch
        self._pending_ms = 0.0  # the batches delivered since the last screen update
        # On a terminal (--terminal): when each batch reached the feed, which driver write
        # carried the first frame after it, and when the writer thread had flushed each write.
        self.batch_started: list[float] = []
        self.batch_write: list[int | None] = []
        self.first_update: float | None = None  # perf_counter at the end of the first screen update
        self.writes = 0  # the driver's writes so far (each screen update writes one frame)
        self.flushed: list[tuple[int, float]] = []  # (writes done, perf_counter) at each flush
        self.update_at: dict[int, tuple[float, float]] = {}  # write -> (start, end) of the update that made it
        self.slow: dict[str, int] = {}  # updates over SLOW_UPDATE_MS, by what they drew
        self.update_cpu_ms: list[float] = []  # the main thread's CPU time in each update
        self.gc_ms: dict[int, list[float]] = {0: [], 1: [], 2: []}  # each collection, by generation
        self.gc_collected = 0
        self._gc_started = 0.0

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A `gc.callbacks` hook: each collection's time, while `active`."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self.active:
            self.gc_ms[info["generation"]].append((time.perf_counter() - self._gc_started) * 1000)
            self.gc_collected += info["collected"]

    def timed_deliver(self, deliver: Callable[[list[JournalEntry]], None]) -> Callable[[list[JournalEntry]], None]:
        def timed(entries: list[JournalEntry]) -> None:
            t = time.perf_counter()
            deliver(entries)
            took = (time.perf_counter() - t) * 1000
            if self.active:
                self.batch_started.append(t)
                self.batch_write.append(None)
                flood = 0
                for entry in entries:
                    if entry.pid != 1:
                        flood += 1
                        if MARKER in entry.message:
                            self.marker, self.marker_seen_at = entry, time.time()
                            self.marker_in.set()
                self.received += flood
                self.arrivals.append((time.monotonic(), flood))
                self.deliver_ms.append(took)
                self._pending_ms += took
                self.batch_lines.append(len(entries))

        return timed

    def timed_update(self, update: Callable[[Screen], None]) -> Callable[[Screen], None]:
        def timed(screen: Screen) -> None:
            # What the update has to draw (Textual's own bookkeeping), said for each slow one.
            kind = "layout" if screen._layout_required else "scroll" if screen._scroll_required else "paint"
            dirty = ",".join(sorted({type(w).__name__ for w in screen._dirty_widgets}))
            t, cpu = time.perf_counter(), time.thread_time()
            update(screen)
            took = (time.perf_counter() - t) * 1000
            if self.active:
                self.update_cpu_ms.append((time.thread_time() - cpu) * 1000)
            if self.active and took > SLOW_UPDATE_MS:
                self.slow[f"{kind}: {dirty}"] = self.slow.get(f"{kind}: {dirty}", 0) + 1
            if self.first_update is None:
                self.first_update = time.perf_counter()
            if self.active:
                self.update_ms.append(took)
                self.update_at[self.writes] = (t, t + took / 1000)
                for k in range(len(self.batch_write) - 1, -1, -1):  # every batch still waiting for a frame
                    if self.batch_write[k] is not None:
                        break
                    self.batch_write[k] = self.writes
                self.frame_ms.append(took + self._pending_ms)
                self._pending_ms = 0.0

        return timed

    def flushed_at(self) -> Callable[[int], float | None]:
        """When the writer thread had flushed driver write number `write` (None: not by the end)."""
        done = [count for count, _ in self.flushed]

        def at(write: int) -> float | None:
            j = bisect.bisect_left(done, write)
            return self.flushed[j][1] if j < len(done) else None

        return at

    def to_terminal_ms(self) -> tuple[list[float], dict[str, list[float]]]:
        """Per batch: from reaching the feed to the terminal holding the frame drawn after it;
        and that time's parts: the wait for the screen update that drew it (`wait`: the batch's
        own `deliver`, then the loop's other work and the frame period, `queued`), that update
        (`update`), and from its end to the writer thread's flush (`write`)."""
        out: list[float] = []
        parts: dict[str, list[float]] = {"wait": [], "deliver": [], "queued": [], "update": [], "write": []}
        flushed_at = self.flushed_at()
        for started, write, deliver in zip(self.batch_started, self.batch_write, self.deliver_ms, strict=True):
            if not write or (flushed := flushed_at(write)) is None:
                continue
            out.append((flushed - started) * 1000)
            if (update := self.update_at.get(write)) is not None:
                waited = (update[0] - started) * 1000
                parts["wait"].append(waited)
                parts["deliver"].append(deliver)
                parts["queued"].append(waited - deliver)
                parts["update"].append((update[1] - update[0]) * 1000)
                parts["write"].append((flushed - update[1]) * 1000)
        return out, parts

    def update_to_terminal_ms(self) -> list[float]:
        """Per screen update: from its start to the writer thread having flushed the frame it
        wrote. The frame itself, drawn and on the terminal, without the wait for its turn."""
        flushed_at = self.flushed_at()
        return [
            (flushed - start) * 1000
            for write, (start, _end) in self.update_at.items()
            if (flushed := flushed_at(write)) is not None
        ]


class Terminal:
    """A 160x50 pseudo-terminal that the app draws on through Textual's real driver (which
    writes frames to fd 2 and reads keys from fd 0), drained by a process as a terminal would
    read it. The writer thread's flushes are timed: a frame is on the terminal once flushed."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.saved: list[int] = []
        self.log = sys.stderr

    def __enter__(self) -> Terminal:
        import fcntl
        import struct
        import termios

        from textual.drivers import linux_driver
        from textual.drivers._writer_thread import WriterThread

        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = [os.dup(fd) for fd in (0, 1, 2)]
        self.log = os.fdopen(os.dup(self.saved[2]), "w", buffering=1)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(slave)
        self.master = master

        # a process of its own, as a terminal is: a thread here would hold this process's GIL
        # for each read, beside the app's main and writer threads
        self.reader = subprocess.Popen(["cat"], stdin=master, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        clock = self.clock
        self._driver = linux_driver.LinuxDriver
        self._writer = linux_driver.WriterThread
        original_write = self._driver.write

        def write(driver: Any, data: str) -> None:
            clock.writes += 1
            original_write(driver, data)

        class TimedFile:
            """The driver's file, its writes counted and its flushes timed (writer thread)."""

            def __init__(self, file: Any) -> None:
                self.file, self.done = file, 0

            def write(self, text: str) -> int:
                self.done += 1
                return self.file.write(text)

            def flush(self) -> None:
                self.file.flush()
                clock.flushed.append((self.done, time.perf_counter()))

            def __getattr__(self, name: str) -> Any:
                return getattr(self.file, name)

        class TimedWriter(WriterThread):
            def __init__(self, file: Any) -> None:
                super().__init__(TimedFile(file))

        self._original_write = original_write
        self._driver.write = write  # type: ignore[method-assign]
        linux_driver.WriterThread = TimedWriter  # type: ignore[misc]
        return self

    def __exit__(self, *exc: object) -> None:
        from textual.drivers import linux_driver

        self._driver.write = self._original_write  # type: ignore[method-assign]
        linux_driver.WriterThread = self._writer  # type: ignore[misc]
        for fd, saved in zip((0, 1, 2), self.saved, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        os.close(self.master)
        self.reader.terminate()
        self.reader.wait()
        self.log.close()


@contextlib.asynccontextmanager
async def running(app: CockpitApp, terminal: Terminal | None) -> AsyncIterator[None]:
    """The app, headless (no terminal: nothing is written) or on the terminal."""
    if terminal is None:
        async with app.run_test(headless=True, size=(160, 50)):
            yield
        return
    task = asyncio.create_task(app.run_async())
    try:
        await until(lambda: app.is_running or task.done(), 30, "the app running")
        yield
    finally:
        app.exit()
        await asyncio.wait_for(task, 30)


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` every POLL_S seconds (what the app holds changes without an event to wait on)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(POLL_S)


async def report_progress(clock: Clock, app: CockpitApp, log: Any, every: float = 2.0) -> None:
    """Lines received so far, on stderr, while the flood runs."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(every)
        print(
            f"{time.monotonic() - started:5.1f} s: {clock.received:,} lines received, feed {app.session.journal.state}",
            file=log,
        )


async def watch_behind_and_late(app: CockpitApp, most: list[int], lates: list[float]) -> None:
    while True:
        most[0] = max(most[0], app.journal_view.behind)
        lates.append(app.session.journal.late_s())
        await asyncio.sleep(0.05)


def lab_journal_count(lab: Lab, unit: str) -> int:
    """The unit's journal lines in the lab, systemd's own (PID 1) left out."""
    out = ssh(
        lab,
        "sh",
        "-c",
        f'journalctl -u {unit} -q -o json --output-fields=_PID --no-pager | grep -c -v \'"_PID":"1"\'',
        check=False,
    )
    return int(out.strip() or 0)


def read_summary(lab: Lab, path: str, timeout: float = 10) -> dict[str, Any]:
    """The flood's own account (written just after its marker)."""
    deadline = time.monotonic() + timeout
    while True:
        text = ssh(lab, "cat", path, check=False)
        if text.strip():
            return json.loads(text)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the flood wrote no {path}")
        time.sleep(0.1)


def machine_cpu() -> tuple[int, int]:
    """(busy, all) clock ticks of every core of this machine so far (/proc/stat): the lab runs on
    them too, so this is the flood's whole cost, both ends."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def machine_busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How busy all the machine's cores were between two `machine_cpu` readings, in percent."""
    return round(100 * (after[0] - before[0]) / max(1, after[1] - before[1]), 1)


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": round(pct(values, 50), 3), "p95": round(pct(values, 95), 3), "max": round(max(values), 3)}


async def start_flood(lab: Lab, unit: str, args: argparse.Namespace, site_packages: str) -> tuple[str, str]:
    """The flood's unit, started and waiting for its go file: (the go file, its summary file)."""
    tag = unit.removesuffix(".service")
    go, summary_file = f"/tmp/{tag}.go", f"/tmp/{tag}.json"
    await asyncio.to_thread(ssh, lab, "systemctl", "stop", "sglang-demo.service")  # its lines are not ours
    await asyncio.to_thread(ssh, lab, "tee", f"/tmp/{tag}.py", input=FLOOD)
    await asyncio.to_thread(
        ssh,
        lab,
        "systemd-run",
        f"--unit={unit}",
        "--collect",
        "--quiet",
        "--description=cockpit benchmark flood",  # systemd's lines would name the argv, marker included
        "-p",
        "LogRateLimitIntervalSec=0",
        "/usr/bin/python3",
        f"/tmp/{tag}.py",
        str(args.rate),
        str(args.seconds),
        args.mix,
        go,
        summary_file,
        site_packages,
        str(TRACEBACK_EVERY),
        MARKER,
    )
    return go, summary_file


async def flood(lab: Lab, lab_name: str, unit: str, args: argparse.Namespace, site_packages: str) -> dict[str, Any]:
    go, summary_file = await start_flood(lab, unit, args, site_packages)
    clock = Clock()
    original_update = Screen._on_timer_update
    Screen._on_timer_update = clock.timed_update(original_update)  # type: ignore[method-assign]
    profiler = cProfile.Profile() if args.profile else None
    terminal = Terminal(clock) if args.terminal else None
    behind_seen = [0]  # the most lines the journal's title said it was behind by
    lates: list[float] = []  # the feed's late_s, every 50 ms of the flood
    gc.callbacks.append(clock.on_gc)
    try:
        if terminal is not None:
            terminal.__enter__()
        collect_less_often()  # as `open_app` does for the real command
        created = time.perf_counter()
        # Port 9: nothing listens, so readiness says "not ready" rather than asking another server.
        app = CockpitApp(Config(), Target(lab_name, unit, url="http://127.0.0.1:9"))
        feed = app.session.journal
        feed.deliver = clock.timed_deliver(feed.deliver)  # type: ignore[method-assign]
        deployment_read = asyncio.Event()
        listener = app.session.listener
        heard = listener.deployment

        def deployment(*a: Any) -> None:
            heard(*a)
            deployment_read.set()

        listener.deployment = deployment  # type: ignore[method-assign]
        async with running(app, terminal):
            await until(lambda: app.status_pane.status is not None, 60, "the unit's status")
            state_on_screen = time.perf_counter() - created
            first_paint = (clock.first_update or time.perf_counter()) - created
            await until(lambda: feed.state == "following", 60, "following the journal")
            await asyncio.wait_for(deployment_read.wait(), 30)
            await asyncio.sleep(1)  # the start-up settles: backlog drawn, first polls answered

            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            clock.active = True
            if profiler is not None:
                profiler.enable()
            cpu0, wall0, machine0 = time.process_time(), time.monotonic(), machine_cpu()
            await asyncio.to_thread(ssh, lab, "touch", go)
            progress = asyncio.create_task(report_progress(clock, app, terminal.log if terminal else sys.stderr))
            behind_watch = asyncio.create_task(watch_behind_and_late(app, behind_seen, lates))
            try:
                try:
                    await asyncio.wait_for(clock.marker_in.wait(), args.seconds * 10 + 60)
                except TimeoutError:
                    raise RuntimeError("the marker never reached the app") from None
            finally:
                progress.cancel()
                behind_watch.cancel()
            seen_at, marker = clock.marker_seen_at, clock.marker
            assert marker is not None
            sent = await asyncio.to_thread(read_summary, lab, summary_file)
            # Rank lines may still trail the marker: wait for every line, or 5 s without progress.
            last, still = clock.received, time.monotonic()
            while clock.received < sent["lines_sent"] and time.monotonic() - still < 5:
                await asyncio.sleep(0.05)
                if clock.received != last:
                    last, still = clock.received, time.monotonic()
            cpu, wall, machine = time.process_time() - cpu0, time.monotonic() - wall0, machine_cpu()
            if profiler is not None:
                profiler.disable()
            clock.active = False
            in_lab = await asyncio.to_thread(lab_journal_count, lab, unit)
            model = app.journal_view.model
            held = {"records": len(model.records), "rows": len(model.rows), "dropped_records": model.discarded}
    finally:
        gc.callbacks.remove(clock.on_gc)
        Screen._on_timer_update = original_update  # type: ignore[method-assign]
        if terminal is not None:
            terminal.__exit__(None, None, None)

    per_s = [0] * (int(wall) + 1)
    for at, n in clock.arrivals:
        per_s[min(len(per_s) - 1, int(at - wall0))] += n
    received = clock.received
    to_terminal, parts = clock.to_terminal_ms()
    result: dict[str, Any] = {
        "benchmark": "app_flood",
        "rate_lines_per_s": args.rate,
        "seconds": args.seconds,
        "mix": args.mix,
        "mix_detail": (
            "SGLang decode lines only"
            if args.mix == "decode"
            else "plain lines (access, prefill, receive), every 50th a decode line, and every "
            f"{TRACEBACK_EVERY:,} lines an 8-rank interleaved traceback (10 lines a rank, 8 PIDs)"
        ),
        "tracebacks_sent": sent["tracebacks"],
        "flood_s": round(sent["flood_s"], 3),
        "achieved_lines_per_s": round((sent["lines_sent"] - 1) / sent["flood_s"]),
        "first_paint_s": round(first_paint, 3),
        "state_on_screen_s": round(state_on_screen, 3),
        "cpu_us_per_line": round(cpu / max(1, received) * 1e6, 2),
        "cpu_s": round(cpu, 3),
        "window_s": round(wall, 3),
        "cpu_pct_of_one_core": round(100 * cpu / wall, 1),
        "machine_busy_pct": machine_busy_pct(machine0, machine),
        "lag_s_at_end": round(seen_at - sent["marker_at"], 3),
        "lag_journald_to_app_s": round(seen_at - (marker.realtime_us or 0) / 1e6, 3),
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_mb_peak_before_flood": round(rss_before, 1),
        "frame_ms_p50": round(pct(clock.frame_ms, 50), 3),
        "frame_ms_p95": round(pct(clock.frame_ms, 95), 3),
        "frame_ms_max": round(max(clock.frame_ms), 3),
        "frame_measures": (
            "main-thread ms per screen update: Screen._on_timer_update (layout, render_line of the visible "
            "rows, compositor) plus JournalFeed.deliver of every batch it draws (fold into the rows, the "
            "throughput series, JournalView.show_added)"
        ),
        "update_to_terminal_ms": summary(clock.update_to_terminal_ms()) if terminal is not None else None,
        "update_to_terminal_measures": (
            "per screen update, on a pseudo-terminal through Textual's real driver: from the update's start "
            "to the writer thread having flushed the frame it wrote (the frame's cost, not its wait)"
        ),
        "frame_to_terminal_ms": summary(to_terminal) if terminal is not None else None,
        "frame_to_terminal_parts_ms": {k: summary(v) for k, v in parts.items() if v} if terminal is not None else None,
        "frame_to_terminal_measures": (
            "per batch, on a pseudo-terminal through Textual's real driver: from the batch reaching "
            "JournalFeed.deliver to the writer thread having flushed the first frame drawn after it"
        ),
        "behind_max_lines": behind_seen[0],
        "journal_late_s": summary(lates),
        "journal_late_measures": (
            "the feed's late_s every 50 ms from the go to the marker: the last batch's delay beyond the "
            f"link's own, what the frame pacing reads (frames slow above FLOOD_LATE_S = {FLOOD_LATE_S:g} s); "
            "journald wakes its followers at most every 250 ms, so up to 0.25 of it is the host's own"
        ),
        "deliver_ms": summary(clock.deliver_ms),
        "screen_update_ms": summary(clock.update_ms) if clock.update_ms else None,
        "screen_update_cpu_ms": summary(clock.update_cpu_ms),
        "screen_update_cpu_measures": (
            "the main thread's CPU time (time.thread_time) in each screen update: what the update itself "
            "costs; screen_update_ms minus it is the time the thread waited for a core (the lab's flood, "
            "journald, sshd and this process's other threads share this machine's cores)"
        ),
        "gc_collections": {
            name: {"count": len(clock.gc_ms[generation]), "ms": summary(clock.gc_ms[generation])}
            for generation, name in enumerate(("young", "middle", "full"))
        },
        "gc_collected_objects": clock.gc_collected,
        "gc_measures": (
            "the cyclic collector's collections from the go to the last line, by generation, each timed by "
            "gc.callbacks: the main thread's pauses wherever an allocation set one off (in a batch's deliver, "
            "a screen update or the loop between)"
        ),
        "batches": len(clock.deliver_ms),
        "screen_updates": len(clock.update_ms),
        "slow_updates": dict(sorted(clock.slow.items(), key=lambda kv: -kv[1])[:10]),
        "slow_updates_measures": (
            f"screen updates over {SLOW_UPDATE_MS} ms, by what Textual had to do (a layout, a scroll or a "
            "paint) and the classes of the widgets it had marked dirty"
        ),
        "batch_lines": {"p50": pct(clock.batch_lines, 50), "max": max(clock.batch_lines)},
        "lines_sent": sent["lines_sent"],
        "lines_received": received,
        "lines_in_lab_journal": in_lab,
        "lost": max(0, in_lab - received),
        "duplicated": max(0, received - in_lab),
        "lost_before_the_journal": max(0, sent["lines_sent"] - in_lab),
        "received_per_s": per_s,
        "journal_view_holds": held,
        "profiled": profiler is not None,
        "cpus": os.cpu_count(),  # the lab (flood, journald, sshd) runs on these too
    }
    if profiler is not None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(args.profile_top)
        stats.sort_stats("tottime").print_stats(args.profile_top)
        print(text.getvalue(), file=sys.stderr)
        if args.profile_out:
            stats.dump_stats(args.profile_out)
    return result


def journalctl_rate(lab: Lab, unit: str) -> float:
    """Lines a second the lab's journalctl reads the unit's journal at, with the follower's own
    output options, to /dev/null (timed in the lab: no SSH in the figure)."""
    from cockpit.systemd.journal import OUTPUT

    options = " ".join(f"'{o}'" for o in OUTPUT)
    script = (
        f"n=$(journalctl -u {unit} -q -o cat --no-pager | wc -l); b=$(date +%s.%N); "
        f"journalctl -u {unit} -q {options} > /dev/null; e=$(date +%s.%N); echo $n $b $e"
    )
    n, began, ended = ssh(lab, "sh", "-c", script).split()
    return int(n) / (float(ended) - float(began))


# The live anchors: OpenSSH running, with nothing of the cockpit in the way, the command the issue
# names (`journalctl -f -o json` with the cockpit's fields, as `journal_argv` prints them) and the
# follower's very command (`follow_argv`, the export format); and the command read in the
# host itself, by grep there, so that only the marker's line crosses SSH.
ANCHORS = {
    "openssh_json_follow": lambda unit: journal_argv(unit, "-n", "all", "--follow"),
    "openssh_follower_command": lambda unit: follow_argv(unit, "-n", "all"),
    "in_host_json_follow": lambda unit: [
        "sh",
        "-c",
        f"{shlex.join(journal_argv(unit, '-n', 'all', '--follow'))} | grep -m 1 -F -e {shlex.quote(MARKER)}",
    ],
}


async def openssh_flood(
    lab: Lab, unit: str, argv: list[str], args: argparse.Namespace, site_packages: str
) -> dict[str, Any]:
    """The same flood read by OpenSSH running `argv` in the lab, as `ssh host journalctl -f ...`
    would, this process only looking for the marker in what arrives: what the host, its
    journald, journalctl and sshd sustain live, on this same machine."""
    go, summary_file = await start_flood(lab, unit, args, site_packages)
    before = machine_cpu()
    seen_at = await asyncio.to_thread(follow_until_marker, lab, argv, go, args.seconds * 10 + 60)
    busy = machine_busy_pct(before, machine_cpu())
    sent = await asyncio.to_thread(read_summary, lab, summary_file)
    return {
        "achieved_lines_per_s": round((sent["lines_sent"] - 1) / sent["flood_s"]),
        "lag_s_at_end": round(seen_at - sent["marker_at"], 3),
        "machine_busy_pct": busy,
    }


def follow_until_marker(lab: Lab, argv: list[str], go: str, timeout: float) -> float:
    """Run `argv` in the lab through OpenSSH, give the flood its go, and read until its marker:
    the moment (this clock, the flood's clock) it arrived."""
    with subprocess.Popen(lab.ssh_argv("root", argv), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) as reader:
        assert reader.stdout is not None
        try:
            time.sleep(1)  # journalctl is following
            ssh(lab, "touch", go)
            deadline, tail, mark = time.monotonic() + timeout, b"", MARKER.encode()
            while time.monotonic() < deadline and (chunk := reader.stdout.read1(1 << 20)):
                if mark in tail + chunk:
                    return time.time()
                tail = chunk[-len(mark) :]
            raise RuntimeError("OpenSSH's journalctl gave no marker")
        finally:
            reader.kill()


async def knee(lab: Lab, lab_name: str, suffix: str, args: argparse.Namespace, site_packages: str) -> dict:
    """One flood a rate, lowest first; the knee against what journalctl reads in the lab."""
    rates = sorted(int(r) for r in args.knee.split(","))
    floods, anchors = [], []
    for k, rate in enumerate(rates):
        unit = f"flood-{suffix}-{k}.service"
        one = argparse.Namespace(**{**vars(args), "rate": rate, "profile": False})
        lives = {name: f"flood-{suffix}-{k}-{n}.service" for n, name in enumerate(ANCHORS)}
        plain: dict[str, dict[str, Any]] = {}
        try:
            result = await flood(lab, lab_name, unit, one, site_packages)
            anchors.append(await asyncio.to_thread(journalctl_rate, lab, unit))
            for name, live in lives.items():
                plain[name] = await openssh_flood(lab, live, ANCHORS[name](live), one, site_packages)
                plain[name]["kept_up"] = plain[name]["lag_s_at_end"] <= KEPT_UP_S
        finally:
            for each in (unit, *lives.values()):
                await asyncio.to_thread(ssh, lab, "systemctl", "stop", each, check=False)
                await asyncio.to_thread(ssh, lab, "systemctl", "reset-failed", each, check=False)
        kept = result["lag_s_at_end"] <= KEPT_UP_S and result["lost"] == 0
        floods.append(
            {
                "rate_lines_per_s": rate,
                "achieved_lines_per_s": result["achieved_lines_per_s"],
                "lag_s_at_end": result["lag_s_at_end"],
                "behind_max_lines": result["behind_max_lines"],
                "cpu_pct_of_one_core": result["cpu_pct_of_one_core"],
                "machine_busy_pct": result["machine_busy_pct"],
                "frame_ms_p95": result["frame_ms_p95"],
                "lost": result["lost"],
                "kept_up": kept,
                "journalctl_lines_per_s": round(anchors[-1]),
                **plain,
            }
        )

    def highest(kept: list[tuple[bool, int]]) -> int:
        """The highest rate up to which every flood was kept up with."""
        rates = []
        for ok, rate in kept:
            if not ok:
                break
            rates.append(rate)
        return max(rates, default=0)

    knee_rate = highest([(f["kept_up"], f["achieved_lines_per_s"]) for f in floods])
    plain_knees = {
        name: highest([(f[name]["kept_up"], f[name]["achieved_lines_per_s"]) for f in floods]) for name in ANCHORS
    }
    anchor = sorted(anchors)[len(anchors) // 2]
    return {
        "benchmark": "app_flood_knee",
        "mix": args.mix,
        "seconds": args.seconds,
        "kept_up_means": f"the marker in the app within {KEPT_UP_S:g} s of its printing, 0 lost",
        "floods": floods,
        "knee_lines_per_s": knee_rate,
        "journalctl_lines_per_s": round(anchor),
        "journalctl_measures": "journalctl -u UNIT -o json with the cockpit's fields (cockpit.systemd.journal.OUTPUT) "
        "to /dev/null in the lab, the median over the floods' units",
        "knee_over_journalctl": round(knee_rate / anchor, 3),
        **{f"{name}_knee_lines_per_s": knee for name, knee in plain_knees.items()},
        "openssh_knee_measures": "the same rates, each flooded again and read live by OpenSSH running a "
        "command (nothing of the cockpit): openssh_json_follow the issue's `journalctl -f -o json` with the "
        "cockpit's fields, openssh_follower_command the follower's own (export), in_host_json_follow the "
        "issue's command read in the host by grep for the marker (only that line crosses SSH); the highest "
        "rate each kept up with",
        **{f"knee_over_{name}": round(knee_rate / knee, 3) if knee else None for name, knee in plain_knees.items()},
        "cpus": os.cpu_count(),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="lines a second (default 10000)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=25,
        help="how long the flood lasts (default 25: at 10k lines/s past the journal view's 200k-record window)",
    )
    parser.add_argument("--mix", choices=("decode", "mixed"), default="mixed")
    parser.add_argument("--terminal", action="store_true", help="draw on a pseudo-terminal with the real driver")
    parser.add_argument("--knee", help="comma-separated rates: one flood each, and the knee (see the docstring)")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the lab's processes on CPU 1, the app (its threads, its terminal's reader) on CPU 0: see the docstring",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the main thread through the flood")
    parser.add_argument("--profile-top", type=int, default=25, help="functions to print per ordering")
    parser.add_argument("--profile-out", type=Path, help="also write the pstats file here")
    args = parser.parse_args()

    suffix = secrets.token_hex(2)
    lab_name, unit = f"bench-flood-{suffix}", f"flood-{suffix}.service"
    lab = await asyncio.to_thread(lab_up, lab_name)
    try:
        info = lab.info()
        assert info is not None
        pinned = pin(lab) if args.pin else None
        if args.knee:
            result = await knee(lab, lab_name, suffix, args, info.site_packages)
        else:
            result = await flood(lab, lab_name, unit, args, info.site_packages)
    finally:
        try:
            await asyncio.to_thread(ssh, lab, "systemctl", "stop", unit, check=False)
            await asyncio.to_thread(ssh, lab, "systemctl", "reset-failed", unit, check=False)
        finally:
            await asyncio.to_thread(lab.down)
    result["pinned"] = None if pinned is None else {"lab_cpu": 1, "app_cpu": 0, "lab_processes": pinned}
    emit(result)


if __name__ == "__main__":
    asyncio.run(main())
