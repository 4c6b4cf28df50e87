"""What a server started with `--enable-metrics` says of itself on `/metrics` (Prometheus text):
the passive series' first source where it has one (cockpit.load.passive).

SGLang's scheduler metrics carry the labels `model_name, engine_type, tp_rank, pp_rank,
moe_ep_rank[, dp_rank]` (0.5.23's names: tests/shared/fixtures/sglang/logs/; a real server's
answers: tests/data/sglang-0.5.23/real-*-metrics*.txt). Every TP rank of a data-parallel rank
reports the same batch where `--enable-metrics-for-all-schedulers` is on, and only the last
pipeline stage generates: a reading takes TP rank 0 of the last stage of each DP rank, sums the
counts over DP ranks and averages the shares.

Two things a real 0.5.23 does that a reading must not take at face value:
- `spec_accept_length` and `spec_accept_rate` are exported at 0.0 by a server without speculative
  decoding (and by a speculative one before its first decode batch, which has no figure yet):
  the accept figures are read only where the server says it speculates (one of its spec gauges
  above zero).
- the prefix cache's counter is the tokenizer's `cached_tokens_total{cache_source="device"}`
  (`host`, `storage`; `total` for a request that came without the split), exported only from the
  first cache hit on (prometheus_client's multiprocess mode writes no sample nobody set). Beside
  `prompt_tokens_total` its absence is 0 cached tokens. The `cache_hit_rate` gauge is reset by the
  decode logger and reads 0, so the prefix-cache hit rate is the counters' `cached_tokens_total /
  prompt_tokens_total`, over the interval between two readings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
PREFIX = "sglang:"
# A server that speculates says so in one of these once it has decoded (0.5.23 adds the last two).
SPECULATING = ("spec_accept_length", "spec_num_steps", "spec_num_draft_tokens")


@dataclass(frozen=True)
class Sample:
    name: str  # without `sglang:`
    labels: dict[str, str]
    value: float


def samples(text: str) -> list[Sample]:
    """SGLang's samples of a Prometheus text exposition (comments and other metrics skipped; a
    line that is not a sample is skipped, never fatal, and so is a value that is no finite
    number: `NaN`, `+Inf`, or `1e400`, which float() reads as infinity, and a count or rate
    derived from it cannot be drawn)."""
    out = []
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        out.append(Sample(m.group(1)[len(PREFIX) :], dict(_LABEL.findall(m.group(2) or "")), value))
    return out


@dataclass(frozen=True)
class Reading:
    """One `/metrics` answer, reduced to what the passive series shows."""

    at: float
    gen_throughput: float | None
    running: float | None
    queued: float | None
    token_usage: float | None
    accept_len: float | None  # speculative decoding only
    accept_rate: float | None
    prompt_tokens: float | None  # counters, for the cache hit rate between two readings
    cached_tokens: float | None  # every cache source; 0 before the first hit, where prompts were counted

    def cache_hit_rate(self, before: Reading | None) -> float | None:
        """Cached over prompt tokens since `before` (since the server started, without one)."""
        if self.prompt_tokens is None or self.cached_tokens is None:
            return None
        prompt, cached = self.prompt_tokens, self.cached_tokens
        if before is not None and before.prompt_tokens is not None and before.cached_tokens is not None:
            prompt, cached = prompt - before.prompt_tokens, cached - before.cached_tokens
        return cached / prompt if prompt > 0 else None


def _reporting(found: Iterable[Sample]) -> list[Sample]:
    """TP rank 0 of the last pipeline stage, of each DP rank."""
    found = list(found)
    last_pp = max((int(s.labels.get("pp_rank", "0") or 0) for s in found), default=0)
    return [
        s for s in found if s.labels.get("tp_rank", "0") == "0" and int(s.labels.get("pp_rank", "0") or 0) == last_pp
    ]


def _by_name(text: str) -> dict[str, list[float]]:
    """The reporting ranks' values of each metric, by name."""
    by_name: dict[str, list[float]] = {}
    for s in _reporting(samples(text)):
        by_name.setdefault(s.name, []).append(s.value)
    return by_name


# The server's own account of a load run: the counters' difference over it, and the gauge of
# its speculation (an experiment keeps them beside the client's figures).
COUNTERS = ("generation_tokens_total", "prompt_tokens_total", "cached_tokens_total", "num_requests_total")


def counters(text: str) -> dict[str, float]:
    """The totals of COUNTERS the text holds, and `spec_accept_length` where it speculates."""
    by_name = _by_name(text)
    out = {name: sum(by_name[name]) for name in COUNTERS if name in by_name}
    accept = by_name.get("spec_accept_length")
    if accept and any(v > 0 for name in SPECULATING for v in by_name.get(name, ())):
        out["spec_accept_length"] = sum(accept) / len(accept)
    return out


def reading(text: str, at: float) -> Reading | None:
    """None when the text holds none of SGLang's scheduler metrics."""
    by_name = _by_name(text)
    if "num_running_reqs" not in by_name and "gen_throughput" not in by_name:
        return None

    def total(name: str) -> float | None:
        values = by_name.get(name)
        return sum(values) if values else None

    def mean(name: str) -> float | None:
        values = by_name.get(name)
        return sum(values) / len(values) if values else None

    speculating = any(value > 0 for name in SPECULATING for value in by_name.get(name, ()))
    prompt, cached = total("prompt_tokens_total"), total("cached_tokens_total")
    return Reading(
        at,
        total("gen_throughput"),
        total("num_running_reqs"),
        total("num_queue_reqs"),
        mean("token_usage"),
        mean("spec_accept_length") if speculating else None,
        mean("spec_accept_rate") if speculating else None,
        prompt,
        cached if cached is not None or prompt is None else 0.0,
    )
