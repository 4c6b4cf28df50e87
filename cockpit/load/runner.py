"""A closed-loop load generator for SGLang's OpenAI-compatible streaming API.

Per concurrency level: a warm-up, then N requests created up front and run under a
semaphore of that size (or, with `duration_s`, that many streams each sending its next request
until the level's time is up), each a random prompt of `input_len` words with `max_tokens`,
`ignore_eos` and `stream_options.include_usage`. Timing is taken on each SSE chunk as it
arrives; parsing is kept to what the metrics need so the client stays out of the way.

A server on a host is reached through `forwarded`, which a read-only host refuses: a load run is
a change to the host (its server's queue, its GPUs' work), and `--read-only` promises none.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import aiohttp
import msgspec
import yarl

from cockpit.errors import CockpitError
from cockpit.load.results import LevelResult, RequestResult
from cockpit.remote.base import Host

# The most frequent English words, each one token in the common subword tokenizers (with its
# leading space) and in a word-level one, so that a prompt of N words is about N tokens and two
# prompts are two token sequences. The NATO alphabet this was before is no word of the
# real-SGLang lab's 64-word tokenizer: every prompt was N `<unk>`s, the same sequence each time,
# and SGLang's prefix cache served 344 of a sweep's 384 prompt tokens.
_VOCAB = (
    "the", "of", "and", "to", "in", "is", "it", "that", "on", "for", "with", "as", "was", "at", "by",
    "this", "be", "are", "or", "from", "an", "not", "but", "what", "all", "were", "when", "we", "there",
    "can", "one", "which", "do", "if", "will", "each", "about", "how", "up", "out", "them", "then",
    "she", "many", "some", "so", "these", "would", "other",
)  # fmt: skip

_JSON = {"Content-Type": "application/json"}
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
# What a server's answer that is not the shape the API promises raises while it is read: bad or
# too deeply nested JSON (msgspec.DecodeError is a ValueError; RecursionError past ~1,000
# levels), and fields of another type. A request, not the run, fails on one.
_MALFORMED = (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError)


class _SendClock:
    """When a request's body reached the socket. NOTES define TTFT from the send; at a burst of
    C starts, aiohttp yields before writing and the other C-1 requests run first, which adds
    milliseconds of client queueing at 64 streams if the clock starts at `session.post`."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = time.perf_counter()


async def _body_sent(_session: aiohttp.ClientSession, ctx: Any, _params: Any) -> None:
    ctx.trace_request_ctx.t = time.perf_counter()


def _send_trace() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_body_sent)
    return trace


@dataclass(frozen=True)
class LoadConfig:
    url: str  # the server's base URL as this process reaches it (a forwarded port for SSH hosts)
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    requests: int = 64
    warmup: int = 2
    input_len: int = 1024
    output_len: int = 256
    endpoint: str = "completions"  # or "chat"
    # Open-loop levels after the closed ones: requests/s, each gap drawn from an exponential
    # (Poisson arrivals), as many requests as `requests`; nothing caps the streams in flight.
    rates: tuple[float, ...] = ()
    # Each level runs this long instead of `requests` (every request sent before the end is
    # measured to its last token): a level's length in time is what makes loads comparable.
    duration_s: float | None = None
    # Lengths drawn uniformly from [input_len, input_len_max] (and the same for output) where
    # given: a fixed length is a workload no user sends.
    input_len_max: int | None = None
    output_len_max: int | None = None
    model: str | None = None  # None: the first of /v1/models
    # Drawn afresh for each run (and recorded with it): a run repeating the last one's prompts
    # would find them in SGLang's prefix cache and measure the cache.
    seed: int = field(default_factory=lambda: random.randrange(2**32))
    timeout_s: float = 600.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.asynccontextmanager
async def forwarded(host: Host, addr: str, port: int) -> AsyncIterator[int]:
    """A local port reaching the server at addr:port as `host` sees it, for a load run; refused
    before anything is opened when the host is read-only here."""
    host.refuse_changes("no load was sent")
    async with host.forward_port(addr, port) as local:
        yield local


def prompt(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(words))


class Runner:
    """One sweep. `on_request` and `on_level` let a UI draw progress as results arrive."""

    def __init__(
        self,
        config: LoadConfig,
        on_request: Callable[[int, RequestResult], None] | None = None,
        on_level: Callable[[LevelResult], None] | None = None,
    ) -> None:
        self.config = config
        self.on_request = on_request
        self.on_level = on_level
        self.rng = random.Random(config.seed)

    async def run(self) -> list[LevelResult]:
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_s, sock_connect=10)
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        async with aiohttp.ClientSession(
            timeout=timeout, connector=connector, trace_configs=[_send_trace()]
        ) as session:
            model = self.config.model or await self._model(session)
            levels = []
            loads: list[tuple[int, float | None]] = [(c, None) for c in self.config.concurrency]
            for c, rate in loads + [(0, r) for r in self.config.rates]:
                work = self.run_level(session, model, c) if rate is None else self.run_rate(session, model, rate)
                level = await work
                levels.append(level)
                if self.on_level:
                    self.on_level(level)
            return levels

    async def _model(self, session: aiohttp.ClientSession) -> str:
        url = self.config.url.rstrip("/") + "/v1/models"
        async with session.get(url) as resp:
            resp.raise_for_status()
            body = await resp.read()
        try:
            model = _decode(body)["data"][0]["id"]
        except _MALFORMED:
            model = None
        if not isinstance(model, str):
            raise CockpitError(f"{url} named no model (data[0].id): give the model's name with --model")
        return model

    async def run_level(self, session: aiohttp.ClientSession, model: str, concurrency: int) -> LevelResult:
        sem = asyncio.Semaphore(concurrency)
        url = yarl.URL(self.config.url.rstrip("/") + self._path)

        async def one(measured: bool, body: bytes) -> RequestResult:
            async with sem:
                result = await self.request(session, url, body)
            if measured and self.on_request:
                self.on_request(concurrency, result)
            return result

        warmup = await asyncio.gather(*(one(False, self._body(model)) for _ in range(self.config.warmup)))
        if self.config.duration_s is not None:
            return await self._timed_level(concurrency, one, model, warmup)
        # Bodies are encoded before the clock starts: at a burst of C starts, C encodings would
        # otherwise sit between the first requests' start and their first tokens.
        # Fewer requests than the concurrency would never reach it: send at least one per slot.
        bodies = [self._body(model) for _ in range(max(self.config.requests, concurrency))]
        start = time.perf_counter()
        results = await _all([one(True, body) for body in bodies])
        return LevelResult.from_results(concurrency, results, time.perf_counter() - start, warmup)

    async def _timed_level(
        self,
        concurrency: int,
        one: Callable[[bool, bytes], Coroutine[Any, Any, RequestResult]],
        model: str,
        warmup: list[RequestResult],
    ) -> LevelResult:
        """`concurrency` streams, each sending its next request until `duration_s` is up; the
        first body of each is encoded before the clock starts (a burst's encodings would sit
        before its first tokens), each next one while its stream waits for nothing."""
        assert self.config.duration_s is not None
        firsts = [self._body(model) for _ in range(concurrency)]
        start = time.perf_counter()
        end = start + self.config.duration_s

        async def stream(body: bytes) -> list[RequestResult]:
            done = [await one(True, body)]
            while time.perf_counter() < end:
                done.append(await one(True, self._body(model)))
            return done

        results = [r for done in await _all([stream(body) for body in firsts]) for r in done]
        return LevelResult.from_results(concurrency, results, time.perf_counter() - start, warmup)

    async def run_rate(self, session: aiohttp.ClientSession, model: str, rate: float) -> LevelResult:
        """An open loop: each request sent at its Poisson arrival time whether or not the ones
        before it are done, so that a server past its capacity shows a growing queue (TTFT), as
        users arriving on their own would, where a closed loop only slows down."""
        url = yarl.URL(self.config.url.rstrip("/") + self._path)
        warmup = [await self.request(session, url, self._body(model)) for _ in range(self.config.warmup)]
        if self.config.duration_s is None:
            gaps = [self.rng.expovariate(rate) for _ in range(self.config.requests)]
        else:  # the arrivals that fall within the level's time, the first at once
            gaps = [self.rng.expovariate(rate)]
            total = gaps[0]
            while total < self.config.duration_s:
                gaps.append(self.rng.expovariate(rate))
                total += gaps[-1]
        bodies = [self._body(model) for _ in gaps]
        start = time.perf_counter()

        async def one(at: float, body: bytes) -> RequestResult:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            result = await self.request(session, url, body)
            if self.on_request:
                self.on_request(0, result)
            return result

        arrivals = [0.0, *itertools.accumulate(gaps[:-1])]  # the first at once
        results = await _all([one(at, body) for at, body in zip(arrivals, bodies, strict=True)])
        # A level of a duration spans it whole: its last gap, with no arrival, is part of the load.
        elapsed = max(time.perf_counter() - start, self.config.duration_s or 0.0)
        return LevelResult.from_results(0, results, elapsed, warmup, rate=rate)

    @property
    def _path(self) -> str:
        return "/v1/chat/completions" if self.config.endpoint == "chat" else "/v1/completions"

    def _length(self, low: int, high: int | None) -> int:
        return low if high is None or high <= low else self.rng.randint(low, high)

    def _body(self, model: str) -> bytes:
        text = prompt(self.rng, self._length(self.config.input_len, self.config.input_len_max))
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self._length(self.config.output_len, self.config.output_len_max),
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if self.config.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return _encode(body)

    async def request(self, session: aiohttp.ClientSession, url: yarl.URL, body: bytes) -> RequestResult:
        chat = self.config.endpoint == "chat"
        result = RequestResult(ok=False)
        chunks = 0
        usage_tokens: int | None = None
        last_usage = 0
        last_t = 0.0
        sent = _SendClock()
        try:
            async with session.post(url, data=body, headers=_JSON, trace_request_ctx=sent) as resp:
                if resp.status != 200:
                    result.error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                    return result
                # One clock reading per socket read, not per line: at 64 streams a line-by-line
                # reader spends long enough on other streams' chunks to show up in TTFT.
                tail, done = b"", False
                async for received in resp.content.iter_any():
                    now = time.perf_counter()
                    lines = (tail + received).split(b"\n")
                    tail = lines.pop()
                    for raw in lines:
                        if not raw.startswith(b"data:"):
                            continue
                        data = raw[5:].strip()
                        if data == b"[DONE]":
                            done = True
                            break
                        event = _decode(data)
                        usage = event.get("usage")
                        counted = usage.get("completion_tokens") if usage else None
                        if counted is not None:
                            usage_tokens = int(counted)
                            if usage.get("prompt_tokens") is not None:
                                result.prompt_tokens = int(usage["prompt_tokens"])
                        choices = event.get("choices") or ()
                        if not choices:
                            continue
                        # Continuous usage says what this chunk carried, text or none: a token
                        # whose text is empty (a special token, or bytes of a character not yet
                        # whole) is still a step of the decode, and skipping its chunk made a
                        # plain server read 2 tokens a chunk, as if it speculated.
                        carried = None if counted is None else int(counted) - last_usage
                        if carried is None:
                            delta = choices[0].get("delta") if chat else choices[0]
                            if not (delta or {}).get("content" if chat else "text"):
                                continue
                        elif carried <= 0:
                            continue
                        if chunks == 0:
                            result.ttft_s = now - sent.t
                        else:
                            result.chunk_gaps_s.append(now - last_t)
                        if carried is not None:  # continuous usage: exact tokens of this chunk
                            result.chunk_tokens.append(carried)
                            last_usage += carried
                        chunks += 1
                        last_t = now
                    if done:
                        break
            result.e2e_s = time.perf_counter() - sent.t
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, asyncio.TimeoutError, *_MALFORMED) as e:
            result.error = f"{type(e).__name__}: {e}"[:200]
            return result
        if usage_tokens is not None:
            result.output_tokens, result.tokens_from_usage = usage_tokens, True
        else:
            result.output_tokens = chunks
        if len(result.chunk_tokens) != chunks:
            result.chunk_tokens = []
        result.ok = chunks > 0
        if not result.ok:
            result.error = "the stream held no content"
        return result


T = TypeVar("T")


async def _all(work: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Every request's (or stream's) result; a cancelled level cancels the requests still out."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def run_record(config: LoadConfig, levels: Sequence[LevelResult], **extra: Any) -> dict[str, Any]:
    """The JSON of a run: the `{"config", "levels"}` of docs/architecture.md plus what makes runs comparable later."""
    return {"config": config.to_json(), "levels": [lv.to_json() for lv in levels], **extra}


def server_args(info: dict[str, Any]) -> dict[str, Any]:
    """The resolved arguments of a `/server_info` answer: its plain values (the nested ones are
    live state, such as `internal_states`)."""
    return {k: v for k, v in info.items() if not isinstance(v, (dict, list))}
