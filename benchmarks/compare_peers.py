"""`cockpit bench` against an established benchmark (AIPerf), both run on the same stand-in.

NOT PART OF CI: it needs a peer tool (about 1.2 GB) in its own virtual environment, outside the
repository, and takes about three minutes on a two-core machine. It serves issue 7's acceptance
point "the same sweep run with one of the established benchmarks agrees within 5% on output
tok/s and TTFT".

Set up the peer once, in a SEPARATE venv (never the repository's .venv), from PyPI only:

    python3 -m venv /tmp/peer-venv && /tmp/peer-venv/bin/pip install aiperf==0.13.0
    # or: .venv/bin/python benchmarks/compare_peers.py --install

Run it with the repository's Python (it starts the stand-in and `cockpit bench` from the
checkout and AIPerf from the peer venv):

    .venv/bin/python benchmarks/compare_peers.py [--peer-venv /tmp/peer-venv] [--levels 1,4,16,64]

What it does:
- writes a word-level tokenizer (benchmarks/peers/make_word_tokenizer.py, run with the peer's
  Python) so AIPerf needs nothing from the Hub and counts a prompt of N tokens as the N words the
  stand-in counts; AIPerf also takes output token counts from the server's `usage`
  (`--use-server-token-count`), as the cockpit does;
- starts the stand-in on loopback with known settings (default 40 tok/s per stream, capacity
  1200 tok/s, TTFT base 20 ms, prefill 50,000 tok/s);
- per concurrency level runs `cockpit bench` and then `aiperf profile` with the same concurrency,
  request count, warm-up (one request per slot), input and output lengths, `ignore_eos`,
  streaming `/v1/completions`;
- prints JSON: per level both tools' output tok/s, TTFT mean and p50, the peer/cockpit ratios, the
  configured truth, and `agree_within_5pct`. Percentiles differ slightly by definition: the
  cockpit uses nearest rank, AIPerf interpolates.

The truth per level: decode rate per stream r = min(tokens_per_s, capacity / C); TTFT at least
base + input_len / prefill_rate (`ttft_ms_floor`), plus the stand-in's own couple of milliseconds,
which a blocking-socket probe measures on the idle server before the sweep (`ttft_ms_idle_probe`;
`*_vs_truth` TTFT ratios are against it); a closed loop of equal requests started together runs
C * L tokens per round of TTFT + (L - 1) / r seconds. The stand-in does not batch prefills, so
the configured TTFT does not grow with C; what both clients see above it under load is queueing
of the synchronized burst of C requests (client and server sharing the CPU).

AIPerf runs with `--workers-max 2` (`--peer-workers`): its default is one worker on a two-core
machine, which at C=64 leaves slots idle. For each level the JSON also keeps AIPerf's own
diagnostics: `effective_concurrency` (mean requests in flight), `credit_to_start_latency` (its
dispatch delay), `http_req_sending` (its time to write a request), and its "event loop for worker
is taking too long" warnings. A third, thin client (`thin_client`: raw asyncio streams, no JSON
parsing) runs the same closed loop after both, as a reference for TTFT under load.

What to expect on a two-core machine: output tok/s agrees within 5% at every level; TTFT agrees at
C=1 and 4, while at C=16 and 64 AIPerf's TTFT is 35-75% higher than the cockpit's and the thin
client's, the excess being AIPerf's own client overhead (its `http_req_sending` and
`credit_to_start_latency`, and its event-loop warnings, all grow with C). `agree_within_5pct`
then reads false; the per-level fields say where.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEER = "aiperf"
PEER_VERSION = "0.13.0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def install_peer(venv: Path) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{PEER}=={PEER_VERSION}"], check=True)


def peer_version(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import importlib.metadata as m; print(m.version('aiperf'))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def probe_ttft_ms(port: int, input_len: int, n: int = 12) -> dict[str, float]:
    """The stand-in's TTFT on an idle server, seen by the thinnest client there is: a blocking socket,
    timed from just before the request is written to the first content chunk."""
    import statistics

    body = json.dumps({"model": "/m", "prompt": " ".join(["alpha"] * input_len), "max_tokens": 2, "stream": True,
                       "ignore_eos": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
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

    body = json.dumps({"model": "/m", "prompt": " ".join(["alpha"] * input_len), "max_tokens": output_len,
                       "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
    req = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    content, usage = re.compile(rb'"text":\s*"[^"]'), re.compile(rb'"completion_tokens":\s*(\d+)')
    conns: asyncio.Queue = asyncio.Queue()
    for _ in range(c):
        conns.put_nowait(await asyncio.open_connection("127.0.0.1", port))

    async def one() -> tuple[float, float, int]:
        reader, writer = await conns.get()
        try:
            t = time.perf_counter()
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
    start = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(n)))  # the queue of c connections is the semaphore
    wall = time.perf_counter() - start
    while not conns.empty():
        conns.get_nowait()[1].close()
    ttfts = [r[0] * 1000 for r in results]
    return {"output_tokens_per_s": sum(r[2] for r in results) / wall, "ttft_ms_mean": statistics.mean(ttfts),
            "ttft_ms_p50": statistics.median(ttfts), "duration_s": wall}


def start_standin(args: argparse.Namespace, port: int) -> subprocess.Popen:
    from cockpit.sglang.releases import sglang_source

    env = dict(os.environ, PYTHONPATH=str(ROOT), COCKPIT_STANDIN_SGLANG_ROOT=str(sglang_source("0.5.23")),
               COCKPIT_STANDIN_STARTUP_S="0.1", COCKPIT_STANDIN_ACCESS_LOG="0",
               COCKPIT_STANDIN_TOKENS_PER_S=str(args.tokens_per_s), COCKPIT_STANDIN_CAPACITY=str(args.capacity),
               COCKPIT_STANDIN_TTFT_BASE_MS=str(args.ttft_base_ms),
               COCKPIT_STANDIN_PREFILL_TOKENS_PER_S=str(args.prefill_tokens_per_s))
    return subprocess.Popen([sys.executable, "-m", "cockpit.lab.standin", "--model-path", "/m", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cockpit_cmd(url: str, c: int, n: int, args: argparse.Namespace, out: Path) -> list[str]:
    return [sys.executable, "-m", "cockpit", "bench", "--url", url, "--concurrency", str(c), "--requests", str(n),
            "--warmup", str(c), "--input-len", str(args.input_len), "--output-len", str(args.output_len),
            "--endpoint", "completions", "--json", str(out)]


def peer_cmd(venv: Path, url: str, c: int, n: int, args: argparse.Namespace, tokenizer: Path, out: Path) -> list[str]:
    return [str(venv / "bin" / "aiperf"), "profile", "--model", "/m", "--tokenizer", str(tokenizer), "--url", url,
            "--endpoint-type", "completions", "--streaming", "--concurrency", str(c), "--request-count", str(n),
            "--warmup-request-count", str(c), "--isl", str(args.input_len), "--isl-stddev", "0",
            "--osl", str(args.output_len), "--osl-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--use-server-token-count", "--use-legacy-max-tokens", "--no-server-metrics", "--no-gpu-telemetry",
            "--ui", "none", "--random-seed", "0", "--workers-max", str(args.peer_workers), "--artifact-dir", str(out)]


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}; its output ends:\n{tail}")


def parse_cockpit(path: Path) -> dict[str, Any]:
    [lv] = json.loads(path.read_text())["levels"]
    return {"output_tokens_per_s": lv["output_tokens_per_s"], "ttft_ms_mean": lv["ttft_ms"]["mean"],
            "ttft_ms_p50": lv["ttft_ms"]["p50"], "duration_s": lv["duration_s"], "requests": lv["requests"],
            "errors": lv["errors"], "output_tokens": lv["output_tokens"], "token_count_source": lv["token_count_source"],
            "tpot_ms_mean": lv["tpot_ms"]["mean"]}


def parse_peer(art: Path, log: Path) -> dict[str, Any]:
    d = json.loads((art / "profile_export_aiperf.json").read_text())
    # AIPerf's own warning when a worker cannot keep up: "Event loop for worker_x is taking too long
    # to run. Overhead: 163.78ms"
    lags = [float(m) for m in re.findall(r"Event loop for worker\S* is taking too long to run\. Overhead: ([0-9.]+)ms",
                                          log.read_text(errors="replace"))]

    def get(key: str, stat: str = "avg") -> float | None:
        return (d.get(key) or {}).get(stat)

    return {"output_tokens_per_s": get("output_token_throughput"), "ttft_ms_mean": get("time_to_first_token"),
            "ttft_ms_p50": get("time_to_first_token", "p50"), "duration_s": get("benchmark_duration"),
            "requests": get("request_count"),
            "errors": round((get("request_error_rate") or 0) / 100 * (get("completed_request_count") or 0)),
            "output_tokens": get("total_output_tokens"), "input_tokens_mean": get("input_sequence_length"),
            "usage_prompt_tokens_mean": get("usage_prompt_tokens"), "output_tokens_mean": get("output_sequence_length"),
            "tpot_ms_mean": get("inter_token_latency"),
            # where AIPerf's TTFT goes: its own time to write the request, then the wait for the first byte
            "http_req_sending_ms_mean": get("http_req_sending"), "http_req_waiting_ms_mean": get("http_req_waiting"),
            # below C when its dispatch (timing manager -> ZMQ -> worker) leaves slots idle
            "effective_concurrency": get("effective_concurrency"),
            "credit_to_start_latency_ms_mean": get("credit_to_start_latency"),
            "worker_event_loop_lag_warnings": len(lags), "worker_event_loop_lag_ms_max": max(lags, default=None)}


def truth(args: argparse.Namespace, c: int) -> dict[str, float]:
    per_stream = args.tokens_per_s if args.capacity <= 0 else min(args.tokens_per_s, args.capacity / c)
    ttft_s = args.ttft_base_ms / 1000 + args.input_len / args.prefill_tokens_per_s
    closed_loop = c * args.output_len / (ttft_s + (args.output_len - 1) / per_stream)
    return {"per_stream_tokens_per_s": round(per_stream, 3), "decode_tokens_per_s": round(per_stream * c, 2),
            "closed_loop_output_tokens_per_s": round(closed_loop, 2), "ttft_ms_floor": round(ttft_s * 1000, 3)}


def ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else round(a / b, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer-venv", type=Path, default=Path("/tmp/peer-venv"))
    ap.add_argument("--install", action="store_true", help=f"create the peer venv and pip install {PEER}=={PEER_VERSION}")
    ap.add_argument("--levels", default="1,4,16,64", help="concurrency levels (default 1,4,16,64)")
    ap.add_argument("--peer-workers", type=int, default=2,
                    help="AIPerf --workers-max (default 2, this machine's cores; its own default gives one worker here)")
    ap.add_argument("--rounds", type=int, default=4, help="measured requests per level = rounds * C, at least 8")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--tokens-per-s", type=float, default=40.0)
    ap.add_argument("--capacity", type=float, default=1200.0)
    ap.add_argument("--ttft-base-ms", type=float, default=20.0)
    ap.add_argument("--prefill-tokens-per-s", type=float, default=50000.0)
    ap.add_argument("--keep", type=Path, help="keep the tools' outputs in this directory")
    args = ap.parse_args()

    if args.install:
        install_peer(args.peer_venv)
    if not (args.peer_venv / "bin" / "aiperf").exists():
        print(f"no AIPerf in {args.peer_venv}: python3 -m venv {args.peer_venv} && "
              f"{args.peer_venv}/bin/pip install {PEER}=={PEER_VERSION}  (or pass --install)", file=sys.stderr)
        return 2
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="compare-peers-"))
    work.mkdir(parents=True, exist_ok=True)

    tokenizer = work / "word-tokenizer"
    subprocess.run([str(args.peer_venv / "bin" / "python"), str(ROOT / "benchmarks" / "peers" / "make_word_tokenizer.py"),
                    str(tokenizer)], check=True, stdout=subprocess.DEVNULL)
    # AIPerf's local-path loading works only with Hub offline mode OFF (offline mode looks the path up
    # in the Hub cache); a local path never reaches the Hub either way.
    peer_env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    peer_env.pop("PYTHONPATH", None)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_standin(args, port)
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
            art = work / f"aiperf-c{c}"
            shutil.rmtree(art, ignore_errors=True)
            pc = peer_cmd(args.peer_venv, url, c, n, args, tokenizer, art)
            run(pc, work / f"aiperf-c{c}.log", env=peer_env)
            commands.append({"concurrency": c, "cockpit": " ".join(ck), "peer": " ".join(pc)})
            mine, theirs = parse_cockpit(ck_json), parse_peer(art, work / f"aiperf-c{c}.log")
            thin = asyncio.run(thin_level(port, c, n, args.input_len, args.output_len))
            ratios = {k: ratio(theirs[k], mine[k]) for k in ("output_tokens_per_s", "ttft_ms_mean", "ttft_ms_p50")}
            within = {k: v is not None and abs(v - 1) <= 0.05 for k, v in ratios.items()}
            t = dict(truth(args, c), ttft_ms_idle_probe=idle_ttft)
            rows.append({
                "concurrency": c, "requests": n, "truth": t, "cockpit": mine, "peer": theirs, "thin_client": thin,
                "ratio_peer_over_cockpit": ratios, "within_5pct": within,
                "cockpit_vs_truth": {"output_tokens_per_s": ratio(mine["output_tokens_per_s"],
                                                                  t["closed_loop_output_tokens_per_s"]),
                                     "ttft_ms_mean": ratio(mine["ttft_ms_mean"], idle_ttft["mean"])},
                "peer_vs_truth": {"output_tokens_per_s": ratio(theirs["output_tokens_per_s"],
                                                               t["closed_loop_output_tokens_per_s"]),
                                  "ttft_ms_mean": ratio(theirs["ttft_ms_mean"], idle_ttft["mean"])},
            })
            print(f"C={c}: cockpit {mine['output_tokens_per_s']:.1f} tok/s TTFT {mine['ttft_ms_mean']:.2f} ms | "
                  f"{PEER} {theirs['output_tokens_per_s']:.1f} tok/s TTFT {theirs['ttft_ms_mean']:.2f} ms", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    result = {
        "benchmark": "compare_peers",
        "peer": {"name": PEER, "version": peer_version(args.peer_venv), "venv": str(args.peer_venv)},
        "standin": {"tokens_per_s": args.tokens_per_s, "capacity": args.capacity, "ttft_base_ms": args.ttft_base_ms,
                    "prefill_tokens_per_s": args.prefill_tokens_per_s},
        "input_len": args.input_len, "output_len": args.output_len, "levels": rows, "commands": commands,
        "outputs": str(work),
        "agree_within_5pct": all(all(r["within_5pct"].values()) for r in rows),
        "agree_within_5pct_output_tokens_per_s": all(r["within_5pct"]["output_tokens_per_s"] for r in rows),
        "agree_within_5pct_ttft": all(r["within_5pct"]["ttft_ms_mean"] and r["within_5pct"]["ttft_ms_p50"] for r in rows),
    }
    print(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
