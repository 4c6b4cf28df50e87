"""The stand-in's main process: start-up sequence, rank workers, and SGLang's HTTP endpoints.

A small HTTP/1.1 server on asyncio streams (keep-alive, chunked SSE), because the lab has
only the standard library. Endpoints follow SGLang's: `/health` (nothing listens until the ranks
are up, then 503 with no body through the warm-up; then, as in 0.5.23, the generating
`/health_generate` handler unless the unit's environment turns
SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION off, when it answers 200 at once), `/ready`,
`/model_info`, `/server_info` (args plus `internal_states`), `/v1/models`, streaming and
non-streaming `/v1/completions` and `/v1/chat/completions`, `/metrics` with
`--enable-metrics`; and two of its own under `/standin/` (crash, stats).

It lives and dies as 0.5.23's main process does (tests/data/sglang-0.5.23/real-tp1-*.jsonl): a
watchdog looks at its children once a second and SIGQUITs the server when one has ended with a
status other than 0; from the warm-up on, a SIGQUIT is said, followed by 5 s of crash diagnostics,
and the server kills its tree and itself (systemd: killed 9/KILL, failed); a SIGTERM is said and
drains the requests when its own watchdog next looks (every 5 s), then the ranks end and the
server exits 0. So under systemd's default KillMode=control-group, whose SIGTERM also kills the
ranks, a stop mostly ends as a crash does, and under KillMode=mixed it ends clean.
What it does not imitate is listed, with the reasons, in `limits.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any, NoReturn

from cockpit.lab.standin.engine import MAX_TOTAL_NUM_TOKENS, Engine, Request
from cockpit.lab.standin.launch import parse_or_die
from cockpit.lab.standin.log import JOURNAL_IDENTIFIER, Logger, rank_prefix
from cockpit.lab.standin.nodes import Layout, MeetingFailed, meet
from cockpit.lab.standin.nvidia_smi import GPUS, TOTAL_MIB
from cockpit.lab.standin.settings import Settings
from cockpit.lab.standin.worker import PHASES, phase_seconds
from cockpit.remote.local import signal_child

STANDIN_LABEL = "cockpit lab stand-in (CPU program, not SGLang)"
# SGLang's SIGQUIT handlers: the launch phase's (engine.py), and the tokenizer manager's once it runs.
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
RUNNING_SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
HEALTH_CHECK_TIMEOUT = 20  # SGLang's: /health_generate waits this long for any output, then 503
SIGTERM_LOOK_S = 5  # how often the tokenizer manager's sigterm_watchdog looks whether SIGTERM came
SCHEDULER_EXIT_TIMEOUT_S = 15  # how long a graceful exit waits for the schedulers to end


def _env_off(name: str) -> bool:
    """Whether one of SGLang's EnvBools that default on is off: false, 0, no or n in any case (any
    other value is its default)."""
    return os.environ.get(name, "1").lower() in ("false", "0", "no", "n")


# 0.5.23's /health is /health_generate's handler, which answers it at once only where this is off.
GENERATING = (
    ("/health_generate",) if _env_off("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION") else ("/health_generate", "/health")
)
# Before a crash the tokenizer manager waits 5 s and dumps what it can, unless both of these are off.
CRASH_DIAGNOSTICS = not (_env_off("SGLANG_PYSPY_DUMP_BEFORE_CRASH") and _env_off("SGLANG_CUDA_COREDUMP_BEFORE_CRASH"))
# Where the `cockpit` package lives, for the children: they are started under SGLang's process
# titles (argv[0] `sglang::scheduler_TP3`), so their interpreter finds no venv of its own.
PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def gpu_env(rank: int, args: Any) -> dict[str, str]:
    """What makes a rank's worker hold GPU memory for the lab's nvidia-smi stand-in: its
    `--mem-fraction-static` share of an H200 on GPU `rank`, as a real scheduler would."""
    fraction = float(getattr(args, "mem_fraction_static", None) or 0.88)
    return {"COCKPIT_STANDIN_GPU_MIB": str(int(fraction * TOTAL_MIB)), "COCKPIT_STANDIN_GPUS": str(rank % GPUS)}


class Standin:
    def __init__(self, settings: Settings, catalog: Any, args: Any, flags: dict[str, str | None]) -> None:
        self.settings = settings
        self.catalog = catalog
        self.args = args
        self.flags = flags
        self.tp_size = int(getattr(args, "tp_size", 1) or 1)
        self.layout = Layout.of(args)
        self.log = Logger()
        self.rank0 = Logger(rank_prefix(0, self.tp_size))
        self.lost_a_node = False
        self.ready = False
        self.model = getattr(args, "served_model_name", None) or args.model_path
        self.arch = _architecture(args.model_path)
        spec_algo = (getattr(args, "speculative_algorithm", None) or "").upper()
        self.spec_steps = getattr(args, "speculative_num_steps", None) or (3 if spec_algo else None)
        accept = settings.accept_len or (2.7 if spec_algo else 1.0)
        max_running = getattr(args, "max_running_requests", None)
        self.engine = Engine(
            self.rank0,
            tokens_per_s=settings.tokens_per_s,
            capacity=settings.capacity,
            accept_len=accept,
            prefill_tokens_per_s=settings.prefill_tokens_per_s,
            ttft_base_ms=settings.ttft_base_ms,
            early_stop=settings.early_stop,
            decode_log_interval=settings.decode_log_interval,
            max_running=max_running,
            spec_steps=self.spec_steps if spec_algo else None,
            draft_tokens=getattr(args, "speculative_num_draft_tokens", None),
            prefix_cache_hit=settings.prefix_cache_hit,
        )
        self.workers: list[asyncio.subprocess.Process] = []
        self.detokenizer: asyncio.subprocess.Process | None = None
        self.crashing = False
        self.stopping = False  # SIGTERM came before the warm-up: ranks dying now are being stopped, not failing
        # From the warm-up's request on, SGLang's tokenizer manager runs and its handlers take SIGTERM
        # and SIGQUIT (node 0 only: another node has none).
        self.running = False
        self.gracefully_exit = False  # its SIGTERM came: drain, then end
        self.watched: list[tuple[str, asyncio.subprocess.Process]] = []  # the SubprocessWatchdog's children
        self._ready_reads: list[int] = []  # each rank's status pipe, where it says `ready`
        self.watching = False
        self.orphans: set[int] = set()  # ranks told to leave the cgroup: the stand-in's kill spares them
        self.in_flight: set[str] = set()  # the rids of requests not answered yet
        self.ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()  # the exit status
        self.server: asyncio.AbstractServer | None = None  # none listens until the ranks are up

    # -- start-up -------------------------------------------------------------------------

    async def start(self) -> None:
        """0.5.23's launch in its order: the schedulers (multiprocessing's resource tracker first, as
        its spawn starts one) and the detokenizer; once every rank is up, the children's watchdog,
        then uvicorn: nothing listens on the port before (a connection is refused), and /health
        answers 503 through the warm-up (real-tp1-start.jsonl)."""
        began = time.perf_counter()
        self.log.info(f"server_args={vars(self.args)!r}")  # 0.5.23's launch_server prints them as a dict
        self.log.info(f"Running {STANDIN_LABEL}: no model is loaded and no GPU is used.")
        host, port = getattr(self.args, "host", None) or "127.0.0.1", int(getattr(self.args, "port", None) or 30000)
        resource_tracker.ensure_running()
        await self._launch_workers()
        if self.layout.node_rank > 0:
            # A node of rank > 0 runs its schedulers only, then SGLang's dummy health server:
            # /health and /health_generate answer 200 whatever the schedulers do.
            await self._await_workers()
            self.server = await asyncio.start_server(self._serve_dummy, host, port, backlog=1024)
            self._schedule_faults()
            return
        self.detokenizer = await self._child("sglang::detokenizer", "cockpit.lab.standin.detokenizer")
        await self._await_workers()
        self.rank0.info(
            f"max_total_num_tokens={MAX_TOTAL_NUM_TOKENS}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests={self.engine.max_running or 4096}, context_len=131072, available_gpu_mem=20.70 GB"
        )
        self.log.info(self._startup_timings(time.perf_counter() - began))
        self.watched = [(f"scheduler_{i}", proc) for i, proc in enumerate(self.workers)]
        self.watched.append(("detokenizer", self.detokenizer))
        self.watching = True
        asyncio.get_running_loop().create_task(self._watch_children())
        asyncio.get_running_loop().create_task(self.engine.run())
        self.server = await asyncio.start_server(self._serve, host, port, backlog=1024)
        self.log.info(f"INFO:     Started server process [{os.getpid()}]")
        self.log.info("INFO:     Waiting for application startup.")
        self.log.info("INFO:     Application startup complete.")
        self.log.info(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        await self._warm_up(f"{host}:{port}")
        self.ready = True
        self.log.info("The server is fired up and ready to roll!")
        self._schedule_faults()

    async def _warm_up(self, address: str) -> None:
        """SGLang's warm-up thread: a second's sleep, /model_info, one /generate, /freeze_gc. Its
        request starts the tokenizer manager's loop: the running phase's signal handlers and the
        sigterm watchdog, whose looks every 5 s count from here."""
        await asyncio.sleep(1)
        self.log.info(f'INFO:     {address} - "GET /model_info HTTP/1.1" 200 OK')
        self.running = True
        asyncio.get_running_loop().create_task(self._sigterm_watchdog())
        await self.engine.warm_up()
        self.log.info(f'INFO:     {address} - "POST /generate HTTP/1.1" 200 OK')
        self.log.info(f'INFO:     {address} - "POST /freeze_gc HTTP/1.1" 200 OK')

    def _startup_timings(self, launched_s: float) -> str:
        """0.5.23's account of a start once its ranks are up (entrypoints/engine.py): each figure
        its slowest rank's (here the last, worker.phase_seconds), the decode graph the one captured;
        `tokenizer_e2e` the main process's own, from its arguments to every rank up."""
        step = phase_seconds(self.settings.startup_s, self.tp_size - 1)
        return (
            f"Engine startup timings (s): load_weight={step:.2f}, kv_cache_allocation={step:.2f}, "
            f"scheduler_e2e={step * len(PHASES):.2f}, cuda_graph={{prefill=0.00, decode={step:.2f}, "
            "target_verify=0.00, draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}, "
            f"tokenizer_e2e={launched_s:.2f}"
        )

    def _schedule_faults(self) -> None:
        """The faults the settings ask for, each its delay after the node is up (node 0: its
        ready line; another node: its schedulers and dummy health server running)."""
        faults: list[tuple[float, Callable[[], Awaitable[None]]]] = [
            (self.settings.crash_after_s, self.crash),
            (self.settings.hang_after_s, self.hang),
            (self.settings.dead_detokenizer_after_s, self.kill_detokenizer),
        ]
        for after, fault in faults:
            if after > 0:
                asyncio.get_running_loop().call_later(after, _soon, fault)

    async def _child(self, title: str, module: str, *args: str, **kwargs: Any) -> asyncio.subprocess.Process:
        """A child process under one of SGLang's process titles (what `ps`, py-spy and the
        cockpit's process check read), running `module` of the stand-in."""
        env = {**os.environ, **kwargs.pop("env", {})}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        # What journald calls the unit's program (`python`), for a child's own stream: under its title
        # a child's sys.executable is not the unit's any more.
        env[JOURNAL_IDENTIFIER] = os.path.basename(sys.executable)
        return await asyncio.create_subprocess_exec(
            title, "-m", module, *args, executable=sys.executable, stdin=asyncio.subprocess.PIPE, env=env, **kwargs
        )

    async def _launch_workers(self) -> None:
        streams = self.settings.worker_streams
        if streams == "auto":
            streams = "own" if os.environ.get("JOURNAL_STREAM") else "shared"
        for rank in self.layout.ranks if self.layout.several else range(self.tp_size):
            r, w = os.pipe()
            proc = await self._child(
                f"sglang::scheduler{rank_prefix(rank, self.tp_size).replace(' ', '_')}",
                "cockpit.lab.standin.worker",
                str(rank),
                str(self.tp_size),
                streams,
                str(self.settings.startup_s),
                self.arch,
                str(w),
                str(float(getattr(self.args, "watchdog_timeout", None) or 300)),
                self.settings.fail_in if rank == self.settings.fail_rank else "",
                "meet" if self.layout.several else "",
                pass_fds=(w,),
                env=gpu_env(rank, self.args),
            )
            os.close(w)
            self.workers.append(proc)
            self._ready_reads.append(r)

    async def _await_workers(self) -> None:
        """Every rank's `ready`. A rank that failed SIGQUITs the server, whose handler ends it; one
        that died without a word (killed) ends it here."""
        if self.layout.several:
            await self._meet()
        for r in self._ready_reads:
            line = await asyncio.get_running_loop().run_in_executor(None, os.read, r, 64)
            os.close(r)
            if not line.startswith(b"ready"):
                if self.stopping:  # systemd stops the whole unit: the ranks got SIGTERM too
                    raise SystemExit(0)
                await asyncio.sleep(2)  # the time its SIGQUIT takes to arrive, if it sent one
                raise SystemExit("stand-in: a rank worker died during start-up")

    async def _meet(self) -> None:
        """The ranks wait inside "Init parallel begin." until every node has met; then they go on."""
        try:
            await meet(self.layout, self._node_lost)
        except MeetingFailed as e:
            for rank in self.layout.ranks:
                Logger(rank_prefix(rank, self.tp_size)).info(f"Scheduler hit an exception: {e}")
            for proc in self.workers:
                proc.kill()
            raise SystemExit(1) from None
        for proc in self.workers:
            if proc.stdin is not None:
                proc.stdin.write(b"go\n")
        await asyncio.gather(*(p.stdin.drain() for p in self.workers if p.stdin is not None), return_exceptions=True)

    def _node_lost(self) -> None:
        """Another node is gone: this one notices nothing until its ranks block in the next
        collective; their watchdogs end it (sglang #3099)."""
        if not self.lost_a_node and not self.stopping:
            self.lost_a_node = True
            asyncio.get_running_loop().call_soon(_soon, self.hang)

    async def _serve_dummy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """SGLang's `launch_dummy_health_check_server` on a node of rank > 0."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            head = await reader.readuntil(b"\r\n\r\n")
            _, path, _, _ = _parse_head(head)
            _send_json(writer, 200 if path.split("?", 1)[0] in ("/health", "/health_generate") else 404, None)
        writer.close()

    async def crash(self) -> None:
        """All ranks hit an exception at once, as when a collective fails on every GPU: each says
        so and SIGQUITs the server (run_scheduler_process), which ends as SGLang's does. Ranks told
        to orphan themselves leave the cgroup first, and the server's kill spares them."""
        if self.crashing:
            return
        self.crashing = True
        staying = len(self.workers) - min(self.settings.orphans, len(self.workers))
        await self._tell(self.workers[staying:], b"orphan\n")
        self.orphans.update(proc.pid for proc in self.workers[staying:])
        await asyncio.sleep(0.2 if staying < len(self.workers) else 0)  # the orphans have moved out
        await self._tell(self.workers[:staying], b"crash\n")
        if not staying:  # no rank is left to SIGQUIT the server
            self.sigquit()

    async def _tell(self, procs: list[asyncio.subprocess.Process], line: bytes) -> None:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.write(line)
        await asyncio.gather(*(p.stdin.drain() for p in procs if p.stdin is not None), return_exceptions=True)

    async def hang(self) -> None:
        """Every rank blocks in a collective that never completes: no token, no log line; each
        rank's watchdog fires after --watchdog-timeout and SIGQUITs this process, as SGLang's do."""
        self.engine.stall()
        await self._tell(self.workers, b"hang\n")

    async def kill_detokenizer(self) -> None:
        """The detokenizer dies (SIGKILL) and nothing notices: the ranks go on, but no output
        reaches a client any more (sglang #21471's half-dead server). That is a release before
        0.5.12's: 0.5.23's watchdog would end the server; this fault leaves the detokenizer out
        of the watch, for the cockpit's reading of a server that lives on without one."""
        self.watched = [(name, proc) for name, proc in self.watched if proc is not self.detokenizer]
        if self.detokenizer is not None and self.detokenizer.returncode is None:
            self.detokenizer.kill()
            await self.detokenizer.wait()
        self.engine.stall()

    def flood(self, lines: int) -> None:
        """`lines` decode lines at once, as a server logging every step of a big batch prints
        them: what drives journald past its rate limit (its default: 10,000 a unit per 30 s,
        scaled up with free space)."""
        for _ in range(lines):
            self.rank0.info(
                "Decode batch, #running-req: 32, #token: 18234, token usage: 0.13, cuda graph: True, "
                "gen throughput (token/s): 3468.94, #queue-req: 3"
            )

    def sigquit(self) -> None:
        """A child failed (a rank's exception or watchdog, or the children's watchdog): before the
        warm-up, and on a node of rank > 0, the launch phase's handler says so and kills the tree;
        from it on, the tokenizer manager's also stops the children's watchdog and first spends
        5 s on crash diagnostics, blocking its loop as SGLang's time.sleep does (no endpoint
        answers meanwhile). The py-spy dump of ranks still alive is not imitated (limits.py)."""
        if not self.running:
            self.log.info(SIGQUIT_LINE)
        else:
            self.log.info(RUNNING_SIGQUIT_LINE)
            self.watching = False
            if CRASH_DIAGNOSTICS:
                self.log.info("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
                time.sleep(5)
                if not any(_alive(proc.pid) for proc in self.workers):
                    self.log.info("No live scheduler processes found; skipping py-spy and CUDA coredump.")
        self.kill_process_tree(include_parent=True)

    def kill_process_tree(self, include_parent: bool) -> None:
        """SGLang's (utils/common.py): its line, then SIGKILL to every child (but the ranks a
        crash orphaned: the fault keeps them alive on purpose) and, with include_parent, to the
        server itself."""
        me = os.getpid()
        self.log.info(f"kill_process_tree called: parent_pid={me}, include_parent={include_parent}, pid={me}")
        for pid in _children(me):
            if pid not in self.orphans:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if include_parent:
            os.kill(me, signal.SIGKILL)

    def sigterm(self) -> None:
        """`systemctl stop`: before the warm-up (and on a node of rank > 0) the server ends at
        once, its ranks with it; from it on SGLang's handler only says so, and its sigterm
        watchdog drains and ends the server when it next looks."""
        if not self.running:
            self.stop_now()
            return
        self.log.info("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.gracefully_exit = True

    def stop_now(self) -> None:
        """The end without SGLang's ceremony: SIGINT, and a SIGTERM before the warm-up."""
        self.stopping = True
        self.watching = False
        if not self.ended.done():
            self.ended.set_result(0)

    async def _sigterm_watchdog(self) -> None:
        """The tokenizer manager's: every 5 s it looks whether SIGTERM came; then it says what it
        still has to answer (5 s between looks while there is any), stops the children's watchdog,
        lets the schedulers end (ShutdownReq: their stdin closes), kills what is left below it, and
        uvicorn shuts down: the server exits 0 (real-tp1-stop-killmode-mixed.jsonl)."""
        while True:  # a poll, not an event: when it looks is how long a stop takes
            await asyncio.sleep(SIGTERM_LOOK_S)
            if self.gracefully_exit:
                break
        while True:
            remaining = sorted(self.in_flight)
            self.log.info(
                f"Gracefully exiting... Remaining number of requests {len(remaining)}. "
                f"Remaining requests remaining_rids={remaining!r}."
            )
            if not remaining:
                break
            await asyncio.sleep(SIGTERM_LOOK_S)
        self.watching = False
        ranks = [proc for proc in self.workers if proc.pid not in self.orphans]
        for proc in ranks:
            if proc.stdin is not None:
                proc.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in ranks)), SCHEDULER_EXIT_TIMEOUT_S)
        self.kill_process_tree(include_parent=False)
        for line in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete."):
            self.log.info(f"INFO:     {line}")
        self.log.info(f"INFO:     Finished server process [{os.getpid()}]")
        self.kill_process_tree(include_parent=False)  # launch_server's, on its way out
        if not self.ended.done():
            self.ended.set_result(0)

    async def _watch_children(self) -> None:
        """SGLang's SubprocessWatchdog (0.5.12 on, sglang #18421): once a second, the first
        watched child that ended with a status other than 0 is said crashed, and the server
        SIGQUITs itself."""
        while True:
            await asyncio.sleep(1)
            if not self.watching:
                return
            for name, proc in self.watched:
                if proc.returncode in (None, 0):
                    continue
                self.log.info(
                    f"Subprocess {name} (pid={proc.pid}) crashed with exit code {proc.returncode}. "
                    "Triggering SIGQUIT for cleanup..."
                )
                os.kill(os.getpid(), signal.SIGQUIT)
                return

    async def _health_generate(self) -> int:
        """SGLang's /health_generate: one token asked for (its prefill line, where the ranks
        move), then up to HEALTH_CHECK_TIMEOUT s for any output at all, looked for once a second;
        none means 503 and its line, "Health check failed ..."."""
        tic = time.time()
        if not self.engine.stalled:
            self.engine.health_check()
        while time.time() < tic + HEALTH_CHECK_TIMEOUT:
            await asyncio.sleep(1)
            if not self.engine.stalled:
                return 200
        last = time.strftime("%H:%M:%S", time.localtime(time.time() - (time.monotonic() - self.engine.last_emit)))
        self.log.info(
            f"Health check failed. Server couldn't get a response from detokenizer for last "
            f"{HEALTH_CHECK_TIMEOUT} seconds. tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
            f"last_heartbeat time: {last}"
        )
        return 503

    # -- HTTP -----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, version, headers = _parse_head(head)
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                status = await self._route(method, path, body, writer)
                if self.settings.access_log:
                    self.log.info(
                        f'INFO:     {peer[0]}:{peer[1]} - "{method} {path} {version}" '
                        f"{status} {_REASONS.get(status, '')}"
                    )
                if headers.get("connection", "").lower() == "close" or version == "HTTP/1.0":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> int:
        path = path.split("?", 1)[0]
        try:
            if path in ("/v1/completions", "/v1/chat/completions"):
                if method != "POST":
                    raise HttpError(405, "use POST")
                return await self._completion(path.endswith("chat/completions"), body, writer)
            if method == "POST" and path == "/standin/crash":
                asyncio.get_running_loop().call_soon(_soon, self.crash)
                return _send_json(
                    writer, 200, {"crashing": True, "ranks": self.tp_size - min(self.settings.orphans, self.tp_size)}
                )
            if method == "POST" and path == "/standin/flood":
                lines = int(json.loads(body or b"{}").get("lines", 0))
                self.flood(lines)
                return _send_json(writer, 200, {"flooded": lines})
            if method == "POST" and path in ("/standin/hang", "/standin/kill-detokenizer"):
                fault = self.hang if path == "/standin/hang" else self.kill_detokenizer
                asyncio.get_running_loop().call_soon(_soon, fault)
                return _send_json(writer, 200, {path.rsplit("/", 1)[1]: True})
            if method != "GET":
                raise HttpError(405, "use GET")
            if path in ("/health", "/health_generate", "/ready"):  # SGLang's answer no body
                if path != "/ready" and self.gracefully_exit:
                    self.log.info("Health check request received during shutdown. Returning 503.")
                    return _send_json(writer, 503, None)
                if not self.ready or (path in GENERATING and await self._health_generate() != 200):
                    return _send_json(writer, 503, None)
                return _send_json(writer, 200, None)
            if path in ("/model_info", "/get_model_info"):
                return _send_json(
                    writer,
                    200,
                    {
                        "model_path": self.args.model_path,
                        "tokenizer_path": self.args.model_path,
                        "is_generation": True,
                        "architectures": [self.arch],
                        "standin": STANDIN_LABEL,
                    },
                )
            if path in ("/server_info", "/get_server_info"):
                return _send_json(writer, 200, self._server_info())
            if path == "/v1/models":
                return _send_json(
                    writer,
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": self.model,
                                "object": "model",
                                "created": int(time.time()),
                                "owned_by": "sglang",
                                "root": self.model,
                                "max_model_len": 131072,
                            }
                        ],
                    },
                )
            if path == "/metrics" and getattr(self.args, "enable_metrics", False):
                return _send_text(writer, 200, self._metrics())
            if path == "/standin/delivered":
                return _send_json(writer, 200, {"requests": [list(r) for r in self.engine.delivered]})
            if path == "/standin/stats":
                e = self.engine
                return _send_json(
                    writer,
                    200,
                    {
                        "running": len(e.running) + e.prefilling,
                        "waiting": len(e.waiting),
                        "completed": e.completed,
                        "aborted": e.aborted,
                        "output_tokens": e.total_tokens,
                        "prompt_tokens": e.prompt_total,
                        "cached_tokens": e.cached_total,
                    },
                )
            raise HttpError(404, f"no route {path}")
        except HttpError as err:
            return _send_json(writer, err.status, {"object": "error", "message": str(err), "code": err.status})

    def _server_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {k: v for k, v in vars(self.args).items()}
        state = {"last_gen_throughput": round(self.engine.last_gen_throughput, 2)}
        if self.engine.spec_steps:
            state["avg_spec_accept_length"] = self.engine.accept_len
        info.update(internal_states=[state], version=self.catalog.version, standin=STANDIN_LABEL)
        return info

    def _metrics(self) -> str:
        """Prometheus text as SGLang 0.5.23's prometheus_client writes it, for the families the
        stand-in imitates, with the real server's names, labels and habits
        (tests/data/sglang-0.5.23/real-tp1-metrics*.txt): the scheduler's gauges carry the rank
        labels, the tokenizer's counters `engine_type, model_name` with `is_streaming` or
        `cache_source`; the speculative gauges read 0.0 until a speculative server has decoded
        (always, on a plain one); `cached_tokens_total` appears with the first cache hit, and
        `cache_hit_rate` reads 0 as the real gauge does once the decode logger has reset it."""
        e = self.engine
        ranks = f'engine_type="unified",model_name="{self.model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        tokenizer = f'engine_type="unified",model_name="{self.model}"'
        decoded = bool(e.spec_steps) and e.decoded
        gauges = [
            ("num_running_reqs", "The number of running requests.", len(e.running)),
            ("num_queue_reqs", "The number of requests in the waiting queue.", len(e.waiting)),
            ("gen_throughput", "The generation throughput (token/s).", e.last_gen_throughput),
            ("cache_hit_rate", "The prefix cache hit rate.", 0.0),
            ("token_usage", "The token usage.", e._usage()),
            (
                "spec_accept_length",
                "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
                e.accept_len if decoded else 0.0,
            ),
            (
                "spec_accept_rate",
                "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
                e.accept_rate if decoded else 0.0,
            ),
            ("spec_num_steps", "Currently active speculative_num_steps.", (e.spec_steps or 0) if decoded else 0),
            (
                "spec_num_draft_tokens",
                "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
                int(e.verified) if decoded else 0,
            ),
        ]
        out = []
        for name, doc, value in gauges:
            out += [
                f"# HELP sglang:{name} {doc}",
                f"# TYPE sglang:{name} gauge",
                f"sglang:{name}{{{ranks}}} {float(value)}",
            ]
        counters = [
            ("prompt", "prompt_tokens_total", "Number of prefill tokens processed."),
            ("generation", "generation_tokens_total", "Number of generation tokens processed."),
            ("requests", "num_requests_total", "Number of requests processed."),
        ]
        for kind, name, doc in counters:
            samples = [(streaming, n) for (counted, streaming), n in sorted(e.counted.items()) if counted == kind]
            if samples:
                out += [f"# HELP sglang:{name} {doc}", f"# TYPE sglang:{name} counter"]
                out += [
                    f'sglang:{name}{{engine_type="unified",is_streaming="{str(streaming).lower()}",'
                    f'model_name="{self.model}"}} {float(n)}'
                    for streaming, n in samples
                ]
        if e.counted_cached:
            out += [
                "# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).",
                "# TYPE sglang:cached_tokens_total counter",
                f'sglang:cached_tokens_total{{cache_source="device",{tokenizer}}} {float(e.counted_cached)}',
            ]
        return "\n".join(out) + "\n"

    async def _completion(self, chat: bool, body: bytes, writer: asyncio.StreamWriter) -> int:
        if not self.ready:
            raise HttpError(503, "the server is starting")
        try:
            payload = json.loads(body or b"{}")
        except json.JSONDecodeError as err:
            raise HttpError(400, f"invalid JSON: {err}") from None
        if chat:
            messages = payload.get("messages") or []
            prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            prompt = payload.get("prompt", "")
            prompt = " ".join(prompt) if isinstance(prompt, list) else str(prompt)
        max_tokens = int(payload.get("max_tokens") or payload.get("max_completion_tokens") or 16)
        stream = bool(payload.get("stream"))
        stream_options = payload.get("stream_options") or {}
        include_usage = bool(stream_options.get("include_usage"))
        continuous_usage = include_usage and bool(stream_options.get("continuous_usage_stats"))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        prompt_tokens = max(1, len(prompt.split()))
        parts: list[str] = []
        first = [True]

        def chunk(text: str, finish: str | None) -> bytes:
            if chat:
                delta: dict[str, Any] = {"content": text}
                if first[0]:
                    delta["role"] = "assistant"
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            first[0] = False
            event = {"id": rid, "object": obj, "created": created, "model": self.model, "choices": [choice]}
            if continuous_usage:
                event["usage"] = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": req.generated,
                    "total_tokens": prompt_tokens + req.generated,
                }
            return _sse(event)

        req: Request

        def emit(text: str, count: int) -> None:
            if stream:
                writer.write(_chunked(chunk(text, req.finish_reason)))
            else:
                parts.append(text)

        req = Request(
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            emit=emit,
            is_closed=writer.transport.is_closing,
            streaming=stream,
        )
        if stream:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
        self.in_flight.add(rid)
        try:
            await self.engine.generate(req)
        finally:
            self.in_flight.discard(rid)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": req.generated,
            "total_tokens": prompt_tokens + req.generated,
        }
        if req.finish_reason == "abort":
            return 499
        if not stream:
            text = "".join(parts)
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": req.finish_reason}
                if chat
                else {"index": 0, "text": text, "logprobs": None, "finish_reason": req.finish_reason}
            )
            return _send_json(
                writer,
                200,
                {
                    "id": rid,
                    "object": "chat.completion" if chat else "text_completion",
                    "created": created,
                    "model": self.model,
                    "choices": [choice],
                    "usage": usage,
                },
            )
        if include_usage:
            writer.write(
                _chunked(
                    _sse(
                        {
                            "id": rid,
                            "object": obj,
                            "created": created,
                            "model": self.model,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            )
        writer.write(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return 200


def _soon(work: Callable[[], Awaitable[None]]) -> None:
    asyncio.ensure_future(work())


def _stat(pid: str | int) -> list[str]:
    """/proc/PID/stat's fields from the third (state, ppid, ...); [] where the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _children(parent: int) -> list[int]:
    """The PIDs whose parent is `parent` (psutil's children, which SGLang's kill reads)."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _stat(pid)[1:2] == [str(parent)]]


def _alive(pid: int) -> bool:
    """Neither gone nor a zombie: the loop that would reap it may be the one held up."""
    return _stat(pid)[:1] not in ([], ["Z"], ["X"])


def _architecture(model_path: str) -> str:
    try:
        config = json.loads((Path(model_path) / "config.json").read_text())
        return str((config.get("architectures") or ["LlamaForCausalLM"])[0])
    except (OSError, ValueError, AttributeError):
        return "LlamaForCausalLM"


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return method, path, version, headers


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _send(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes) -> int:
    writer.write(
        f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return status


def _send_json(writer: asyncio.StreamWriter, status: int, obj: Any) -> int:
    return _send(writer, status, "application/json", b"" if obj is None else json.dumps(obj).encode())


def _send_text(writer: asyncio.StreamWriter, status: int, text: str) -> int:
    return _send(writer, status, "text/plain; version=0.0.4", text.encode())


async def _amain(argv: list[str]) -> int:
    settings = Settings.from_env()
    catalog, args, flags = parse_or_die(argv, settings.sglang_root)
    standin = Standin(settings, catalog, args, flags)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, standin.sigterm)
    loop.add_signal_handler(signal.SIGINT, standin.stop_now)
    loop.add_signal_handler(signal.SIGQUIT, standin.sigquit)
    await standin.start()
    status = await standin.ended
    children = [p for p in (*standin.workers, standin.detokenizer) if p is not None]
    for proc in children:
        signal_child(proc, signal.SIGTERM)  # not Popen.terminate(), which may reap it before asyncio's watcher
    # Reap the children before the loop closes, or their transports complain on stderr at exit.
    await asyncio.wait_for(asyncio.gather(*(p.wait() for p in children), return_exceptions=True), 5)
    if standin.server is not None:
        standin.server.close()
    return status


def main(argv: list[str] | None = None) -> NoReturn:
    """The server's run, then an exit without the interpreter's teardown: where the flags'
    resolution imported SGLang (and torch), tearing those modules down takes 1.5 to 2 s, and a
    stop showed them; the real server's unit ends 0.3 s after its last line
    (real-tp1-stop-killmode-mixed.jsonl)."""
    status = asyncio.run(_amain(sys.argv[1:] if argv is None else argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
