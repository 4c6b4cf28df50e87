"""Load-run records and the metrics defined in the README (the established benchmarks' way).

- TTFT: the first chunk that carried a token minus send time: by the server's continuous usage
  where it sends one (a token may decode to no text), else the first chunk with text.
- TPOT: (E2E - TTFT) / (N - 1), per request.
- per-token ITL: each chunk gap divided by the tokens that chunk carried; with speculative
  decoding a chunk holds several tokens, so this is not the chunk gap, which is kept apart.
- output tok/s: sum of N over the level's wall time; per stream: mean of (N - 1) / (E2E - TTFT).
- N comes from the server's `usage`; counting chunks is a marked fallback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestResult:
    ok: bool
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int = 0
    tokens_from_usage: bool = False
    prompt_tokens: int | None = None  # the server's count of the prompt, where its usage says it
    chunk_gaps_s: list[float] = field(default_factory=list)  # gaps between content chunks after the first
    chunk_tokens: list[int] = field(default_factory=list)  # tokens per content chunk, where the server said

    @property
    def chunks(self) -> int:
        return len(self.chunk_gaps_s) + 1 if self.ttft_s is not None else 0

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def per_token_itl_s(self) -> list[float]:
        """One sample per token: each gap spread over the tokens of the chunk it ends (a chunk of n
        tokens gives n samples of gap/n); exact when the server reported each chunk's tokens."""
        if not self.chunk_gaps_s:
            return []
        if len(self.chunk_tokens) == len(self.chunk_gaps_s) + 1:
            gaps_and_tokens = zip(self.chunk_gaps_s, self.chunk_tokens[1:], strict=True)
            return [g / n for g, n in gaps_and_tokens if n > 0 for _ in range(n)]
        # Only the total is known: the first chunk holds the prefill's one token.
        per_chunk = max(1.0, (self.output_tokens - 1) / len(self.chunk_gaps_s))
        return [g / per_chunk for g in self.chunk_gaps_s]


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank percentile of values already sorted (not empty)."""
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def summary(values: Sequence[float], scale: float = 1000.0) -> dict[str, float | None]:
    """mean, p50, p90, p95, p99 (nearest-rank percentiles), scaled (seconds -> ms by default)."""
    if not values:
        return {"mean": None, "p50": None, "p90": None, "p95": None, "p99": None}
    ordered = sorted(values)
    mean = sum(ordered) / len(ordered) * scale
    return {"mean": mean, **{f"p{p}": percentile(ordered, p) * scale for p in (50, 90, 95, 99)}}


def _prompt_tokens(results: Sequence[RequestResult]) -> int | None:
    """The prompts' tokens summed, where the server said each one's."""
    counts = [r.prompt_tokens for r in results]
    return sum(c for c in counts if c is not None) if None not in counts else None


@dataclass
class LevelResult:
    concurrency: int  # the closed loop's streams; 0 for an open loop at `rate`
    requests: int
    errors: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    output_tokens_per_s_per_stream: float | None
    request_throughput: float
    tokens_per_chunk: float | None
    token_count_source: str  # "usage", or "chunks (fallback)" when the server sent no usage
    ttft_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    chunk_gap_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    first_errors: list[str] = field(default_factory=list)
    # The prompts as the server's tokenizer counted them (None where its usage did not say): what
    # --input-len words came to, and the unmeasured warm-up's share of what the level asked of the
    # server, so that a run adds up to the server's own counters (generation_tokens_total).
    prompt_tokens: int | None = None
    warmup_requests: int = 0
    warmup_output_tokens: int = 0
    warmup_prompt_tokens: int | None = None
    rate: float | None = None  # requests/s sent with Poisson arrivals (an open loop), else None

    @property
    def load(self) -> str:
        """The level as a reader names it: `c8` (8 streams) or `2.5/s` (an arrival rate)."""
        return f"{self.rate:g}/s" if self.rate is not None else f"c{self.concurrency}"

    @classmethod
    def from_results(
        cls,
        concurrency: int,
        results: Sequence[RequestResult],
        duration_s: float,
        warmup: Sequence[RequestResult] = (),
        rate: float | None = None,
    ) -> LevelResult:
        good = [r for r in results if r.ok]
        tokens = sum(r.output_tokens for r in good)
        streams = [
            (r.output_tokens - 1) / (r.e2e_s - r.ttft_s)
            for r in good
            if r.ttft_s is not None and r.e2e_s is not None and r.output_tokens > 1 and r.e2e_s > r.ttft_s
        ]
        chunks = sum(r.chunks for r in good)
        errors = [r.error or "failed" for r in results if not r.ok]
        return cls(
            concurrency=concurrency,
            requests=len(results),
            errors=len(errors),
            duration_s=duration_s,
            output_tokens=tokens,
            output_tokens_per_s=tokens / duration_s if duration_s > 0 else 0.0,
            output_tokens_per_s_per_stream=sum(streams) / len(streams) if streams else None,
            request_throughput=len(good) / duration_s if duration_s > 0 else 0.0,
            tokens_per_chunk=tokens / chunks if chunks else None,
            token_count_source="usage"
            if good and all(r.tokens_from_usage for r in good)
            else ("chunks (fallback)" if good else "none"),
            ttft_ms=summary([r.ttft_s for r in good if r.ttft_s is not None]),
            tpot_ms=summary([t for r in good if (t := r.tpot_s) is not None]),
            itl_ms=summary([g for r in good for g in r.per_token_itl_s()]),
            chunk_gap_ms=summary([g for r in good for g in r.chunk_gaps_s]),
            e2e_ms=summary([r.e2e_s for r in good if r.e2e_s is not None]),
            first_errors=sorted(set(errors))[:3],
            prompt_tokens=_prompt_tokens(good),
            warmup_requests=len(warmup),
            warmup_output_tokens=sum(r.output_tokens for r in warmup if r.ok),
            warmup_prompt_tokens=_prompt_tokens([r for r in warmup if r.ok]),
            rate=rate,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
