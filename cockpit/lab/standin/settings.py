"""The stand-in's own knobs, read from `COCKPIT_STANDIN_*` environment variables.

They live in the environment, not on the command line, so that the unit's ExecStart holds
only real SGLang flags and every cockpit check sees a real SGLang command line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PREFIX = "COCKPIT_STANDIN_"


@dataclass(frozen=True)
class Settings:
    tokens_per_s: float = 40.0  # decode rate of one stream when the server is not saturated
    capacity: float = 0.0  # total output tokens/s over all streams; 0 = unlimited
    accept_len: float = 0.0  # tokens per decode step; 0 = 1, or 2.7 under speculative flags
    prefill_tokens_per_s: float = 50000.0  # prompt tokens/s: sets TTFT with the base latency
    ttft_base_ms: float = 20.0  # latency of a prefill on an idle server
    early_stop: int = 0  # stop every request after this many tokens (finish_reason "stop"); 0 = off
    startup_s: float = 2.0  # simulated weight load, memory pool and CUDA graph capture
    decode_log_interval: int = 40  # decode steps between `Decode batch` lines (SGLang's default)
    crash_after_s: float = 0.0  # crash all workers this long after ready; 0 = only on request
    orphans: int = 0  # at a crash, this many ranks (the last) leave the unit's cgroup and live on
    hang_after_s: float = 0.0  # every rank blocks in a collective this long after ready; 0 = only on request
    dead_detokenizer_after_s: float = 0.0  # the detokenizer dies this long after ready; 0 = only on request
    prefix_cache_hit: float = 0.0  # share of each prompt's tokens its radix cache serves (#cached-token)
    fail_in: str = ""  # a start-up phase (init, load_weight, memory_pool, cuda_graph) rank FAIL_RANK dies in
    fail_rank: int = 0
    worker_streams: str = "auto"  # "own": each rank logs to journald itself; "shared"; "auto"
    access_log: bool = True  # uvicorn-style access lines, as SGLang prints them
    sglang_root: str = ""  # directory holding the `sglang` package; "" = search sys.path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(PREFIX + f.name.upper())
            if raw is None:
                continue
            kind: type[Any] = type(f.default)  # every field has a default: float, int, str or bool
            try:
                if kind is bool:
                    values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
                else:
                    values[f.name] = kind(raw)
            except ValueError:
                raise SystemExit(f"stand-in: {PREFIX}{f.name.upper()}={raw!r} is not a valid {kind.__name__}") from None
        settings = cls(**values)
        if settings.worker_streams not in ("auto", "own", "shared"):
            raise SystemExit(
                f"stand-in: {PREFIX}WORKER_STREAMS must be auto, own or shared, not {settings.worker_streams!r}"
            )
        if settings.fail_in not in ("", "init", "load_weight", "memory_pool", "cuda_graph"):
            phases = "init, load_weight, memory_pool or cuda_graph"
            raise SystemExit(f"stand-in: {PREFIX}FAIL_IN must be {phases}, not {settings.fail_in!r}")
        return settings
