"""Journal parse plus traceback folding on a generated 1,000,000-entry journal, as each front
end does it.

Two formats: journald's full field set (`journalctl -o json --all`, the fields of a real
stdout entry of the lab's unit) and the reduced set the cockpit's follower asks for with
`--output-fields` (journalctl adds the cursor, timestamps and boot ID). The journal is SGLang
shaped: prefill/decode lines of eight ranks, uvicorn access lines, warnings, progress bars as
byte arrays, a few 20,000 to 100,000-character lines, systemd's restart messages, and
crashes: eight ranks with their own PIDs interleaving line by line, eight ranks sharing one
PID (each traceback written whole), chained tracebacks. A third, `serving`, is the reduced
set of what the server logs between start-ups and crashes (decode, prefill and access lines):
a flood's lines, which the follower decodes a block at a time.

Each format is generated to a temporary file, then read by each front end, nothing pinned (CPU
time is what is compared; the wall figures are this machine's at that moment):
- `app`: a fresh process folds it as the app's journal feed does (`JournalFeed.deliver` of
  each block the follower would read: at most 256 KiB, cut after its last newline, parsed by
  `parse_json_block`), keeping its window of the newest 200,000 records: entries/s in CPU
  seconds (reading the file excluded), the parse and fold shares, the collector's passes, the
  wall-clock rate with reading, and its peak RSS (the window's, not the million's). The same
  blocks are parsed line by line too (`parse_by_lines_entries_per_s`, the follower before it
  decoded a block whole): this journal's progress bars and restarts send many blocks that way.
- `cli`: `cockpit fold FILE` as a user runs it, and `| head -5`, which streams (prints and
  drops what is settled): wall seconds and peak RSS.

Pasted text (issue 27): the same journal as `journalctl -o short-precise` prints it, and the
export, both through `feed_lines` (what `cockpit fold` runs): CPU microseconds a line each and
their ratio (the target: text at most 2x the export), and the export's cost with the prefix layer
against the JSON-only path it replaced (parse_json_lines + feed_batch).

Usage: python benchmarks/bench_fold.py [--entries N] [--format full|reduced|serving|both|text]
(`both`: full, reduced and serving)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

BATCH = 10_000
UNIT = "sglang-demo.service"
MAIN_PID = 4100
BOOT = "023639b5c0ab4725982eb41832591f0b"
MACHINE = "9d63c9289fc948ae91eeef697701170e"
CMDLINE = (
    "/opt/sglang/venv/bin/python -m sglang.launch_server --model-path /models/Llama-3.1-8B-Instruct "
    "--served-model-name llama-3.1-8b-instruct --tp-size 8 --mem-fraction-static 0.85 "
    "--host 127.0.0.1 --port 30000"
)
SITE = "/opt/sglang/venv/lib/python3.11/site-packages"
TRACEBACK = f"""Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2876, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "{SITE}/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/sglang/srt/managers/scheduler.py", line 1005, in event_loop_overlap
    batch_result = self.run_batch(batch)
                   ^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2083, in run_batch
    batch_result = self.model_worker.forward_batch_generation(model_worker_batch)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/sglang/srt/speculative/eagle_worker.py", line 288, in forward_batch_generation
    self.verify(batch, spec_info)
  File "{SITE}/sglang/srt/speculative/eagle_worker.py", line 702, in verify
    assert spec_info.draft_token_num == self.speculative_num_draft_tokens
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError
""".splitlines()
CHAINED = f"""Traceback (most recent call last):
  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 1902, in forward
    return self.forward_decode(forward_batch)
  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 1791, in forward_decode
    return self.model.forward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. \
GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is free.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2876, in run_scheduler_process
    scheduler.event_loop_overlap()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
""".splitlines()


def full_fields(message: object, pid: int, i: int, t: int, invocation: str) -> dict:
    """The field set journald gives a line a service wrote to stdout."""
    return {
        "_BOOT_ID": BOOT,
        "__REALTIME_TIMESTAMP": str(t),
        "_MACHINE_ID": MACHINE,
        "_UID": "0",
        "SYSLOG_FACILITY": "3",
        "__MONOTONIC_TIMESTAMP": str(t - 1796030000000000),
        "_TRANSPORT": "stdout",
        "_EXE": "/opt/sglang/venv/bin/python3.11",
        "_CAP_EFFECTIVE": "1ffffffffff",
        "_SYSTEMD_CGROUP": f"/system.slice/{UNIT}",
        "_SYSTEMD_SLICE": "system.slice",
        "__CURSOR": cursor(i, t),
        "_PID": str(pid),
        "_SYSTEMD_INVOCATION_ID": invocation,
        "SYSLOG_IDENTIFIER": "python",
        "_SYSTEMD_UNIT": UNIT,
        "_RUNTIME_SCOPE": "system",
        "_COMM": "python",
        "_STREAM_ID": "2db5542774214cac84fbd4bcf2a68260",
        "MESSAGE": message,
        "PRIORITY": "6",
        "_GID": "0",
        "_CMDLINE": CMDLINE,
        "_HOSTNAME": "gpu-node-17",
    }


def systemd_fields(message: str, i: int, t: int, invocation: str) -> dict:
    """PID 1 about the unit (the restart messages)."""
    return {
        "__CURSOR": cursor(i, t),
        "__REALTIME_TIMESTAMP": str(t),
        "__MONOTONIC_TIMESTAMP": str(t - 1796030000000000),
        "_BOOT_ID": BOOT,
        "MESSAGE": message,
        "_PID": "1",
        "PRIORITY": "6",
        "UNIT": UNIT,
        "INVOCATION_ID": invocation,
        "_SYSTEMD_UNIT": "init.scope",
        "SYSLOG_IDENTIFIER": "systemd",
        "_TRANSPORT": "journal",
        "_HOSTNAME": "gpu-node-17",
        "_MACHINE_ID": MACHINE,
        "_UID": "0",
        "_GID": "0",
        "_COMM": "systemd",
        "_EXE": "/usr/lib/systemd/systemd",
        "_CMDLINE": "/sbin/init",
        "TID": "1",
        "CODE_FILE": "src/core/unit.c",
        "CODE_LINE": "5825",
        "CODE_FUNC": "unit_log_failure",
        "SYSLOG_FACILITY": "3",
        "_SYSTEMD_CGROUP": "/init.scope",
        "_SYSTEMD_SLICE": "-.slice",
    }


REDUCED = {
    "__CURSOR",
    "__REALTIME_TIMESTAMP",
    "__MONOTONIC_TIMESTAMP",
    "_BOOT_ID",
    "MESSAGE",
    "_PID",
    "PRIORITY",
    "_SYSTEMD_INVOCATION_ID",
    "INVOCATION_ID",
    "_SYSTEMD_UNIT",
    "UNIT",
    "SYSLOG_IDENTIFIER",
}


def cursor(i: int, t: int) -> str:
    return (
        f"s=792f500fc10f4056bea50b49be1e0811;i={i:x};b={BOOT};m={t - 1796030000000000:x};t={t:x};"
        f"x={i * 2654435761 % 2**64:x}"
    )


def stamp(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t // 1_000_000))


def journal(n: int, seed: int = 7, serving: bool = False):
    """(message, pid, is_systemd) for n entries; what an eight-rank SGLang server logs, or with
    `serving` what it logs between crashes and start-ups: decode, prefill and access lines."""
    rng = random.Random(seed)
    out = 0
    restart = 0
    while out < n:
        pid = MAIN_PID + restart * 100
        r = rng.random()
        if serving and (r < 0.00025 or r >= 0.985):
            continue
        if r < 0.00015:  # eight ranks with their own PIDs crash at once, lines interleaved
            blocks = [
                [f"[{{stamp}} TP{k}] Scheduler hit an exception: {TRACEBACK[0]}", *TRACEBACK[1:], ""] for k in range(8)
            ]
            for row in itertools.zip_longest(*blocks):
                for k, text in enumerate(row):
                    if text is not None:
                        yield text, pid + 1 + k, False
                        out += 1
            for text in (
                f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
                f"{UNIT}: Failed with result 'exit-code'.",
                f"{UNIT}: Scheduled restart job, restart counter is at {restart + 1}.",
            ):
                yield text, 1, True
                out += 1
            restart += 1
        elif r < 0.00025:  # ranks sharing the main PID, each traceback written whole
            for k in range(8):
                first, *rest = CHAINED if k % 2 else TRACEBACK
                for text in (f"[{{stamp}} TP{k}] Scheduler hit an exception: {first}", *rest, ""):
                    yield text, pid, False
                    out += 1
        elif r < 0.45:
            rank = rng.randrange(8)
            yield (
                (
                    f"[{{stamp}} TP{rank}] Decode batch, #running-req: {rng.randrange(1, 64)}, #token: "
                    f"{rng.randrange(1000, 90000)}, token usage: 0.{rng.randrange(10, 99)}, accept len: 3.40, "
                    f"accept rate: 0.34, cuda graph: True, gen throughput (token/s): {rng.uniform(900, 5000):.2f}, "
                    f"#queue-req: {rng.randrange(0, 9)}"
                ),
                pid,
                False,
            )
            out += 1
        elif r < 0.6:
            rank = rng.randrange(8)
            yield (
                (
                    f"[{{stamp}} TP{rank}] Prefill batch, #new-seq: 2, #new-token: 4096, #cached-token: 512, "
                    f"token usage: 0.13, #running-req: 31, #queue-req: 3, #pending-token: 0, cuda graph: False, "
                    f"input throughput (token/s): {rng.uniform(4000, 9000):.2f}"
                ),
                pid,
                False,
            )
            out += 1
        elif r < 0.985:
            yield (
                (f'INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
                pid,
                False,
            )
            out += 1
        elif r < 0.997:
            yield (
                (
                    "/opt/sglang/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:61: FutureWarning: "
                    "The pynvml package is deprecated."
                ),
                pid,
                False,
            )
            yield "  import pynvml  # type: ignore[import]", pid, False
            out += 2
        elif r < 0.9999:
            bar = "".join(
                f"Loading safetensors checkpoint shards: {p}% Completed | {p // 10}/10\r" for p in range(0, 101, 10)
            )
            yield list(bar.encode()), pid, False
            out += 1
        else:
            yield f"[{{stamp}}] Request: {'x' * rng.randrange(20_000, 100_000)}", pid, False
            out += 1


def generate(path: Path, n: int, fmt: str) -> dict:
    invocation = "a22a3779f22044fc84296a35556e7cf7"
    t = 1796031916702664
    counts = {"entries": 0, "bytes": 0}
    with open(path, "wb") as f:
        for i, (message, pid, systemd) in enumerate(itertools.islice(journal(n, serving=fmt == "serving"), n)):
            t += 137
            if isinstance(message, str) and "{stamp}" in message:
                message = message.replace("{stamp}", stamp(t), 1)
            if systemd:
                fields = systemd_fields(message, i, t, invocation)
                if message.endswith("."):  # a restart: a new invocation
                    invocation = f"{i:032x}"
            else:
                fields = full_fields(message, pid, i, t, invocation)
            if fmt in ("reduced", "serving"):
                fields = {k: v for k, v in fields.items() if k in REDUCED}
            line = msgspec.json.encode(fields) + b"\n"
            f.write(line)
            counts["entries"] += 1
            counts["bytes"] += len(line)
    return counts


def blocks_of(path: str, size: int) -> Iterator[bytes]:
    """The file as the follower reads a stream: reads of at most `size`, each cut after its last
    newline (`complete_block`), the unfinished line carried to the next."""
    from cockpit.textlines import complete_block

    rest = b""
    with open(path, "rb") as f:
        while data := f.read(size):
            block, rest = complete_block(rest, data)
            if block:
                yield block
    if rest:
        yield rest


def fold_file(path: str) -> dict:
    """Runs in its own process: read, parse, fold as the app does; the measurements. The app
    folds each batch into its journal feed's rows (`JournalFeed.deliver`), which keep a window
    of WINDOW records and drop the oldest: so does this, and its RSS is the app's journal's."""
    import gc

    from cockpit.remote.base import CHUNK
    from cockpit.session.journal_feed import WINDOW, JournalFeed
    from cockpit.systemd.entry import parse_json_block, parse_json_lines
    from cockpit.traceback import Traceback

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    feed = JournalFeed(None, UNIT)
    folder = feed.rows.folder
    parse_s = fold_s = lines_s = 0.0
    entries = 0
    clock = time.process_time  # CPU seconds: on a shared machine, time spent waiting is not ours
    gc_s = [0.0, 0.0]  # passes outside the timed parse and fold, start of the pass under way
    timing = [False]

    def count_gc(phase: str, info: dict) -> None:
        """Parse and fold pause the collector, so its passes run when a batch is done: those
        that fall outside the timed sections are added to the cost here."""
        if timing[0]:
            return
        if phase == "start":
            gc_s[1] = clock()
        else:
            gc_s[0] += clock() - gc_s[1]

    gc.callbacks.append(count_gc)
    wall = time.perf_counter()
    for block in blocks_of(path, CHUNK):
        timing[0] = True
        t0 = clock()
        batch = parse_json_block(block)
        t1 = clock()
        feed.deliver(batch)
        t2 = clock()
        parse_json_lines(block.split(b"\n"))  # the same lines read one by one, as before blocks
        t3 = clock()
        timing[0] = False
        parse_s += t1 - t0
        fold_s += t2 - t1
        lines_s += t3 - t2
        entries += len(batch)
    timing[0] = True
    t0 = clock()
    folder.close()
    tracebacks = [r for r in folder.records if isinstance(r, Traceback)]
    exceptions = sorted({tb.exception or "?" for tb in tracebacks})  # reading each block is part of folding
    fold_s += clock() - t0
    wall = time.perf_counter() - wall
    gc.callbacks.remove(count_gc)
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "entries": entries,
        "window": WINDOW,
        "records_held": len(folder.records),
        "records_dropped": feed.rows.discarded,
        "tracebacks": len(tracebacks),
        "incomplete_tracebacks": sum(not tb.complete for tb in tracebacks),
        "exceptions": exceptions,
        "parse_s": round(parse_s, 3),
        "fold_s": round(fold_s, 3),
        "gc_s": round(gc_s[0], 3),
        "entries_per_s": round(entries / (parse_s + fold_s + gc_s[0])),
        "parse_entries_per_s": round(entries / parse_s),
        "parse_by_lines_entries_per_s": round(entries / lines_s),
        "parse_measures": "parse_json_block of each block read (a block of ordinary lines decoded whole, any "
        "other block line by line); parse_by_lines: parse_json_lines of the same blocks' lines",
        "fold_entries_per_s": round(entries / fold_s),
        "entries_per_s_with_reading": round(entries / wall),
        "peak_rss_mb": round(rss_peak / 1024, 1),
        "rss_growth_mb": round((rss_peak - rss_before) / 1024, 1),
        "gc_enabled": gc.isenabled(),
    }


def as_journalctl_text(src: Path, dst: Path) -> None:
    """The export as `journalctl -o short-precise` prints it: the further lines of a multi-line
    message indented by the prefix's width, a byte array as its text."""
    with open(src, "rb") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            d = msgspec.json.decode(line)
            m = d.get("MESSAGE") or ""
            text = bytes(m).decode("utf-8", "replace") if isinstance(m, list) else m
            us = int(d["__REALTIME_TIMESTAMP"])
            stamp = time.strftime("%b %d %H:%M:%S", time.gmtime(us // 1_000_000)) + f".{us % 1_000_000:06d}"
            ident = d.get("SYSLOG_IDENTIFIER") or "python3"
            prefix = f"{stamp} gpu-node-0 {ident}[{d.get('_PID', '1')}]: "
            first, *more = text.replace("\r", "\n").split("\n")
            out.write(prefix + first + "\n")
            out.writelines(" " * len(prefix) + rest + "\n" for rest in more)


def feed_lines_file(path: str) -> dict:
    """Runs in its own process: `feed_lines` over the file in batches, CPU seconds a line."""
    from cockpit.traceback import Folder
    from cockpit.traceback.fold import feed_lines
    from cockpit.traceback.prefixes import PrefixReader

    folder, reader, lines_read = Folder(), PrefixReader(), 0
    spent = 0.0
    with open(path, "rb") as f:
        while batch := list(itertools.islice(f, BATCH)):
            batch = [line.rstrip(b"\n") for line in batch]
            t0 = time.process_time()
            feed_lines(folder, batch, reader=reader)
            folder.release(1000)
            done = folder.settled()
            folder.discard(done)  # as `cockpit fold` streams: memory is not what is measured here
            spent += time.process_time() - t0
            lines_read += len(batch)
    return {"lines": lines_read, "cpu_s": round(spent, 3), "us_per_line": round(spent / lines_read * 1e6, 2)}


def text_vs_export(entries: int, rounds: int = 3) -> dict:
    """The same entries as an export and as `journalctl -o short-precise` text, each folded by a
    process of its own, alternating (which goes first turns each round), `rounds` times: the
    ratio of their CPU time each round (the same entries, so per line), and its median."""
    with tempfile.TemporaryDirectory(prefix="bench-fold-text-") as tmp:
        export, text = Path(tmp) / "export.json", Path(tmp) / "short-precise.txt"
        generate(export, entries, "full")
        as_journalctl_text(export, text)
        runs: list[dict] = []
        for k in range(rounds):
            run = {}
            pair = [("export", export), ("text", text)]
            for name, path in pair if k % 2 == 0 else pair[::-1]:
                argv = [sys.executable, __file__, "--lines-file", str(path)]
                out = subprocess.run(argv, capture_output=True, text=True, check=True)
                run[name] = json.loads(out.stdout)
            run["text_over_export"] = round(run["text"]["cpu_s"] / run["export"]["cpu_s"], 2)
            runs.append(run)
        out = subprocess.run(
            [sys.executable, __file__, "--fold-file", str(export)], capture_output=True, text=True, check=True
        )
        json_only = json.loads(out.stdout)
    ratios = [r["text_over_export"] for r in runs]
    return {
        "rounds": runs,
        "export_json_only_path_us_per_entry": round(1e6 / json_only["entries_per_s"], 2),
        "text_over_export": statistics.median(ratios),
        "text_over_export_spread": [min(ratios), max(ratios)],
        "meets_target": statistics.median(ratios) <= 2.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--format", choices=["full", "reduced", "serving", "both", "text"], default="both")
    ap.add_argument("--fold-file", help=argparse.SUPPRESS)
    ap.add_argument("--lines-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fold_file:
        print(json.dumps(fold_file(args.fold_file)))
        return 0
    if args.lines_file:
        print(json.dumps(feed_lines_file(args.lines_file)))
        return 0
    if args.format == "text":
        print(json.dumps({"benchmark": "fold-text", "entries": args.entries, **text_vs_export(args.entries)}, indent=2))
        return 0
    results = {
        "benchmark": "fold",
        "cpu": os.uname().machine,
        "python": sys.version.split()[0],
        "target_entries_per_s": 200_000,
        "formats": {},
    }
    formats = ["full", "reduced", "serving"] if args.format == "both" else [args.format]
    with tempfile.TemporaryDirectory(prefix="bench-fold-") as tmp:
        for fmt in formats:
            path = Path(tmp) / f"{fmt}.json"
            t0 = time.perf_counter()
            made = generate(path, args.entries, fmt)
            gen_s = time.perf_counter() - t0
            out = subprocess.run(
                [sys.executable, __file__, "--fold-file", str(path)], capture_output=True, text=True, check=True
            )
            app = json.loads(out.stdout)
            app["meets_target"] = app["entries_per_s"] >= 200_000
            results["formats"][fmt] = {
                "bytes_per_entry": round(made["bytes"] / made["entries"]),
                "generate_s": round(gen_s, 1),
                "app": app,
                "cli": {"all": cli_run(path, ""), "head_5": cli_run(path, " | head -5")},
            }
            path.unlink()
    print(json.dumps(results, indent=2))
    return 0


def cli_run(path: Path, pipe: str) -> dict:
    """`cockpit fold FILE` as a user runs it, in a child of a fresh process so that its peak RSS
    is its own: it streams, so memory stays bounded by the longest open traceback (it was
    828 MB for 2M lines, and the same with `| head -5`)."""
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1], shell=True, stdout=subprocess.DEVNULL); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    command = f"{sys.executable} -m cockpit fold {path}{pipe}"
    out = subprocess.run(
        [sys.executable, "-c", probe, command], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    return {"seconds": round(float(out[0]), 2), "peak_rss_mb": round(int(out[1]) / 1024, 1)}


if __name__ == "__main__":
    sys.exit(main())
