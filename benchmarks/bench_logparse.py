"""How fast `cockpit.sglang.server.logparse.parse` runs over the lines of a busy SGLang journal.

It runs on every journal line, so both halves matter: the lines it turns into events (decode
and prefill stats, which a loaded server prints several times a second) and the far more
numerous lines it must reject (access log, tracebacks, warnings, progress bars, the odd
100,000-character line). Each kind is timed alone, then a mix in a realistic proportion.

Prints JSON: lines/s per kind and for the mix (best of --repeat runs, one core).

Usage: python benchmarks/bench_logparse.py [--lines N] [--repeat R]
"""

from __future__ import annotations

import argparse
import random
import time

from _common import emit

from cockpit.sglang.server.logparse import parse

KINDS = {
    "decode": (
        "[2026-11-30 06:23:49 TP0] Decode batch, #running-req: 32, #token: 18234, token usage: 0.13, "
        "accept len: 3.40, accept rate: 0.34, cuda graph: True, gen throughput (token/s): 4351.94, "
        "#queue-req: 3"
    ),
    "prefill": (
        "[2026-11-30 06:23:49 TP0] Prefill batch, #new-seq: 2, #new-token: 4096, #cached-token: 512, "
        "token usage: 0.13, #running-req: 31, #queue-req: 3, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 8191.55"
    ),
    "access": '[2026-11-30 06:23:49] INFO:     127.0.0.1:52344 - "POST /v1/completions HTTP/1.1" 200 OK',
    "other_info": "[2026-11-30 06:23:49 TP3] Cache flushed successfully!",
    "level_form": (
        "[2026-11-30 06:23:23] WARNING server_args.py:2364: Max running requests is reset to 48 for "
        "speculative decoding. You can override this by explicitly setting --max-running-requests."
    ),
    "traceback": (
        '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
        "line 2876, in run_scheduler_process"
    ),
    "warning": (
        "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/layers/quantization/awq.py:76: "
        "UserWarning: Only CUDA, HIP and XPU support AWQ currently."
    ),
    "progress": "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.21it/s]",
    "long": "[2026-11-30 06:23:49 TP0] " + "x" * 100_000,
}
# A loaded 8-rank server: per second about 10 prefill and 2 decode lines (TP0 only), 10 access
# lines, and a background of everything else.
MIX = {
    "decode": 2,
    "prefill": 10,
    "access": 10,
    "other_info": 3,
    "level_form": 1,
    "traceback": 6,
    "warning": 1,
    "progress": 1,
}


def rate(lines: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for line in lines:
            parse(line)
        best = min(best, time.perf_counter() - t0)
    return len(lines) / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    assert all(parse(KINDS[k]) is not None for k in ("decode", "prefill"))
    assert all(parse(KINDS[k]) is None for k in KINDS if k not in ("decode", "prefill"))
    per_kind = {
        k: round(rate([line] * (args.lines if k != "long" else 2_000), args.repeat)) for k, line in KINDS.items()
    }
    rng = random.Random(0)
    mix = rng.choices([KINDS[k] for k in MIX], weights=list(MIX.values()), k=args.lines)
    emit(
        {
            "lines_per_s": {"mix": round(rate(mix, args.repeat)), **per_kind},
            "mix_weights": MIX,
            "lines": args.lines,
            "repeat": args.repeat,
        }
    )


if __name__ == "__main__":
    main()
