"""The stand-in's decode loop: one batched step for all running requests, like a real server.

Each step gives every running request `accept_len` tokens (on average; 1 without speculative
decoding). A plain step takes `1 / tokens_per_s`, or longer when the batch would put more than
`capacity` tokens/s through the model, so one stream decodes at `tokens_per_s` and the server at
`min(n * tokens_per_s, capacity)`: the numbers a load run must measure back.

A speculative step drafts `spec_steps` tokens with the draft model and verifies the draft
tokens in one pass of the target: it costs `1 + DRAFT_STEP_COST * spec_steps` plain steps and
puts each request's draft tokens through the model. So EAGLE-3 (3 steps, 4 draft tokens,
accept length 2.7) decodes one stream 2.7 / 1.6 = 1.7 times as fast as plain decoding, and a
saturated server 2.7 / 4 = 0.68 times as fast: it wins at low concurrency and loses at high,
as speculative decoding does on a GPU.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.lab.standin.log import Logger

DRAFT_STEP_COST = 0.2  # one draft model step, in steps of the target (a small draft head, as EAGLE's)

WORDS = (
    "the",
    "stand",
    "in",
    "decodes",
    "tokens",
    "at",
    "a",
    "set",
    "rate",
    "for",
    "the",
    "cockpit",
    "lab",
    "no",
    "gpu",
    "is",
    "used",
    "here",
)
MAX_TOTAL_NUM_TOKENS = 412345


@dataclass
class Request:
    """One generation in flight; `emit` delivers each chunk of new tokens to its HTTP response."""

    prompt_tokens: int
    max_tokens: int
    emit: Callable[[str, int], None]  # (text, tokens in this chunk)
    is_closed: Callable[[], bool]
    generated: int = 0
    carry: float = 0.0  # fractional accepted tokens kept between steps
    finish_reason: str | None = None
    admitted: asyncio.Future[None] | None = None  # set while queued behind --max-running-requests
    arrived: float = field(default_factory=time.monotonic)
    first_at: float | None = None  # when its first token went out
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    streaming: bool = False  # asked for a stream: /metrics counts its tokens under is_streaming="true"
    cached: int = 0  # of its prompt tokens, those the prefix cache served

    def text_for(self, start: int, count: int) -> str:
        return "".join(" " + WORDS[(start + i) % len(WORDS)] for i in range(count))


class Engine:
    def __init__(
        self,
        log: Logger,
        *,
        tokens_per_s: float,
        capacity: float,
        accept_len: float,
        prefill_tokens_per_s: float,
        ttft_base_ms: float,
        early_stop: int,
        decode_log_interval: int,
        max_running: int | None,
        spec_steps: int | None,
        draft_tokens: int | None = None,
        prefix_cache_hit: float = 0.0,
    ) -> None:
        self.log = log
        self.prefix_cache_hit = prefix_cache_hit
        self.prompt_total = 0  # prompt tokens prefilled, and those of them the cache served (/standin/stats)
        self.cached_total = 0
        self.tokens_per_s = tokens_per_s
        self.capacity = capacity
        self.accept_len = max(1.0, accept_len)
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.ttft_base_s = ttft_base_ms / 1000
        self.early_stop = early_stop
        self.decode_log_interval = max(1, decode_log_interval)
        self.max_running = max_running
        self.spec_steps = spec_steps
        # A step's cost in plain steps, and the tokens of each request it puts through the model.
        self.step_cost = 1 + DRAFT_STEP_COST * spec_steps if spec_steps else 1.0
        self.verified = float(draft_tokens or spec_steps + 1) if spec_steps else 1.0
        self.running: list[Request] = []
        self.waiting: collections.deque[Request] = collections.deque()
        self.prefilling = 0
        self.completed = 0
        self.aborted = 0
        self.total_tokens = 0
        # /metrics' prompt_tokens_total, generation_tokens_total and num_requests_total: ("prompt" |
        # "generation" | "requests", streaming) -> count, and its cached_tokens_total: counted as
        # SGLang's tokenizer manager counts them, when a request finishes (an abort too), never while
        # it runs
        self.counted: collections.Counter[tuple[str, bool]] = collections.Counter()
        self.counted_cached = 0
        # What the stand-in itself delivered, request by request: (arrived, first token, last
        # token, tokens), its own clock. A test checks a measurer against this, not the settings.
        self.delivered: collections.deque[tuple[float, float, float, int]] = collections.deque(maxlen=100_000)
        self.last_gen_throughput = 0.0
        self._wake = asyncio.Event()
        self._moving = asyncio.Event()  # cleared for good by `stall`: a hung rank, a dead detokenizer
        self._moving.set()
        self.last_emit = time.monotonic()  # when a client last got a token (/health_generate's heartbeat)
        self._steps = 0
        self._log_tokens = 0
        self._log_t = time.monotonic()

    @property
    def stalled(self) -> bool:
        return not self._moving.is_set()

    def stall(self) -> None:
        """Nothing moves from now on: no request is admitted or advanced, nothing is logged (a
        rank stuck in a collective, or outputs with no detokenizer to reach). For good: the real
        server recovers from neither."""
        self._moving.clear()

    # -- admission ------------------------------------------------------------------------

    async def generate(self, req: Request) -> None:
        """Queue, prefill (TTFT), emit the first token, then decode in the batch until done."""
        if self.max_running is not None and len(self.running) + self.prefilling >= self.max_running:
            req.admitted = asyncio.get_running_loop().create_future()
            self.waiting.append(req)
            await req.admitted
        await self._moving.wait()
        self.prefilling += 1
        req.cached = int(req.prompt_tokens * self.prefix_cache_hit)
        self.prompt_total += req.prompt_tokens
        self.cached_total += req.cached
        try:
            self._log_prefill(req.prompt_tokens - req.cached, req.cached)
            await asyncio.sleep(self.ttft_base_s + req.prompt_tokens / self.prefill_tokens_per_s)
        finally:
            self.prefilling -= 1
        if req.is_closed():
            self._abort(req)
            return
        self._emit(req, 1)
        if req.finish_reason is None:
            self.running.append(req)
            self._wake.set()
        await req.done

    def _log_prefill(self, new_tokens: int, cached: int) -> None:
        self.log.info(
            f"Prefill batch, #new-seq: 1, #new-token: {new_tokens}, #cached-token: {cached}, "
            f"token usage: {self._usage():.2f}, #running-req: {len(self.running)}, "
            f"#queue-req: {len(self.waiting)}, #pending-token: 0, cuda graph: False, "
            f"input throughput (token/s): {self.prefill_tokens_per_s:.2f}"
        )

    async def warm_up(self) -> None:
        """SGLang's own warm-up request (http_server._execute_server_warmup): `The capital city of
        France is`, six tokens, none of them cached, and 8 new ones; /metrics counts it as any
        finished request, so a server just ready already says 6 prompt and 8 generated tokens."""
        self._log_prefill(6, 0)
        await asyncio.sleep(self.ttft_base_s + 6 / self.prefill_tokens_per_s + 7 / self.tokens_per_s)
        self.counted["prompt", False] += 6
        self.counted["generation", False] += 8
        self.counted["requests", False] += 1

    def health_check(self) -> None:
        """The prefill of a generating health check's one token (`input_ids=[0]`, no cache); SGLang
        asks it with log_metrics=False, so /metrics never counts it."""
        self._log_prefill(1, 0)

    def _limit(self, req: Request) -> int:
        limit = req.max_tokens
        if self.early_stop:
            limit = min(limit, self.early_stop)
        return limit

    def _emit(self, req: Request, count: int) -> None:
        limit = self._limit(req)
        count = min(count, limit - req.generated)
        if count <= 0:
            return
        text = req.text_for(req.generated, count)
        req.generated += count
        self.total_tokens += count
        now = self.last_emit = time.monotonic()
        if req.first_at is None:
            req.first_at = now
        self._log_tokens += count
        if req.generated >= limit:
            req.finish_reason = "length" if limit == req.max_tokens else "stop"
        req.emit(text, count)
        if req.finish_reason is not None:
            self.completed += 1
            self.delivered.append((req.arrived, req.first_at, now, req.generated))
            self._finish(req)

    def _finish(self, req: Request) -> None:
        self.counted["prompt", req.streaming] += req.prompt_tokens
        self.counted["generation", req.streaming] += req.generated
        self.counted["requests", req.streaming] += 1
        self.counted_cached += req.cached
        if not req.done.done():
            req.done.set_result(None)
        if self.waiting:
            admitted = self.waiting.popleft().admitted
            if admitted is not None and not admitted.done():
                admitted.set_result(None)

    def _abort(self, req: Request) -> None:
        self.aborted += 1
        req.finish_reason = "abort"
        self._finish(req)

    # -- the loop -------------------------------------------------------------------------

    def _interval(self, n: int) -> float:
        per_stream = self.step_cost / self.tokens_per_s
        if self.capacity > 0:
            return max(per_stream, n * self.verified / self.capacity)
        return per_stream

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_step = None
        while True:
            if not self.running:
                next_step = None
                self._wake.clear()
                await self._wake.wait()
                continue
            now = loop.time()
            interval = self._interval(len(self.running))
            if next_step is None or next_step < now - interval:
                next_step = now + interval
            await asyncio.sleep(max(0.0, next_step - now))
            await self._moving.wait()
            next_step += interval
            self._step()

    def _step(self) -> None:
        still = []
        for req in self.running:
            if req.is_closed():
                self._abort(req)
                continue
            total = req.carry + self.accept_len
            count = math.floor(total)
            req.carry = total - count
            self._emit(req, count)
            if req.finish_reason is None:
                still.append(req)
        self.running = still
        self._steps += 1
        if self._steps % self.decode_log_interval == 0:
            self._log_decode()

    @property
    def accept_rate(self) -> float:
        """Accepted drafts over proposed ones: the accept length less its bonus token, over the steps."""
        return min(1.0, (self.accept_len - 1) / self.spec_steps) if self.spec_steps else 0.0

    @property
    def decoded(self) -> bool:
        """A decode batch has been logged (SGLang sets its decode gauges only then)."""
        return self._steps >= self.decode_log_interval

    def _usage(self) -> float:
        tokens = sum(r.prompt_tokens + r.generated for r in self.running)
        return tokens / MAX_TOTAL_NUM_TOKENS

    def _log_decode(self) -> None:
        now = time.monotonic()
        elapsed = max(now - self._log_t, 1e-9)
        self.last_gen_throughput = self._log_tokens / elapsed
        self._log_tokens, self._log_t = 0, now
        tokens = sum(r.prompt_tokens + r.generated for r in self.running)
        spec = ""
        if self.spec_steps:
            spec = f"accept len: {self.accept_len:.2f}, accept rate: {self.accept_rate:.2f}, "
        self.log.info(
            f"Decode batch, #running-req: {len(self.running)}, #token: {tokens}, "
            f"token usage: {tokens / MAX_TOTAL_NUM_TOKENS:.2f}, {spec}cuda graph: True, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: {len(self.waiting)}"
        )
