"""How much of real SGLang's start-up refusals the static layer (`check_static`) names, and whether
it ever calls an error where the release starts (a false error).

NOT PART OF CI: it needs a Python that really imports SGLang and resolves its arguments (the one
benchmarks/check_dry_run_sglang.py describes; /tmp/rs-venv/bin/python for 0.5.23 here). The flag
sets below are held-out style: other values and other combinations than the recorded cases the
unit tests read (tests/data/dryrun/0.5.23-rule-*.json), across many families, some with no static
rule at all (those count as real failures the static layer does not name).

Each flag set runs through the release's own `prepare_server_args`, `resolve_once` and
`check_server_args` (the dry run's PROBE, with `--device cuda` and a model directory holding a
minimal Llama config.json), all in one process so the import is paid once (about 2 s a set after
a 6 s import on a two-core machine), and through `check_static` with the release's catalog.

    .venv/bin/python benchmarks/eval_static_rules.py --python /tmp/rs-venv/bin/python [--version 0.5.23] [--out FILE]

Any command that runs SGLang's Python with the arguments given will do for --python: on this
machine a two-line script that mounts the real-SGLang lab image's cached rootfs read-only in a
mount namespace (this machine's /tmp bound inside, for the model directories) and chroots into
`/opt/sglang/venv/bin/python "$@"`.

Prints JSON: per family, the sets, real failures, those the static layer names with an error (and
with an INFO), false errors (a static error where the release passed: must be 0), and totals.
Exit 1 on any false error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import emit
from check_dry_run_sglang import model_dirs

from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.catalog.releases import sglang_source
from cockpit.sglang.preflight.architectures import MODEL_CONFIG, chunked_prefill_unsupported
from cockpit.sglang.preflight.model_checks import chunk_page_findings, context_findings
from cockpit.sglang.preflight.model_files import ModelFiles
from cockpit.sglang.preflight.preflight import ERROR, INFO, check_static, given_flags

RUNNER = """\
import contextlib, io, json, os, sys, traceback
sys.argv[0] = "launch_server"
from sglang.srt.server_args import prepare_server_args
for line in sys.stdin:
    case = json.loads(line)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            sa = prepare_server_args(case["argv"])
            sa.resolve_once()
            sa.check_server_args()
        out = {"name": case["name"], "real": "passed"}
    except BaseException as e:
        name = type(e).__name__ + (f"({e.code})" if isinstance(e, SystemExit) else "")
        tb = traceback.extract_tb(e.__traceback__)
        where = tb[-1].name if tb else ""
        out = {"name": case["name"], "real": name, "where": where, "message": str(e)[:200]}
    print(json.dumps(out), flush=True)
"""

M = ["--model-path", "{M}"]
D = "{D}"


def flag_sets() -> list[tuple[str, str, list[str]]]:
    """(family, name, flags after --model-path): a mix of breaking and valid sets."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", D]
    tree = ["--speculative-num-steps", "2", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "4"]
    return [
        ("baseline", "plain", []),
        ("baseline", "tp2", ["--tp-size", "2"]),
        ("argparse", "tp-not-int", ["--tp-size", "two"]),
        ("argparse", "bad-quantization", ["--quantization", "int3"]),
        ("served model name", "colon-version", ["--served-model-name", "llama:8b"]),
        ("served model name", "slash-ok", ["--served-model-name", "meta/llama-8b"]),
        ("served model name", "s3-uri-ok", ["--served-model-name", "s3://bucket/llama"]),
        ("multi-node", "tp3-nnodes2", ["--nnodes", "2", "--tp-size", "3"]),
        ("multi-node", "tp2-pp2-nnodes4-ok", ["--nnodes", "4", "--tp-size", "2", "--pp-size", "2"]),
        ("multi-node", "dp4-nnodes2", ["--nnodes", "2", "--tp-size", "4", "--dp-size", "4"]),
        ("dp attention", "attn-dp3-tp4", ["--tp-size", "4", "--attn-dp-size", "3"]),
        ("dp attention", "enable-dpa-tp8-dp3", ["--tp-size", "8", "--dp-size", "3", "--enable-dp-attention"]),
        ("dp attention", "enable-dpa-tp8-dp4-ok", ["--tp-size", "8", "--dp-size", "4", "--enable-dp-attention"]),
        ("dp attention", "attn-dp2-dp3", ["--tp-size", "2", "--attn-dp-size", "2", "--dp-size", "3"]),
        ("dp attention", "attn-dp-neg", ["--attn-dp-size", "-2"]),
        ("priority scheduling", "policy-random", ["--enable-priority-scheduling", "--schedule-policy", "random"]),
        ("priority scheduling", "retraction-priority", ["--retraction-policy", "priority", "--schedule-policy", "lof"]),
        ("priority scheduling", "fcfs-ok", ["--enable-priority-scheduling", "--retraction-policy", "priority"]),
        ("process layout", "tokenizer-workers-neg", ["--tokenizer-worker-num", "-1"]),
        ("process layout", "gpu-step-neg", ["--gpu-id-step", "-1"]),
        ("process layout", "moe-dense-tp3", ["--tp-size", "2", "--moe-dense-tp-size", "3"]),
        ("process layout", "moe-dense-eq-tp-ok", ["--tp-size", "2", "--moe-dense-tp-size", "2"]),
        ("lora", "per-batch-neg", ["--lora-paths", "x=/tmp/x", "--max-loras-per-batch", "-1"]),
        ("lora", "rank-without-modules", ["--enable-lora", "--max-lora-rank", "16"]),
        (
            "lora",
            "max-loaded-below",
            ["--lora-paths", "x=/tmp/x", "--max-loras-per-batch", "4", "--max-loaded-loras", "3"],
        ),
        (
            "lora",
            "four-paths-max3",
            ["--lora-paths", "a=/a", "b=/b", "c=/c", "d=/d", "--max-loaded-loras", "3", "--max-loras-per-batch", "3"],
        ),
        (
            "lora",
            "overlap-max32",
            ["--lora-paths", "x=/tmp/x", "--enable-lora-overlap-loading", "--max-loaded-loras", "32"],
        ),
        ("lora", "lora-eagle-ok", ["--lora-paths", "x=/tmp/x", *eagle, *tree]),
        (
            "lora",
            "lora-disabled-paths-ok",
            ["--lora-paths", "x=/tmp/x", "--max-loras-per-batch", "1", "--max-loaded-loras", "1"],
        ),
        ("speculative", "eagle-tree-ok", [*eagle, *tree]),
        (
            "speculative",
            "eagle-tree-page-flashmla",
            [*eagle, *tree, "--page-size", "64", "--attention-backend", "flashmla"],
        ),
        ("speculative", "eagle-tree-page-fa3-ok", [*eagle, *tree, "--page-size", "64", "--attention-backend", "fa3"]),
        ("speculative", "ngram-page-auto", ["--speculative-algorithm", "NGRAM", "--page-size", "32"]),
        (
            "speculative",
            "ngram-breadth1-page-ok",
            ["--speculative-algorithm", "NGRAM", "--page-size", "32", "--speculative-ngram-max-bfs-breadth", "1"],
        ),
        (
            "speculative",
            "ngram-dpa-enable",
            ["--speculative-algorithm", "NGRAM", "--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"],
        ),
        (
            "speculative",
            "standalone-dpa",
            [
                "--speculative-algorithm",
                "STANDALONE",
                "--speculative-draft-model-path",
                D,
                "--tp-size",
                "4",
                "--attn-dp-size",
                "4",
            ],
        ),
        (
            "speculative",
            "dflash-pp3",
            ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", D, "--pp-size", "3"],
        ),
        (
            "speculative",
            "dflash-no-draft-block",
            ["--speculative-algorithm", "dflash", "--speculative-dflash-block-size", "16"],
        ),
        (
            "speculative",
            "sink-window-ok",
            ["--speculative-draft-window-size", "128", "--speculative-draft-sink-size", "2"],
        ),
        ("speculative", "window-neg", ["--speculative-draft-window-size", "-4"]),
        ("speculative", "rejection-topk2", [*eagle, *tree, "--speculative-use-rejection-sampling"]),
        (
            "speculative",
            "block-verif-standalone",
            [
                "--speculative-algorithm",
                "STANDALONE",
                "--speculative-draft-model-path",
                D,
                "--speculative-use-block-verification",
            ],
        ),
        (
            "disaggregation",
            "decode-radix-standalone",
            [
                "--disaggregation-mode",
                "decode",
                "--disaggregation-decode-enable-radix-cache",
                "--speculative-algorithm",
                "STANDALONE",
                "--speculative-draft-model-path",
                D,
            ],
        ),
        ("disaggregation", "threshold-neg", ["--disaggregation-decode-host-receive-threshold", "-0.1"]),
        ("disaggregation", "prefill-ok", ["--disaggregation-mode", "prefill"]),
        (
            "kv cache",
            "dequant-nvfp4-with-fp8",
            ["--prefill-kv-cache-dequant-dtype", "nvfp4", "--kv-cache-dtype", "fp8_e4m3"],
        ),
        ("kv cache", "lmcache-both", ["--enable-lmcache", "--enable-hierarchical-cache", "--disable-radix-cache"]),
        ("kv cache", "mxfp8", ["--kv-cache-dtype", "mxfp8"]),
        ("kv cache", "fp8-ok", ["--kv-cache-dtype", "fp8_e5m2"]),
        ("kv cache", "swa-ratio-zero", ["--swa-full-tokens-ratio", "0"]),
        ("chunked prefill", "chunk-not-page-multiple", ["--chunked-prefill-size", "1000", "--page-size", "64"]),
        ("chunked prefill", "chunk-page-ok", ["--chunked-prefill-size", "1024", "--page-size", "64"]),
        (
            "pipeline",
            "pdmux-pp4",
            ["--enable-pdmux", "--pp-size", "4", "--chunked-prefill-size", "-1", "--disable-overlap-schedule"],
        ),
        ("pipeline", "pdmux-overlap", ["--enable-pdmux", "--chunked-prefill-size", "-1"]),
        ("pipeline", "pp-mbs-neg", ["--pp-max-micro-batch-size", "-3"]),
        (
            "cuda graph",
            "padding-compile",
            ["--disable-cuda-graph-padding", "--enable-torch-compile", "--torch-compile-max-bs", "8"],
        ),
        ("multimodal", "mm-limit-bad-modality", ["--limit-mm-data-per-request", '{"audio_x": 1}']),
    ]


def later_sets() -> list[tuple[str, str, list[str]]]:
    """A second held-out group, written on 2026-12-03 before the release-check layer
    (cockpit.sglang.preflight.release_checks) existed and before any of them was run: operator-style
    mistakes and valid sets across the families, none taken from a recorded outcome. `--group later`
    runs them alone."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", D]
    return [
        ("baseline", "later-tp4-ok", ["--tp-size", "4"]),
        ("baseline", "later-mem-0.9-ok", ["--mem-fraction-static", "0.9"]),
        ("dp attention", "later-attn-dp4-tp2", ["--tp-size", "2", "--attn-dp-size", "4"]),
        ("dp attention", "later-attn-dp-zero", ["--attn-dp-size", "0"]),
        ("dp attention", "later-attn-dp2-tp4-ok", ["--tp-size", "4", "--attn-dp-size", "2"]),
        ("dp attention", "later-dp2-attn-dp2", ["--tp-size", "4", "--dp-size", "2", "--attn-dp-size", "2"]),
        ("parallel", "later-dwdp3-tp4", ["--tp-size", "4", "--dwdp-size", "3"]),
        ("parallel", "later-dwdp2-tp2-ok", ["--tp-size", "2", "--dwdp-size", "2"]),
        ("kv cache", "later-swa-ratio-2", ["--swa-full-tokens-ratio", "2"]),
        ("kv cache", "later-swa-ratio-half-ok", ["--swa-full-tokens-ratio", "0.5"]),
        ("kv cache", "later-lmcache-no-radix", ["--enable-lmcache", "--disable-radix-cache"]),
        ("kv cache", "later-lmcache-hicache", ["--enable-lmcache", "--enable-hierarchical-cache"]),
        ("kv cache", "later-swa-tails-neg", ["--swa-prefix-tails", "-1"]),
        ("speculative", "later-eagle-topk-only", [*eagle, "--speculative-eagle-topk", "2"]),
        ("speculative", "later-eagle-steps-only-ok", [*eagle, "--speculative-num-steps", "3"]),
        ("speculative", "later-unknown-algo", ["--speculative-algorithm", "MEDUSA"]),
        (
            "speculative",
            "later-ngram-breadth0",
            ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "0"],
        ),
        (
            "disaggregation",
            "later-fake-prefill",
            ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "fake"],
        ),
        ("disaggregation", "later-decode-ok", ["--disaggregation-mode", "decode"]),
        ("process layout", "later-base-gpu-neg", ["--base-gpu-id", "-1"]),
        ("process layout", "later-gpu-step0", ["--gpu-id-step", "0"]),
        ("chunked prefill", "later-chunk-100-page-16", ["--chunked-prefill-size", "100", "--page-size", "16"]),
        ("logging", "later-log-level-loud", ["--log-level", "LOUD"]),
        ("context", "later-context-1m", ["--context-length", "1000000"]),
        ("context", "later-context-4k-ok", ["--context-length", "4096"]),
        ("multi-node", "later-nnodes3-tp4", ["--nnodes", "3", "--tp-size", "4"]),
    ]


def third_sets() -> list[tuple[str, str, list[str]]]:
    """A third held-out group, written on 2026-12-04 and committed before any of them was run and
    before the static layer's changes of that day, which were made from the first two groups'
    misses only: operator-style mistakes and valid sets across the families, none taken from a
    recorded outcome or from the other groups. `--group third` runs them alone."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", D]
    return [
        ("baseline", "third-tp8-ok", ["--tp-size", "8"]),
        ("memory", "third-mem-1.5", ["--mem-fraction-static", "1.5"]),
        ("memory", "third-max-total-neg", ["--max-total-tokens", "-5"]),
        ("speculative", "third-eagle-no-draft", ["--speculative-algorithm", "EAGLE3"]),
        (
            "speculative",
            "third-lower-eagle3",
            ["--speculative-algorithm", "eagle3", "--speculative-draft-model-path", D],
        ),
        (
            "speculative",
            "third-ngram-min-over-max",
            [
                "--speculative-algorithm",
                "NGRAM",
                "--speculative-ngram-min-bfs-breadth",
                "5",
                "--speculative-ngram-max-bfs-breadth",
                "2",
            ],
        ),
        ("speculative", "third-eagle-steps0", [*eagle, "--speculative-num-steps", "0"]),
        ("speculative", "third-eagle-ok", [*eagle]),
        ("dp attention", "third-dpa-dp8-tp4", ["--enable-dp-attention", "--tp-size", "4", "--dp-size", "8"]),
        ("dp attention", "third-dpa-tp2-dp2-ok", ["--enable-dp-attention", "--tp-size", "2", "--dp-size", "2"]),
        ("lora", "third-lora-per-batch0", ["--enable-lora", "--max-loras-per-batch", "0"]),
        ("lora", "third-lora-rank-neg", ["--lora-paths", "x=/tmp/x", "--max-lora-rank", "-8"]),
        ("kv cache", "third-page-size0", ["--page-size", "0"]),
        ("kv cache", "third-hicache-ratio-half", ["--enable-hierarchical-cache", "--hicache-ratio", "0.5"]),
        ("kv cache", "third-hicache-ratio3-ok", ["--enable-hierarchical-cache", "--hicache-ratio", "3"]),
        ("chunked prefill", "third-chunk-4096-page64-ok", ["--chunked-prefill-size", "4096", "--page-size", "64"]),
        ("chunked prefill", "third-chunk-1000-page-64", ["--chunked-prefill-size", "1000", "--page-size", "64"]),
        ("context", "third-context-zero", ["--context-length", "0"]),
        ("multi-node", "third-node-rank-2-of-2", ["--nnodes", "2", "--tp-size", "2", "--node-rank", "2"]),
        ("process layout", "third-tokenizer-workers0", ["--tokenizer-worker-num", "0"]),
        ("scheduling", "third-max-running0", ["--max-running-requests", "0"]),
        ("scheduling", "third-low-first-ok", ["--enable-priority-scheduling", "--schedule-low-priority-values-first"]),
        ("torch compile", "third-compile-bs0", ["--enable-torch-compile", "--torch-compile-max-bs", "0"]),
        ("logging", "third-http-level-loud", ["--log-level-http", "LOUD"]),
        ("argparse", "third-dtype-int8", ["--dtype", "int8"]),
        ("moe", "third-ep3-tp4", ["--tp-size", "4", "--ep-size", "3"]),
        ("moe", "third-ep2-tp2-ok", ["--tp-size", "2", "--ep-size", "2"]),
        ("server", "third-stream-interval0", ["--stream-interval", "0"]),
    ]


def fourth_sets() -> list[tuple[str, str, list[str]]]:
    """A fourth held-out group, written on 2026-12-04 (stop 41) and committed before any of them
    was run and before any change to the static layer made from the first three groups' misses
    (the model-dependent checks: chunked prefill, context length): operator-style mistakes and
    valid sets across the families, none taken from a recorded outcome. `--group fourth` runs them
    alone; it is the measure of whatever the static layer learns from the other three."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", D]
    return [
        ("baseline", "fourth-tp2-mem-0.8-ok", ["--tp-size", "2", "--mem-fraction-static", "0.8"]),
        ("chunked prefill", "fourth-chunk-2000-page-32", ["--chunked-prefill-size", "2000", "--page-size", "32"]),
        ("chunked prefill", "fourth-chunk-8192-page-128-ok", ["--chunked-prefill-size", "8192", "--page-size", "128"]),
        ("chunked prefill", "fourth-chunk-off-page-48-ok", ["--chunked-prefill-size", "-1", "--page-size", "48"]),
        ("context", "fourth-context-200k", ["--context-length", "200000"]),
        ("context", "fourth-context-neg", ["--context-length", "-1"]),
        ("context", "fourth-context-1k-ok", ["--context-length", "1024"]),
        ("kv cache", "fourth-page-size-neg", ["--page-size", "-16"]),
        ("kv cache", "fourth-hicache-ratio0", ["--enable-hierarchical-cache", "--hicache-ratio", "0"]),
        ("kv cache", "fourth-kv-int4", ["--kv-cache-dtype", "int4"]),
        ("speculative", "fourth-eagle-draft-tokens1", [*eagle, "--speculative-num-draft-tokens", "1"]),
        ("speculative", "fourth-eagle-topk0", [*eagle, "--speculative-eagle-topk", "0"]),
        ("speculative", "fourth-algo-eagle4", ["--speculative-algorithm", "EAGLE4"]),
        (
            "speculative",
            "fourth-ngram-window0",
            ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-trie-depth", "0"],
        ),
        ("speculative", "fourth-eagle-3-1-4-ok", [*eagle, *("--speculative-num-steps", "3")]),
        ("dp attention", "fourth-dpa-dp3-tp4", ["--enable-dp-attention", "--tp-size", "4", "--dp-size", "3"]),
        ("dp attention", "fourth-dpa-dp4-tp4-ok", ["--enable-dp-attention", "--tp-size", "4", "--dp-size", "4"]),
        ("lora", "fourth-lora-rank0", ["--enable-lora", "--max-lora-rank", "0"]),
        ("lora", "fourth-lora-backend-x", ["--enable-lora", "--lora-backend", "cutlass9"]),
        ("logging", "fourth-log-level-trace", ["--log-level", "trace"]),
        ("logging", "fourth-log-level-warning-ok", ["--log-level", "warning"]),
        ("multimodal", "fourth-mm-limit-not-json", ["--limit-mm-data-per-request", "image=2"]),
        ("pipeline", "fourth-pp2-pdmux", ["--pp-size", "2", "--enable-pdmux"]),
        ("moe", "fourth-ep4-tp2", ["--tp-size", "2", "--ep-size", "4"]),
        ("disaggregation", "fourth-mode-both", ["--disaggregation-mode", "both"]),
        ("process layout", "fourth-dp0", ["--dp-size", "0"]),
        ("process layout", "fourth-nnodes0", ["--nnodes", "0"]),
        ("memory", "fourth-mem-0", ["--mem-fraction-static", "0"]),
        ("scheduling", "fourth-schedule-policy-x", ["--schedule-policy", "fifo2"]),
        ("server", "fourth-port-70000", ["--port", "70000"]),
    ]


def fifth_sets() -> list[tuple[str, str, list[str]]]:
    """A fifth held-out group, written on 2026-12-04 (stop 42) after the changes made from the
    fourth group's misses (b79b976: the model's say on chunked prefill, --nnodes 0) and committed
    before any of them was run: operator-style mistakes and valid sets across the families, none
    taken from a recorded outcome. `--group fifth` runs them alone."""
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", D]
    tree = ["--speculative-num-steps", "5", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]
    standalone = ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", D]
    return [
        ("baseline", "fifth-tp4-ok", ["--tp-size", "4"]),
        ("baseline", "fifth-max-running-64-ok", ["--max-running-requests", "64"]),
        ("chunked prefill", "fifth-chunk-3000-page-64", ["--chunked-prefill-size", "3000", "--page-size", "64"]),
        (
            "chunked prefill",
            "fifth-chunk-4096-page-16-dpa2-ok",
            ["--enable-dp-attention", "--tp-size", "2", "--dp-size", "2", "--chunked-prefill-size", "4096"]
            + ["--page-size", "16"],
        ),
        ("context", "fifth-context-zero", ["--context-length", "0"]),
        ("context", "fifth-context-2049", ["--context-length", "2049"]),
        ("speculative", "fifth-eagle-5-4-8-ok", [*eagle, *tree]),
        ("speculative", "fifth-eagle-no-draft-path", ["--speculative-algorithm", "EAGLE3"]),
        (
            "speculative",
            "fifth-ngram-min-above-max",
            ["--speculative-algorithm", "NGRAM", "--speculative-ngram-min-match-window-size", "10"]
            + ["--speculative-ngram-max-match-window-size", "4"],
        ),
        ("speculative", "fifth-standalone-tree-page-16", [*standalone, *tree, "--page-size", "16"]),
        ("speculative", "fifth-algo-lowercase-ngram-ok", ["--speculative-algorithm", "ngram"]),
        ("dp attention", "fifth-dpa-dp2-tp3", ["--enable-dp-attention", "--tp-size", "3", "--dp-size", "2"]),
        ("dp attention", "fifth-attn-dp8-tp8-ok", ["--tp-size", "8", "--attn-dp-size", "8"]),
        ("lora", "fifth-lora-paths-ok", ["--lora-paths", "a=/tmp/a"]),
        (
            "lora",
            "fifth-lora-max-loaded-0",
            ["--enable-lora", "--max-loaded-loras", "0", "--lora-target-modules", "all"],
        ),
        ("lora", "fifth-lora-target-x", ["--enable-lora", "--lora-target-modules", "q_projx"]),
        ("kv cache", "fifth-kv-fp8-e5m2-ok", ["--kv-cache-dtype", "fp8_e5m2"]),
        ("kv cache", "fifth-hicache-size-neg", ["--enable-hierarchical-cache", "--hicache-size", "-1"]),
        ("kv cache", "fifth-swa-ratio-neg", ["--swa-full-tokens-ratio", "-0.5"]),
        ("memory", "fifth-mem-1.5", ["--mem-fraction-static", "1.5"]),
        ("memory", "fifth-max-total-tokens-0", ["--max-total-tokens", "0"]),
        ("multimodal", "fifth-mm-limit-image-ok", ["--limit-mm-data-per-request", '{"image": 4}']),
        ("pipeline", "fifth-pp3-nnodes2", ["--pp-size", "3", "--nnodes", "2"]),
        ("pipeline", "fifth-pp2-ok", ["--pp-size", "2"]),
        ("moe", "fifth-ep3-tp4", ["--tp-size", "4", "--ep-size", "3"]),
        ("moe", "fifth-moe-a2a-x", ["--moe-a2a-backend", "nccl9"]),
        ("disaggregation", "fifth-decode-ok", ["--disaggregation-mode", "decode"]),
        (
            "disaggregation",
            "fifth-transfer-x",
            ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "ucx9"],
        ),
        ("process layout", "fifth-nnodes-neg", ["--nnodes", "-1"]),
        ("process layout", "fifth-node-rank-2-of-2", ["--nnodes", "2", "--node-rank", "2"]),
        ("scheduling", "fifth-conservativeness-neg", ["--schedule-conservativeness", "-1"]),
        ("scheduling", "fifth-priority-lpm", ["--enable-priority-scheduling", "--schedule-policy", "lpm"]),
        ("server", "fifth-port-0", ["--port", "0"]),
        ("server", "fifth-served-name-colon", ["--served-model-name", "qwen:7b"]),
        ("logging", "fifth-log-level-http-x", ["--log-level-http", "verbose"]),
        ("cuda graph", "fifth-cuda-graph-max-bs-0", ["--cuda-graph-max-bs", "0"]),
        ("cuda graph", "fifth-compile-bs-neg", ["--enable-torch-compile", "--torch-compile-max-bs", "-1"]),
    ]


GROUPS = {
    "first": flag_sets,
    "later": later_sets,
    "third": third_sets,
    "fourth": fourth_sets,
    "fifth": fifth_sets,
}


def dry_run_says(python: str, argv: list[str], catalog, work: Path) -> str:
    """The cockpit's dry run of one set on this machine, as the release's own outcome is written:
    "passed", or the exception it names ("AssertionError", "SystemExit(2)")."""
    import asyncio

    from cockpit.remote.local import LocalHost
    from cockpit.sglang.preflight.preflight import dry_run

    outcome, findings = asyncio.run(dry_run(LocalHost(), python, argv, catalog))
    if outcome != "failed":
        return outcome
    return next((f.would_raise or "?" for f in findings if f.severity == ERROR), "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="a Python that imports SGLang")
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--group",
        choices=(*GROUPS, "all"),
        default="all",
        help="which held-out sets: the first group (written with the hand rules), the later one "
        "(written before the release-check layer), the third (written before the changes of "
        "2026-12-04, which read only the first two groups' misses), the fourth (written in stop 41 before "
        "any change made from the first three), the fifth (written in stop 42 after the changes made from "
        "the fourth's misses, before it ran), or all",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="also run each set through the cockpit's own dry run (its probe, in a process of its own, "
        "about 7 s a set) and compare its verdict and exception with the release's",
    )
    args = parser.parse_args()
    catalog = load_catalog(sglang_source(args.version, progress=lambda m: print(m, file=sys.stderr)))
    work = Path(tempfile.mkdtemp(prefix="cockpit-eval-rules-"))
    try:
        model, draft = model_dirs(work)
        sets = [s for group, made in GROUPS.items() if args.group in (group, "all") for s in made()]

        def place(words: list[str]) -> list[str]:
            return [w.replace("{M}", str(model)).replace("{D}", str(draft)) for w in words]

        lines = "".join(
            json.dumps({"name": name, "argv": place([*M, *flags, "--device", "cuda"])}) + "\n"
            for _, name, flags in sets
        )
        proc = subprocess.run(
            [args.python, "-c", RUNNER],
            input=lines,
            capture_output=True,
            text=True,
            timeout=1200,
            env={"SGLANG_CACHE_DIR": str(work / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(work)},
        )
        real = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines()) if r.get("name")}
        if len(real) != len(sets):
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        rows = []
        families: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        files = ModelFiles(str(model), json.loads((model / "config.json").read_text()))
        unsupported = chunked_prefill_unsupported((sglang_source(args.version) / MODEL_CONFIG).read_text())
        group_of = {name: group for group, made in GROUPS.items() for _, name, _ in made()}
        groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for family, name, flags in sets:
            argv = place([*M, *flags])
            alone = check_static(argv, catalog)
            # What the cockpit says before a start without SGLang: the flags, and the model's config.json.
            given = given_flags(argv, catalog)
            findings = alone + context_findings(files, given, {}, args.version)
            findings += chunk_page_findings(files, given, args.version, unsupported)
            errors = [f for f in findings if f.severity == ERROR]
            infos = [f for f in findings if f.severity == INFO]
            outcome = real[name]["real"]
            fam = families[family]
            fam["sets"] += 1
            if outcome == "passed":
                fam["false_errors"] += bool(errors)
            else:
                fam["real_failures"] += 1
                fam["named_error"] += bool(errors)
                fam["named_error_flags_alone"] += any(f.severity == ERROR for f in alone)
                groups[group_of[name]]["real_failures"] += 1
                groups[group_of[name]]["named_error"] += bool(errors)
                fam["named_info_only"] += bool(infos and not errors)
                fam["exception_agrees"] += bool(errors and errors[0].would_raise == outcome)
            row = {
                "family": family,
                "name": name,
                "real": outcome,
                "where": real[name].get("where"),
                "static_errors": [f.rule for f in errors],
                "static_info": [f.rule for f in infos],
            }
            if args.dry_run:
                said = dry_run_says(args.python, place([*M, *flags]), catalog, work)
                row["dry_run"] = said
                fam["dry_run_agrees"] += said == outcome
            rows.append(row)
        total = {
            key: sum(f[key] for f in families.values())
            for key in (
                "sets",
                "real_failures",
                "named_error",
                "named_error_flags_alone",
                "named_info_only",
                "exception_agrees",
                "false_errors",
                *(("dry_run_agrees",) if args.dry_run else ()),
            )
        }
        report = {
            "sglang": args.version,
            "total": total,
            "groups": {
                k: {**v, "share": round(v["named_error"] / v["real_failures"], 3) if v["real_failures"] else None}
                for k, v in groups.items()
            },
            "families": {k: dict(v) for k, v in families.items()},
            "sets": rows,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    emit(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if total["false_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
