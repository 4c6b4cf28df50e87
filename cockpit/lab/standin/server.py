"""The stand-in's main process: start-up sequence, rank workers, and SGLang's HTTP endpoints.

A small HTTP/1.1 server on asyncio streams (keep-alive, chunked SSE), because the lab has
only the standard library. Endpoints follow SGLang's: `/health` (503 until ready; then, as in
0.5.23, the generating `/health_generate` handler unless the unit's environment turns
SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION off, when it answers 200 at once), `/ready`,
`/model_info`, `/server_info` (args plus `internal_states`), `/v1/models`, streaming and
non-streaming `/v1/completions` and `/v1/chat/completions`, `/metrics` with
`--enable-metrics`; and two of its own under `/standin/` (crash, stats).
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
from pathlib import Path
from typing import Any

from cockpit.lab.standin.engine import MAX_TOTAL_NUM_TOKENS, Engine, Request
from cockpit.lab.standin.launch import parse_or_die
from cockpit.lab.standin.log import Logger, rank_prefix
from cockpit.lab.standin.nodes import Layout, MeetingFailed, meet
from cockpit.lab.standin.nvidia_smi import GPUS, TOTAL_MIB
from cockpit.lab.standin.settings import Settings
from cockpit.lab.standin.worker import PHASES, phase_seconds

STANDIN_LABEL = "cockpit lab stand-in (CPU program, not SGLang)"
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."  # SGLang's handler
HEALTH_CHECK_TIMEOUT = 20  # SGLang's: /health_generate waits this long for any output, then 503
# 0.5.23's /health is /health_generate's handler, which answers it at once only where this EnvBool
# (default on) is off: false, 0, no or n in any case (any other value is its default).
_SWITCH = os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "1").lower()
GENERATING = ("/health_generate",) if _SWITCH in ("false", "0", "no", "n") else ("/health_generate", "/health")
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
            prefix_cache_hit=settings.prefix_cache_hit,
        )
        self.workers: list[asyncio.subprocess.Process] = []
        self.detokenizer: asyncio.subprocess.Process | None = None
        self.crashing = False
        self.stopping = False  # SIGTERM came: ranks dying now are being stopped, not failing

    # -- start-up -------------------------------------------------------------------------

    async def start(self) -> None:
        began = time.perf_counter()
        self.log.info(f"server_args={vars(self.args)!r}")  # 0.5.23's launch_server prints them as a dict
        self.log.info(f"Running {STANDIN_LABEL}: no model is loaded and no GPU is used.")
        host, port = getattr(self.args, "host", None) or "127.0.0.1", int(getattr(self.args, "port", None) or 30000)
        if self.layout.node_rank > 0:
            # A node of rank > 0 runs its schedulers only, then SGLang's dummy health server:
            # /health and /health_generate answer 200 whatever the schedulers do.
            await self._start_workers()
            self.server = await asyncio.start_server(self._serve_dummy, host, port, backlog=1024)
            self._schedule_faults()
            return
        # The port answers 503 from the start, so /health shows "starting" rather than refusing.
        self.server = await asyncio.start_server(self._serve, host, port, backlog=1024)
        await self._start_workers()
        self.detokenizer = await self._child("sglang::detokenizer", "cockpit.lab.standin.detokenizer")
        self.rank0.info(
            f"max_total_num_tokens={MAX_TOTAL_NUM_TOKENS}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests={self.engine.max_running or 4096}, context_len=131072, available_gpu_mem=20.70 GB"
        )
        self.log.info(self._startup_timings(time.perf_counter() - began))
        asyncio.get_running_loop().create_task(self.engine.run())
        self.log.plain(f"INFO:     Started server process [{os.getpid()}]")
        self.log.plain("INFO:     Waiting for application startup.")
        self.log.plain("INFO:     Application startup complete.")
        self.log.plain(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        self.log.plain(f'INFO:     {host}:{port} - "GET /model_info HTTP/1.1" 200 OK')
        self.rank0.info(
            "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
            f"input throughput (token/s): {self.engine.prefill_tokens_per_s:.2f}"
        )
        self.log.plain(f'INFO:     {host}:{port} - "POST /generate HTTP/1.1" 200 OK')
        self.ready = True
        self.log.info("The server is fired up and ready to roll!")
        self._schedule_faults()

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
        return await asyncio.create_subprocess_exec(
            title, "-m", module, *args, executable=sys.executable, stdin=asyncio.subprocess.PIPE, env=env, **kwargs
        )

    async def _start_workers(self) -> None:
        streams = self.settings.worker_streams
        if streams == "auto":
            streams = "own" if os.environ.get("JOURNAL_STREAM") else "shared"
        reads = []
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
            reads.append(r)
        if self.layout.several:
            await self._meet()
        for r in reads:
            line = await asyncio.get_running_loop().run_in_executor(None, os.read, r, 64)
            os.close(r)
            if not line.startswith(b"ready"):
                if self.stopping:  # systemd stops the whole unit: the ranks got SIGTERM too
                    raise SystemExit(0)
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
        """All ranks hit an exception at once, as when a collective fails on every GPU."""
        if self.crashing:
            return
        self.crashing = True
        staying = len(self.workers) - min(self.settings.orphans, len(self.workers))
        for i, proc in enumerate(self.workers):
            if proc.stdin is not None:
                proc.stdin.write(b"crash\n" if i < staying else b"orphan\n")
        await asyncio.gather(*(p.stdin.drain() for p in self.workers if p.stdin is not None), return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in self.workers[:staying])), timeout=10)
        await asyncio.sleep(0.2 if staying < len(self.workers) else 0)  # the orphans have moved out
        self.log.info(SIGQUIT_LINE)
        os.kill(os.getpid(), signal.SIGKILL)  # SGLang's kill_process_tree ends with the parent

    async def hang(self) -> None:
        """Every rank blocks in a collective that never completes: no token, no log line; each
        rank's watchdog fires after --watchdog-timeout and SIGQUITs this process, as SGLang's do."""
        self.engine.stall()
        for proc in self.workers:
            if proc.stdin is not None:
                proc.stdin.write(b"hang\n")
        await asyncio.gather(*(p.stdin.drain() for p in self.workers if p.stdin is not None), return_exceptions=True)

    async def kill_detokenizer(self) -> None:
        """The detokenizer dies (SIGKILL) and nothing notices: the ranks go on, but no output
        reaches a client any more (sglang #21471's half-dead server)."""
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
        """A child's watchdog gave up: SGLang's handler says so and ends the whole tree."""
        self.log.info(SIGQUIT_LINE)
        for proc in [*self.workers, self.detokenizer]:
            if proc is not None and proc.returncode is None:
                proc.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    async def _health_generate(self) -> int:
        """SGLang's /health_generate: one token asked for, then up to HEALTH_CHECK_TIMEOUT s for
        any output at all; none means 503 and its line, "Health check failed ..."."""
        tic = time.time()
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
                    self.log.plain(
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
            if path in ("/health", "/health_generate", "/ready"):
                if not self.ready:
                    raise HttpError(503, "the server is starting")
                if path in GENERATING and await self._health_generate() != 200:
                    return _send_json(writer, 503, None)
                return _send_json(writer, 200, {"status": "ready"} if path == "/ready" else None)
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
        draft_tokens = getattr(self.args, "speculative_num_draft_tokens", None) or (e.spec_steps or 0) + 1
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
                draft_tokens if decoded else 0,
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
            ("prompt", "Number of prefill tokens processed."),
            ("generation", "Number of generation tokens processed."),
        ]
        for kind, doc in counters:
            samples = [(streaming, n) for (counted, streaming), n in sorted(e.counted.items()) if counted == kind]
            if samples:
                out += [f"# HELP sglang:{kind}_tokens_total {doc}", f"# TYPE sglang:{kind}_tokens_total counter"]
                out += [
                    f'sglang:{kind}_tokens_total{{engine_type="unified",is_streaming="{str(streaming).lower()}",'
                    f'model_name="{self.model}"}} {float(n)}'
                    for streaming, n in samples
                ]
        if e.cached_total:
            out += [
                "# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).",
                "# TYPE sglang:cached_tokens_total counter",
                f'sglang:cached_tokens_total{{cache_source="device",{tokenizer}}} {float(e.cached_total)}',
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
        await self.engine.generate(req)
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
    stop = loop.create_future()

    def request_stop() -> None:
        standin.stopping = True
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop)
    loop.add_signal_handler(signal.SIGQUIT, standin.sigquit)
    await standin.start()
    await stop
    children = [p for p in (*standin.workers, standin.detokenizer) if p is not None]
    for proc in children:
        if proc.returncode is None:
            proc.terminate()
    # Reap the children before the loop closes, or their transports complain on stderr at exit.
    await asyncio.wait_for(asyncio.gather(*(p.wait() for p in children), return_exceptions=True), 5)
    standin.server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_amain(sys.argv[1:] if argv is None else argv))
