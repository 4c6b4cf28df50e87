"""`cockpit bench` against an established benchmark (AIPerf, guidellm or evalscope), both run on the same stand-in.

NOT PART OF CI: it needs a peer tool in its own virtual environment, outside the repository, and
takes about three minutes on a two-core machine. It serves issue 7's acceptance point "the same
sweep run with one of the established benchmarks agrees within 5% on output tok/s and TTFT".

Set up a peer once, each in its OWN venv (never the repository's .venv), from PyPI only:

    python3 -m venv /tmp/peer-venv && /tmp/peer-venv/bin/pip install aiperf==0.13.0          # 1.2 GB
    python3 -m venv /tmp/guidellm-venv && /tmp/guidellm-venv/bin/pip install guidellm==0.8.1  # 6 GB (torch)
    python3 -m venv /tmp/evalscope-venv && /tmp/evalscope-venv/bin/pip install 'evalscope[perf]==1.14.1'  # 1.2 GB
    # or: .venv/bin/python benchmarks/compare_peers.py --peer PEER --install

Run it with the repository's Python (it starts the stand-in and `cockpit bench` from the
checkout and the peer from its venv):

    .venv/bin/python benchmarks/compare_peers.py [--peer aiperf|guidellm|evalscope] [--peer-venv DIR]
        [--levels 1,4,16,64] [--out FILE]

What it does:
- writes a word-level tokenizer (benchmarks/peers/make_word_tokenizer.py, run with the peer's
  Python) so the peer needs nothing from the Hub and counts a prompt of N tokens as the N words
  the stand-in counts; every peer takes output token counts from the server's `usage`, as the
  cockpit does (AIPerf `--use-server-token-count`; guidellm and evalscope by default);
- starts the stand-in on loopback with known settings (default 40 tok/s per stream, capacity
  1200 tok/s, TTFT base 20 ms, prefill 50,000 tok/s);
- per concurrency level runs `cockpit bench` and then the peer with the same concurrency,
  request count, warm-up (one request per slot), input and output lengths, `ignore_eos`,
  streaming `/v1/completions`;
- prints JSON (and writes it to --out): per level both tools' output tok/s, TTFT mean and p50,
  the peer/cockpit ratios, the configured truth, and `agree_within_5pct`. Percentiles differ
  slightly by definition: the cockpit uses nearest rank, the peers interpolate.

The truth per level: decode rate per stream r = min(tokens_per_s, capacity / C); TTFT at least
base + input_len / prefill_rate (`ttft_ms_floor`), plus the stand-in's own couple of milliseconds,
which a blocking-socket probe measures on the idle server before the sweep (`ttft_ms_idle_probe`;
`*_vs_truth` TTFT ratios are against it); a closed loop of equal requests started together runs
C * L tokens per round of TTFT + (L - 1) / r seconds. The stand-in does not batch prefills, so
the configured TTFT does not grow with C; what the clients see above it under load is queueing
of the synchronized burst of C requests (client and server sharing the CPU). A third, thin client
(`thin_client`: raw asyncio streams, no JSON parsing) runs the same closed loop after both, as a
reference for TTFT under load; its `round_start_spread_ms_mean` is how far apart the C starts of
one round are (a few ms: a synchronized burst).

Each peer in its best configuration for two cores, and its own diagnostics kept in the JSON:
- AIPerf: `--workers-max 2` (`--peer-workers`; its default is one worker here, which at C=64
  leaves slots idle). Diagnostics: `effective_concurrency`, `credit_to_start_latency` (its
  dispatch delay), `http_req_sending` (its time to write a request), its "event loop for worker is
  taking too long" warnings.
- guidellm: `guidellm run --config SCENARIO` (the scenario is in `commands`), one worker process
  (GUIDELLM__MAX_WORKER_PROCESSES=1; its default min(C, 10) makes ten processes fight the server
  for two cores, and with two each request waits about 2 ms more for its worker at 16 and 64
  streams, which alone put its TTFT 7-9% above), HTTP/1.1, a time warm-up of 0.6 of a round
  (guidellm_scenario says why not its request-count warm-up). Diagnostics: `effective_concurrency`,
  its scheduler's delays, its warnings, and `round_start_spread_ms_mean` from its per-request
  timings.
- evalscope: `evalscope perf` (one process, aiohttp, `--num-workers 1`), its `random` dataset.
  Diagnostics: its TTFT min / p90 / max.

What the sweeps showed on a two-core machine (benchmarks/peers/compare_peers_result.json (AIPerf),
_guidellm.json and _guidellm_run2.json, _evalscope.json), after the cockpit's TTFT clock started
when the request body reaches the socket:
- output tok/s agrees within 5% with every peer at every level (within 1.5%);
- the thin client agrees with the cockpit's TTFT within 4% at every level, so the cockpit measures
  what a raw socket sees;
- guidellm with one worker process: TTFT p50 agrees within 5% at every level in both runs (peer /
  cockpit 1.012, 0.993, 1.036, 0.987 and 1.004, 0.995, 1.042, 1.016 at C=1, 4, 16, 64); the mean
  agrees at every level in the first run (1.025, 1.006, 1.044, 1.030), and in the second at 1 and 4,
  with 16 at 1.051 and 64 at 1.076 (a tail: its p50 there is 1.6% apart). With two worker
  processes each request waited about 2 ms more for its worker at 16 and 64 streams: 7-9% above,
  also at a quarter of the stream rate;
- AIPerf: TTFT agrees at C=1 (1.044) and by p50 at 4 (1.036; mean 1.061); at 16 and 64 it is
  35-84% higher (at 16 and 64 its request-send time is 3 and 11 ms and its credit-to-start
  latency 10 and 43 ms, against 0.6 and 3.5 ms at C=1);
- evalscope: TTFT 10% higher already at C=1 (even its fastest request is above the cockpit's mean:
  a per-request floor of about 2.5 ms in its aiohttp request path), 20% at C=4, 43-103% at 16 and
  64 (one process sends, parses and records every stream).
`agree_within_5pct` (tok/s, TTFT mean and p50 at every level) reads true in guidellm's first run
and false in the others; the per-level fields say where.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, emit, free_port, start_standin

# The established benchmarks that install and run on a CPU machine (docs/facts.md, "Load runs"): PyPI
# name, pinned version, the venv the script looks in by default, the executable it runs.
PEERS: dict[str, dict[str, str]] = {
    "aiperf": {"package": "aiperf", "version": "0.13.0", "venv": "/tmp/peer-venv", "exe": "aiperf"},
    "guidellm": {"package": "guidellm", "version": "0.8.1", "venv": "/tmp/guidellm-venv", "exe": "guidellm"},
    "evalscope": {
        "package": "evalscope",
        "version": "1.14.1",
        "venv": "/tmp/evalscope-venv",
        "exe": "evalscope",
        "extras": "[perf]",
    },
}


def wait_ready(url: str, deadline_s: float = 30.0) -> None:
    import urllib.request

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the stand-in at {url} did not come up")
        time.sleep(0.1)


def install_peer(peer: str, venv: Path) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    spec = PEERS[peer]
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"{spec['package']}{spec.get('extras', '')}=={spec['version']}"],
        check=True,
    )


def peer_version(peer: str, venv: Path) -> str:
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({PEERS[peer]['package']!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def probe_ttft_ms(port: int, input_len: int, n: int = 12) -> dict[str, float]:
    """The stand-in's TTFT on an idle server, seen by the thinnest client there is: a blocking socket,
    timed from just before the request is written to the first content chunk."""
    import statistics

    body = json.dumps(
        {"model": "/m", "prompt": " ".join(["alpha"] * input_len), "max_tokens": 2, "stream": True, "ignore_eos": True}
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    times = []
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = time.perf_counter()
            s.sendall(head + body)
            buf = b""
            while not re.search(rb'"text":\s*"[^"]', buf):  # the first chunk with content
                data = s.recv(65536)
                if not data:
                    break
                buf += data
            times.append((time.perf_counter() - t) * 1000)
        time.sleep(0.05)
    return {"mean": round(statistics.mean(times), 3), "p50": round(statistics.median(times), 3)}


async def thin_level(port: int, c: int, n: int, input_len: int, output_len: int) -> dict[str, Any]:
    """A third opinion: the same closed loop from a client with almost no work per chunk (raw
    asyncio streams, one keep-alive connection per slot, a byte search for the first content),
    to tell the server's own TTFT under a burst of C requests from a client's overhead."""
    import asyncio
    import statistics

    body = json.dumps(
        {
            "model": "/m",
            "prompt": " ".join(["alpha"] * input_len),
            "max_tokens": output_len,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    req = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    content, usage = re.compile(rb'"text":\s*"[^"]'), re.compile(rb'"completion_tokens":\s*(\d+)')
    conns: asyncio.Queue = asyncio.Queue()
    for _ in range(c):
        conns.put_nowait(await asyncio.open_connection("127.0.0.1", port))

    starts: list[float] = []

    async def one() -> tuple[float, float, int]:
        reader, writer = await conns.get()
        try:
            t = time.perf_counter()
            starts.append(t)
            writer.write(req)
            ttft, buf = None, b""
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the stand-in closed the connection")
                buf += data
                if ttft is None and content.search(buf):
                    ttft = time.perf_counter() - t
                if buf.endswith(b"\r\n0\r\n\r\n") and b"[DONE]" in buf:
                    break
            return ttft or 0.0, time.perf_counter() - t, int(usage.findall(buf)[-1])
        finally:
            conns.put_nowait((reader, writer))

    await asyncio.gather(*(one() for _ in range(c)))  # warm-up: one round
    starts.clear()
    start = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(n)))  # the queue of c connections is the semaphore
    wall = time.perf_counter() - start
    while not conns.empty():
        conns.get_nowait()[1].close()
    ttfts = [r[0] * 1000 for r in results]
    starts.sort()
    spreads = [(starts[i + c - 1] - starts[i]) * 1000 for i in range(0, len(starts) - c + 1, c) if c > 1]
    return {
        "output_tokens_per_s": sum(r[2] for r in results) / wall,
        "ttft_ms_mean": statistics.mean(ttfts),
        "ttft_ms_p50": statistics.median(ttfts),
        "duration_s": wall,
        "round_start_spread_ms_mean": round(statistics.mean(spreads), 1) if spreads else None,
    }


def cockpit_cmd(url: str, c: int, n: int, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cockpit",
        "bench",
        "--url",
        url,
        "--concurrency",
        str(c),
        "--requests",
        str(n),
        "--warmup",
        str(c),
        "--input-len",
        str(args.input_len),
        "--output-len",
        str(args.output_len),
        "--endpoint",
        "completions",
        "--json",
        str(out),
    ]


def aiperf_cmd(venv: Path, url: str, c: int, n: int, args: argparse.Namespace, tokenizer: Path, out: Path) -> list[str]:
    return [
        str(venv / "bin" / "aiperf"),
        "profile",
        "--model",
        "/m",
        "--tokenizer",
        str(tokenizer),
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--concurrency",
        str(c),
        "--request-count",
        str(n),
        "--warmup-request-count",
        str(c),
        "--isl",
        str(args.input_len),
        "--isl-stddev",
        "0",
        "--osl",
        str(args.output_len),
        "--osl-stddev",
        "0",
        "--extra-inputs",
        "ignore_eos:true",
        "--use-server-token-count",
        "--use-legacy-max-tokens",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--ui",
        "none",
        "--random-seed",
        "0",
        "--workers-max",
        str(args.peer_workers),
        "--artifact-dir",
        str(out),
    ]


def guidellm_warmup_s(args: argparse.Namespace, c: int) -> float:
    """guidellm's warm-up, in seconds from the start (see guidellm_scenario): 0.6 of a closed-loop round,
    which is after the first round's first tokens and before the second round starts."""
    t = truth(args, c)
    return round(0.6 * (t["ttft_ms_floor"] / 1000 + (args.output_len - 1) / t["per_stream_tokens_per_s"]), 3)


def guidellm_scenario(url: str, c: int, n: int, args: argparse.Namespace, tokenizer: Path, out: Path) -> dict[str, Any]:
    """One guidellm 0.8 run (`guidellm run --config FILE`): a closed loop of C streams over n + C requests,
    streaming `/v1/completions` over HTTP/1.1, synthetic prompts of input_len tokens of the word tokenizer,
    max_tokens = output_len with `ignore_eos` (guidellm sends both when output_tokens is set), output
    counts from the server's `usage` (its default `prefer_response_metrics`).

    Warm-up: guidellm's request-count warm-up (`{"mode": "requests", "value": C}`) ends at the start of
    the request dispatched when completion number C + 1 comes in, which in a closed loop of equal
    requests is the start of the THIRD round (2C requests warmed, n - C of n + C measured). A time warm-up of
    a fraction of one round instead excludes exactly the first round's C requests from its TTFT (it
    keeps requests whose first token comes after the cut) and measures output tok/s over the window
    from the cut to the last token; guidellm honours a time warm-up only under a time limit, hence the
    generous `max_duration`. The request limit n + C ends the run."""
    return {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": "/m",
                "request_format": "/v1/completions",
                "stream": True,
                "http2": False,
            },
            "profile": {
                "kind": "concurrent",
                "streams": [c],
                "warmup": {"mode": "duration", "value": guidellm_warmup_s(args, c)},
            },
            "constraints": [{"kind": "max_requests", "count": n + c}, {"kind": "max_duration", "seconds": 600}],
            "tokenizer": {"kind": "huggingface_auto", "model": str(tokenizer)},
            "data": [{"kind": "synthetic_text", "prompt_tokens": args.input_len, "output_tokens": args.output_len}],
            "seed": {"kind": "static", "value": 0},
            "outputs": [{"kind": "json", "path": str(out / "benchmarks.json")}],
        }
    }


def guidellm_cmd(
    venv: Path, url: str, c: int, n: int, args: argparse.Namespace, tokenizer: Path, out: Path
) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    scenario = out / "scenario.json"
    scenario.write_text(json.dumps(guidellm_scenario(url, c, n, args, tokenizer, out), indent=1))
    return [str(venv / "bin" / "guidellm"), "run", "--config", str(scenario), "--disable-console-interactive"]


def evalscope_cmd(
    venv: Path, url: str, c: int, n: int, args: argparse.Namespace, tokenizer: Path, out: Path
) -> list[str]:
    """`evalscope perf`: its closed loop (a semaphore of C, no barrier after the warm-up) on streaming
    `/v1/completions` (`--api openai` with the full URL, a plain-string prompt, no chat template), its
    `random` dataset of input_len tokens of the word tokenizer, max_tokens = min_tokens = output_len
    with `ignore_eos`, output counts from the server's `usage` (it asks for them with
    `stream_options.include_usage`); one process (`--num-workers 1`: prompt generation is serial,
    the requests run in one asyncio loop either way)."""
    return [
        str(venv / "bin" / "evalscope"),
        "perf",
        "--model",
        "/m",
        "--api",
        "openai",
        "--url",
        url + "/v1/completions",
        "--tokenizer-path",
        str(tokenizer),
        "--dataset",
        "random",
        "--min-prompt-length",
        str(args.input_len),
        "--max-prompt-length",
        str(args.input_len),
        "--no-apply-chat-template",
        "--max-tokens",
        str(args.output_len),
        "--min-tokens",
        str(args.output_len),
        "--extra-args",
        json.dumps({"ignore_eos": True}),
        "--stream",
        "--parallel",
        str(c),
        "--number",
        str(n),
        "--warmup-num",
        str(c),
        "--seed",
        "0",
        "--num-workers",
        str(args.peer_workers),
        "--outputs-dir",
        str(out),
        "--no-timestamp",
    ]


def peer_env(peer: str, args: argparse.Namespace) -> dict[str, str]:
    # The peers' local-path tokenizer loading works only with Hub offline mode OFF (offline mode looks
    # the path up in the Hub cache); a local path never reaches the Hub either way.
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "PYTHONPATH")}
    if peer == "guidellm":
        # guidellm starts min(C, max_worker_processes) worker processes, each an asyncio loop
        # (default 10); on two cores two is best (one starts 64 requests too slowly, ten fight the
        # server and each other for the CPU)
        env["GUIDELLM__MAX_WORKER_PROCESSES"] = str(args.peer_workers)
    return env


PEER_CMDS = {"aiperf": aiperf_cmd, "guidellm": guidellm_cmd, "evalscope": evalscope_cmd}


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(cwd))
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}; its output ends:\n{tail}")


def parse_cockpit(path: Path) -> dict[str, Any]:
    [lv] = json.loads(path.read_text())["levels"]
    return {
        "output_tokens_per_s": lv["output_tokens_per_s"],
        "ttft_ms_mean": lv["ttft_ms"]["mean"],
        "ttft_ms_p50": lv["ttft_ms"]["p50"],
        "duration_s": lv["duration_s"],
        "requests": lv["requests"],
        "errors": lv["errors"],
        "output_tokens": lv["output_tokens"],
        "token_count_source": lv["token_count_source"],
        "tpot_ms_mean": lv["tpot_ms"]["mean"],
    }


def parse_aiperf(art: Path, log: Path) -> dict[str, Any]:
    d = json.loads((art / "profile_export_aiperf.json").read_text())
    # AIPerf's own warning when a worker cannot keep up: "Event loop for worker_x is taking too long
    # to run. Overhead: 163.78ms"
    lags = [
        float(m)
        for m in re.findall(
            r"Event loop for worker\S* is taking too long to run\. Overhead: ([0-9.]+)ms",
            log.read_text(errors="replace"),
        )
    ]

    def get(key: str, stat: str = "avg") -> float | None:
        return (d.get(key) or {}).get(stat)

    return {
        "output_tokens_per_s": get("output_token_throughput"),
        "ttft_ms_mean": get("time_to_first_token"),
        "ttft_ms_p50": get("time_to_first_token", "p50"),
        "duration_s": get("benchmark_duration"),
        "requests": get("request_count"),
        "errors": round((get("request_error_rate") or 0) / 100 * (get("completed_request_count") or 0)),
        "output_tokens": get("total_output_tokens"),
        "input_tokens_mean": get("input_sequence_length"),
        "usage_prompt_tokens_mean": get("usage_prompt_tokens"),
        "output_tokens_mean": get("output_sequence_length"),
        "tpot_ms_mean": get("inter_token_latency"),
        # where AIPerf's TTFT goes: its own time to write the request, then the wait for the first byte
        "http_req_sending_ms_mean": get("http_req_sending"),
        "http_req_waiting_ms_mean": get("http_req_waiting"),
        # below C when its dispatch (timing manager -> ZMQ -> worker) leaves slots idle
        "effective_concurrency": get("effective_concurrency"),
        "credit_to_start_latency_ms_mean": get("credit_to_start_latency"),
        "worker_event_loop_lag_warnings": len(lags),
        "worker_event_loop_lag_ms_max": max(lags, default=None),
    }


def parse_guidellm(art: Path, log: Path) -> dict[str, Any]:
    [b] = json.loads((art / "benchmarks.json").read_text())["benchmarks"]
    m, sched = b["metrics"], b["scheduler_metrics"]

    def get(key: str, stat: str = "mean", status: str = "successful") -> float | None:
        return ((m.get(key) or {}).get(status) or {}).get(stat)

    def sched_ms(key: str) -> float | None:
        v = sched.get(key)
        return None if v is None or v < 0 else round(v * 1000, 3)

    ttft = (m.get("time_to_first_token_ms") or {}).get("successful") or {}
    # how far apart its C requests of one round start (its per-request timings, measured requests
    # only): a closed loop started together keeps its rounds together; guidellm's dispatch spreads them
    measured = sorted(
        r["info"]["timings"]["request_start"]
        for r in b["requests"].get("successful") or []
        if (r["info"]["timings"].get("first_token_iteration") or 0) >= sched["measure_start_time"]
    )
    c = b["config"]["strategy"].get("streams") or 1
    spreads = [
        (rnd[-1] - rnd[0]) * 1000 for rnd in (measured[i : i + c] for i in range(0, len(measured), c)) if len(rnd) > 1
    ]
    return {
        "output_tokens_per_s": get("output_tokens_per_second"),
        "ttft_ms_mean": ttft.get("mean"),
        "ttft_ms_p50": ttft.get("median"),
        "duration_s": b["duration"],
        "warmup_s": b["warmup_duration"],
        "requests": ttft.get("count"),
        "errors": (m.get("request_totals") or {}).get("errored"),
        "output_tokens_mean": get("output_token_count"),
        "input_tokens_mean": get("prompt_token_count"),
        "tpot_ms_mean": get("time_per_output_token_ms"),
        "itl_ms_mean": get("inter_token_latency_ms"),
        # below C when its dispatch (main process -> queue -> worker process) leaves slots idle
        "effective_concurrency": get("request_concurrency"),
        # where its time before the request goes out goes (its scheduler's own averages)
        "queued_ms_mean": sched_ms("queued_time_avg"),
        "resolve_start_delay_ms_mean": sched_ms("resolve_start_delay_avg"),
        "request_start_delay_ms_mean": sched_ms("request_start_delay_avg"),
        "round_start_spread_ms_mean": round(sum(spreads) / len(spreads), 1) if spreads else None,
        "warnings": [w.get("message") or w.get("code") for w in b.get("warnings") or []],
    }


def parse_evalscope(art: Path, log: Path) -> dict[str, Any]:
    [summary_path] = list(art.glob("*/parallel_*_number_*/benchmark_summary.json"))
    summary = json.loads(summary_path.read_text())
    pct = {
        row["Percentiles"]: row for row in json.loads((summary_path.parent / "benchmark_percentile.json").read_text())
    }
    return {
        "output_tokens_per_s": summary.get("Output Throughput (tok/s)"),
        "ttft_ms_mean": summary.get("Avg TTFT (ms)"),
        "ttft_ms_p50": pct.get("50%", {}).get("TTFT (ms)"),
        "duration_s": summary.get("Test Duration (s)"),
        "requests": summary.get("Success Requests"),
        "errors": summary.get("Failed Requests"),
        "input_tokens_mean": summary.get("Avg Input Tokens"),
        "output_tokens_mean": summary.get("Avg Output Tokens"),
        "tpot_ms_mean": summary.get("Avg TPOT (ms)"),
        "itl_ms_mean": summary.get("Avg ITL (ms)"),
        "ttft_ms_min": pct.get("min", {}).get("TTFT (ms)"),
        "ttft_ms_p90": pct.get("90%", {}).get("TTFT (ms)"),
        "ttft_ms_max": pct.get("max", {}).get("TTFT (ms)"),
    }


PEER_PARSERS = {"aiperf": parse_aiperf, "guidellm": parse_guidellm, "evalscope": parse_evalscope}


def truth(args: argparse.Namespace, c: int) -> dict[str, float]:
    per_stream = args.tokens_per_s if args.capacity <= 0 else min(args.tokens_per_s, args.capacity / c)
    ttft_s = args.ttft_base_ms / 1000 + args.input_len / args.prefill_tokens_per_s
    closed_loop = c * args.output_len / (ttft_s + (args.output_len - 1) / per_stream)
    return {
        "per_stream_tokens_per_s": round(per_stream, 3),
        "decode_tokens_per_s": round(per_stream * c, 2),
        "closed_loop_output_tokens_per_s": round(closed_loop, 2),
        "ttft_ms_floor": round(ttft_s * 1000, 3),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else round(a / b, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--peer", choices=sorted(PEERS), default="aiperf", help="the established benchmark (default aiperf)"
    )
    ap.add_argument(
        "--peer-venv",
        type=Path,
        help="the peer's own venv (default: " + ", ".join(f"{k} {v['venv']}" for k, v in PEERS.items()) + ")",
    )
    ap.add_argument("--install", action="store_true", help="create the peer venv and pip install the pinned peer")
    ap.add_argument("--levels", default="1,4,16,64", help="concurrency levels (default 1,4,16,64)")
    ap.add_argument(
        "--peer-workers",
        type=int,
        help="the peer's worker processes: AIPerf --workers-max, guidellm GUIDELLM__MAX_WORKER_PROCESSES "
        "(AIPerf default 2, this machine's cores, where its own default gives one; guidellm default 1, "
        "where its own is min(C, 10)), evalscope --num-workers (default 1: its requests run in one "
        "process anyway)",
    )
    ap.add_argument("--rounds", type=int, default=4, help="measured requests per level = rounds * C, at least 8")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--tokens-per-s", type=float, default=40.0)
    ap.add_argument("--capacity", type=float, default=1200.0)
    ap.add_argument("--ttft-base-ms", type=float, default=20.0)
    ap.add_argument("--prefill-tokens-per-s", type=float, default=50000.0)
    ap.add_argument("--keep", type=Path, help="keep the tools' outputs in this directory")
    ap.add_argument("--out", type=Path, help="also write the result JSON here")
    args = ap.parse_args()

    peer, spec = args.peer, PEERS[args.peer]
    if args.peer_workers is None:
        args.peer_workers = 2 if peer == "aiperf" else 1
    venv = args.peer_venv = args.peer_venv or Path(spec["venv"])
    if args.install:
        install_peer(peer, venv)
    if not (venv / "bin" / spec["exe"]).exists():
        print(
            f"no {peer} in {venv}: python3 -m venv {venv} && "
            f"{venv}/bin/pip install '{spec['package']}{spec.get('extras', '')}=={spec['version']}'"
            "  (or pass --install)",
            file=sys.stderr,
        )
        return 2
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="compare-peers-"))
    work.mkdir(parents=True, exist_ok=True)

    tokenizer = work / "word-tokenizer"
    subprocess.run(
        [str(venv / "bin" / "python"), str(ROOT / "benchmarks" / "peers" / "make_word_tokenizer.py"), str(tokenizer)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = peer_env(peer, args)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_standin(
        port,
        tokens_per_s=args.tokens_per_s,
        capacity=args.capacity,
        ttft_base_ms=args.ttft_base_ms,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
    )
    rows = []
    commands = []
    try:
        wait_ready(url)
        time.sleep(0.5)
        idle_ttft = probe_ttft_ms(port, args.input_len)
        for c in levels:
            n = max(8, args.rounds * c)
            ck_json = work / f"cockpit-c{c}.json"
            ck = cockpit_cmd(url, c, n, args, ck_json)
            run(ck, work / f"cockpit-c{c}.log", env=dict(os.environ, PYTHONPATH=str(ROOT)))
            art = work / f"{peer}-c{c}"
            shutil.rmtree(art, ignore_errors=True)
            pc = PEER_CMDS[peer](venv, url, c, n, args, tokenizer, art)
            log = work / f"{peer}-c{c}.log"
            run(pc, log, env=env, cwd=work)
            commands.append(
                {"concurrency": c, "cockpit": " ".join(ck), "peer": " ".join(pc)}
                | (
                    {
                        "peer_env": f"GUIDELLM__MAX_WORKER_PROCESSES={args.peer_workers}",
                        "peer_scenario": guidellm_scenario(url, c, n, args, tokenizer, art),
                    }
                    if peer == "guidellm"
                    else {}
                )
            )
            mine, theirs = parse_cockpit(ck_json), PEER_PARSERS[peer](art, log)
            thin = asyncio.run(thin_level(port, c, n, args.input_len, args.output_len))
            ratios = {k: ratio(theirs[k], mine[k]) for k in ("output_tokens_per_s", "ttft_ms_mean", "ttft_ms_p50")}
            within = {k: v is not None and abs(v - 1) <= 0.05 for k, v in ratios.items()}
            t = dict(truth(args, c), ttft_ms_idle_probe=idle_ttft)
            rows.append(
                {
                    "concurrency": c,
                    "requests": n,
                    "truth": t,
                    "cockpit": mine,
                    "peer": theirs,
                    "thin_client": thin,
                    "ratio_peer_over_cockpit": ratios,
                    "within_5pct": within,
                    "cockpit_vs_truth": {
                        "output_tokens_per_s": ratio(mine["output_tokens_per_s"], t["closed_loop_output_tokens_per_s"]),
                        "ttft_ms_mean": ratio(mine["ttft_ms_mean"], idle_ttft["mean"]),
                    },
                    "peer_vs_truth": {
                        "output_tokens_per_s": ratio(
                            theirs["output_tokens_per_s"], t["closed_loop_output_tokens_per_s"]
                        ),
                        "ttft_ms_mean": ratio(theirs["ttft_ms_mean"], idle_ttft["mean"]),
                    },
                }
            )
            print(
                f"C={c}: cockpit {mine['output_tokens_per_s']:.1f} tok/s TTFT {mine['ttft_ms_mean']:.2f} ms | "
                f"{peer} {theirs['output_tokens_per_s']:.1f} tok/s TTFT {theirs['ttft_ms_mean']:.2f} ms | "
                f"thin {thin['output_tokens_per_s']:.1f} tok/s TTFT {thin['ttft_ms_mean']:.2f} ms",
                file=sys.stderr,
            )
    finally:
        server.terminate()
        server.wait()
    result = {
        "benchmark": "compare_peers",
        "peer": {"name": peer, "version": peer_version(peer, venv), "venv": str(venv), "workers": args.peer_workers},
        "standin": {
            "tokens_per_s": args.tokens_per_s,
            "capacity": args.capacity,
            "ttft_base_ms": args.ttft_base_ms,
            "prefill_tokens_per_s": args.prefill_tokens_per_s,
        },
        "input_len": args.input_len,
        "output_len": args.output_len,
        "levels": rows,
        "commands": commands,
        "outputs": str(work),
        "agree_within_5pct": all(all(r["within_5pct"].values()) for r in rows),
        "agree_within_5pct_output_tokens_per_s": all(r["within_5pct"]["output_tokens_per_s"] for r in rows),
        "agree_within_5pct_ttft": all(
            r["within_5pct"]["ttft_ms_mean"] and r["within_5pct"]["ttft_ms_p50"] for r in rows
        ),
    }
    emit(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
