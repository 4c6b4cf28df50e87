"""SGLang log lines -> events, on lines printed by SGLang's own code and its source's templates."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cockpit.sglang.server.logparse import (
    DecodeStats,
    ErrorMarker,
    LogPrefix,
    Milestone,
    PrefillStats,
    Ready,
    parse,
    split_prefix,
)
from tests.conftest import FIXTURES

LOGS = FIXTURES / "sglang" / "logs"


def events(path: Path) -> list:
    return [e for line in path.read_text().splitlines() if (e := parse(line)) is not None]


def test_scheduler_lines_of_0_5_23() -> None:
    got = events(LOGS / "scheduler-lines-0.5.23.log")
    assert [type(e) for e in got] == [DecodeStats, PrefillStats] * 3
    plain, spec, tp = got[0], got[2], got[4]
    assert (plain.stamp, plain.rank, plain.running_req, plain.queue_req, plain.tokens, plain.token_usage) == (
        "2026-11-30 06:23:34",
        "",
        32,
        3,
        18234,
        0.13,
    )
    assert (plain.gen_throughput, plain.accept_len, plain.accept_rate, plain.graph) == (2559.97, None, None, True)
    assert (spec.gen_throughput, spec.accept_len, spec.accept_rate) == (3468.94, 2.71, 0.57)
    assert (tp.stamp, tp.rank, tp.gen_throughput, tp.accept_len, tp.accept_rate) == (
        "2026-11-30 06:23:49",
        "TP0",
        4351.94,
        3.40,
        0.34,
    )
    prefill = got[1]
    assert (prefill.new_seq, prefill.new_token, prefill.cached_token, prefill.running_req, prefill.queue_req) == (
        2,
        4096,
        512,
        31,
        3,
    )
    assert (prefill.token_usage, prefill.input_throughput, prefill.graph) == (0.13, 8191.69, False)
    assert prefill.fields["#pending-token"] == "0"
    assert got[5].input_throughput == 8191.55 and got[5].rank == "TP0"


def test_startup_and_error_lines() -> None:
    got = events(LOGS / "startup-and-error-lines.template.log")
    assert [(type(e).__name__, getattr(e, "kind", None)) for e in got] == [
        ("Milestone", "load_weight_begin"),
        ("Milestone", "load_weight_end"),
        ("Milestone", "memory_pool_end"),
        ("Milestone", "graph_capture_begin"),
        ("Milestone", "graph_capture_end"),
        ("Milestone", "max_total_num_tokens"),
        ("Ready", None),
        ("ErrorMarker", "health_check_failed"),
        ("ErrorMarker", "scheduler_exception"),
        ("ErrorMarker", "sigquit"),
        ("ErrorMarker", "initialization_failed"),
        ("DecodeStats", None),
        ("PrefillStats", None),
        ("DecodeStats", None),
    ]
    begin, end, pool, cap_begin, cap_end, sizes = got[:6]
    assert begin.number("avail mem") == 78.52 and begin.rank == "TP0"
    assert end.values == {
        "elapsed": "12.34 s",
        "type": "LlamaForCausalLM",
        "avail mem": "63.10 GB",
        "mem usage": "15.42 GB",
    }
    assert end.number("elapsed") == 12.34 and pool.number("avail mem") == 9.87
    assert cap_begin.values["graph"] == "target verify CUDA graph" and cap_begin.number("num_tokens_per_req") == 4
    assert cap_end.values["bs"] == "[1, 2, 4, 8, 16, 24, 32, 40, 48]" and cap_end.number("elapsed") == 8.21
    assert sizes.number("max_total_num_tokens") == 412345 and sizes.number("max_running_requests") == 48
    assert sizes.number("available_gpu_mem") == 9.09
    assert got[6] == Ready("2026-11-30 06:24:06", "")
    assert got[8].rank == "TP0" and got[8].message == "Scheduler hit an exception: Traceback (most recent call last):"
    assert got[10].message.startswith("Initialization failed. warmup error:")


def test_the_0_4_forms_with_a_period() -> None:
    got = events(LOGS / "startup-and-error-lines.template.log")
    old_decode, old_prefill = got[11], got[12]
    assert (old_decode.running_req, old_decode.tokens, old_decode.gen_throughput, old_decode.queue_req) == (
        32,
        18234,
        3468.94,
        3,
    )
    assert (old_decode.accept_len, old_decode.accept_rate) == (2.71, None)
    assert (old_prefill.new_seq, old_prefill.new_token, old_prefill.cached_token, old_prefill.queue_req) == (
        2,
        4096,
        512,
        3,
    )
    assert (old_prefill.input_throughput, old_prefill.graph) == (None, None)


@pytest.mark.parametrize(
    "prefix, stamp, rank",
    [
        ("[2026-11-30 06:23:49]", "2026-11-30 06:23:49", ""),
        ("[2026-11-30 06:23:49 TP7]", "2026-11-30 06:23:49", "TP7"),
        ("[2026-11-30 06:23:49 DP1 PP0 TP3 EP3]", "2026-11-30 06:23:49", "DP1 PP0 TP3 EP3"),
        ("[2026-11-30 06:23:49 DP0 ATTN_CP1 MOE_DP2 TP5]", "2026-11-30 06:23:49", "DP0 ATTN_CP1 MOE_DP2 TP5"),
        ("[2026-11-30 06:23:49.123 TP0]", "2026-11-30 06:23:49.123", "TP0"),  # SGLANG_LOG_MS
    ],
)
def test_rank_prefixes(prefix: str, stamp: str, rank: str) -> None:
    event = parse(
        f"{prefix} Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: True, "
        "gen throughput (token/s): 39.87, #queue-req: 0"
    )
    assert isinstance(event, DecodeStats)
    assert (event.stamp, event.rank, event.gen_throughput) == (stamp, rank, 39.87)
    assert split_prefix(f"{prefix} Cache flushed successfully!") == LogPrefix(
        stamp, rank, None, None, "Cache flushed successfully!"
    )


def test_the_0_5_9_level_and_source_form() -> None:
    lines = (FIXTURES / "sglang" / "launch_server" / "launch_server-0.5.9-eagle3-topk4-drafttok3.txt").read_text()
    prefixed = [p for line in lines.splitlines() if (p := split_prefix(line)) is not None]
    assert [(p.stamp, p.level, p.source) for p in prefixed] == [
        ("2026-11-30 06:23:23", "INFO", "server_args.py:1835"),
        ("2026-11-30 06:23:23", "WARNING", "server_args.py:2364"),
        ("2026-11-30 06:23:23", "WARNING", "server_args.py:2385"),
    ]
    assert prefixed[0].message == "Attention backend not specified. Use triton backend by default."
    assert all(parse(line) is None for line in lines.splitlines())  # warnings, a traceback: no events
    crash = parse(
        "[2026-11-30 06:23:23 TP1] ERROR scheduler.py:3190: Scheduler hit an exception: Traceback "
        "(most recent call last):"
    )
    assert crash == ErrorMarker(
        "2026-11-30 06:23:23",
        "TP1",
        "scheduler_exception",
        "Scheduler hit an exception: Traceback (most recent call last):",
    )


def test_0_5_23_launch_lines_have_a_bare_prefix() -> None:
    lines = (FIXTURES / "sglang" / "launch_server" / "launch_server-0.5.23-eagle3-steps3-only.txt").read_text()
    prefixed = [p for line in lines.splitlines() if (p := split_prefix(line)) is not None]
    assert [(p.stamp, p.rank, p.level) for p in prefixed] == [("2026-11-30 06:23:09", "", None)] * 3
    assert prefixed[2].message == "kill_process_tree called: parent_pid=3412, include_parent=False, pid=3412"


def test_keys_that_vary_by_model_and_build() -> None:
    iters = parse(
        "[2026-11-30 06:23:49 TP0] Decode batch [81920], #running-req: 4, #token: 900, token usage: 0.01, "
        "cuda graph: True, gen throughput (token/s): 160.20, #queue-req: 0"
    )
    assert (iters.running_req, iters.gen_throughput) == (4, 160.2)
    hybrid = parse(
        "[2026-11-30 06:23:49] Decode batch, #running-req: 8, #full token: 5000, full token usage: 0.20, "
        "#swa token: 700, swa token usage: 0.05, cpu graph: False, gen throughput (token/s): 311.00, "
        "#queue-req: 2, est. decode TFLOPS/s (per GPU): 1.25"
    )
    assert (hybrid.tokens, hybrid.token_usage, hybrid.graph, hybrid.queue_req) == (5000, 0.2, False, 2)
    assert hybrid.fields["swa token usage"] == "0.05" and hybrid.fields["est. decode TFLOPS/s (per GPU)"] == "1.25"
    disagg = parse(
        "[2026-11-30 06:23:49 DP0 TP0] Decode batch, #running-req: 16, #token: 3000, token usage: 0.02, "
        "accept len: 2.10, accept rate: 0.55, pre-allocated usage: 0.00, #prealloc-req: 0, "
        "#transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 900.50, "
        "#queue-req: 0"
    )
    assert (disagg.rank, disagg.accept_len, disagg.gen_throughput, disagg.fields["#transfer-req"]) == (
        "DP0 TP0",
        2.1,
        900.5,
        "1",
    )
    # The stand-in (and SGLang 0.5.9) end a prefill line with a comma.
    trailing = parse(
        "[2026-11-30 06:23:49] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0, "
    )
    assert (trailing.new_token, trailing.queue_req, trailing.input_throughput) == (6, 0, None)


@pytest.mark.parametrize(
    "line",
    [
        '[2026-11-30 06:23:49] INFO:     127.0.0.1:52344 - "POST /v1/completions HTTP/1.1" 200 OK',
        '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 2876, in f',
        "[2026-11-30 06:23:49 TP0] Capture cuda graph bs [1, 2, 4, 8]",  # 0.5.9: the sizes, not a milestone
        "[2026-11-30 06:23:49 TP0] Decode batch, #running-req: many, gen throughput (token/s): 1.0, #queue-req: 0",
        "[2026-11-30 06:23:49 TP0] Decode batch, #running-req: 3, #token: 90",  # cut off
        "[not a time] Decode batch, #running-req: 1, gen throughput (token/s): 1.0, #queue-req: 0",
        "Decode batch, #running-req: 1, gen throughput (token/s): 1.0, #queue-req: 0",  # no prefix
        "[2026-11-30 06:23:49] The server is fired up",  # not the ready line
        "",
        "]" + " " * 3,
    ],
)
def test_lines_that_are_not_events(line: str) -> None:
    assert parse(line) is None


# What the parser makes of every line of every SGLang fixture: (lines, events by kind, lines that
# carry SGLang's log prefix). Only the two logs hold events; the launch and preflight outputs are
# warnings and tracebacks, and only 0.5.23's preflight run logs through SGLang's logger at all.
EVERY_FIXTURE: dict[str, tuple[int, dict[str, int], int]] = {
    # A refused start's `kill_process_tree called: ..., include_parent=False`: no server ending itself.
    "launch_server/launch_server-0.5.23-eagle3-steps3-only.txt": (32, {"ErrorMarker:tree_killed": 1}, 3),
    "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.tail20.txt": (20, {}, 0),
    "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.txt": (33, {"ErrorMarker:tree_killed": 1}, 3),
    "launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt": (28, {}, 3),
    "logs/prometheus-metric-names-0.5.23.tsv": (164, {}, 0),
    "logs/scheduler-lines-0.5.23.log": (6, {"DecodeStats": 3, "PrefillStats": 3}, 6),
    "logs/startup-and-error-lines.template.log": (
        16,
        {
            "Milestone:load_weight_begin": 1,
            "Milestone:load_weight_end": 1,
            "Milestone:memory_pool_end": 1,
            "Milestone:graph_capture_begin": 1,
            "Milestone:graph_capture_end": 1,
            "Milestone:max_total_num_tokens": 1,
            "Ready": 1,
            "ErrorMarker:health_check_failed": 1,
            "ErrorMarker:scheduler_exception": 1,
            "ErrorMarker:sigquit": 1,
            "ErrorMarker:initialization_failed": 1,
            "DecodeStats": 2,
            "PrefillStats": 1,
        },
        14,  # all but the traceback's two lines
    ),
    **{
        f"preflight/traceback-{version}-{case}.txt": (lines, {}, 2 if version == "0.5.23" else 0)
        for version in ("0.5.9", "0.5.23")
        for case, lines in [
            ("c1-topk4-drafttok3-nosteps", 19),
            ("c2-drafttok3-only", 19),
            ("c3-steps3-only", 18),
            ("c4-steps3-drafttok4-notopk", 18),
            ("c5-topk4-only", 19),
            ("ok1-all-three", 13),
            ("ok2-none-auto", 13),
            ("ok3-topk1-linear", 13),
        ]
    },
}


def kind_of(event: object) -> str:
    return type(event).__name__ + (f":{event.kind}" if isinstance(event, (Milestone, ErrorMarker)) else "")


def test_every_fixture_line_gives_exactly_the_known_events() -> None:
    root = FIXTURES / "sglang"
    seen = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        lines = path.read_text(errors="replace").splitlines()
        kinds = Counter(kind_of(e) for line in lines if (e := parse(line)) is not None)
        seen[str(path.relative_to(root))] = (len(lines), dict(kinds), sum(split_prefix(x) is not None for x in lines))
    assert seen == EVERY_FIXTURE  # a new fixture needs its row here
    preflight = (root / "preflight" / "traceback-0.5.23-c1-topk4-drafttok3-nosteps.txt").read_text().splitlines()
    assert [split_prefix(line) for line in preflight[:3]] == [
        LogPrefix(
            "2026-11-30 05:52:51", "", None, None, "Attention backend not specified. Use triton backend by default."
        ),
        LogPrefix(
            "2026-11-30 05:52:51",
            "",
            None,
            None,
            "Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests.",
        ),
        None,  # Traceback (most recent call last):
    ]
    assert preflight[-1] == "AssertionError" and parse(preflight[-1]) is None
    launch = (root / "launch_server" / "launch_server-0.5.23-eagle3-topk4-drafttok3.txt").read_text().splitlines()
    assert [split_prefix(line) for line in launch if split_prefix(line)][2] == LogPrefix(
        "2026-11-30 06:22:57",
        "",
        None,
        None,
        "kill_process_tree called: parent_pid=3253, include_parent=False, pid=3253",
    )
    template = (root / "logs" / "startup-and-error-lines.template.log").read_text().splitlines()
    assert [line for line in template if split_prefix(line) is None] == ["  ...", "RuntimeError: example"]


@pytest.mark.parametrize(
    "version, path, needle",
    [
        (
            "0.5.23",
            "srt/managers/scheduler_components/metrics_reporter.py",
            'msg = f"Decode batch{iter_msg}, #running-req: {num_running_reqs}, {token_usage_msg}"',
        ),
        (
            "0.5.23",
            "srt/managers/scheduler_components/metrics_reporter.py",
            'msg += f"accept len: {spec_accept_length:.2f}, accept rate: {spec_accept_rate:.2f}, "',
        ),
        ("0.5.23", "srt/managers/scheduler_components/metrics_reporter.py", 'f"Prefill batch{iter_msg}, "'),
        ("0.5.23", "srt/entrypoints/http_server.py", 'logger.info("The server is fired up and ready to roll!")'),
        ("0.5.23", "srt/managers/scheduler.py", 'logger.error(f"Scheduler hit an exception: {traceback}")'),
        (
            "0.5.23",
            "srt/model_executor/model_runner_components/cuda_graph_setup.py",
            'f"Capture {capture_name} {graph_backend[model_runner.device]} begin. "',
        ),
        (
            "0.5.9",
            "srt/managers/scheduler_metrics_mixin.py",
            'msg = f"Decode batch{iter_msg}, #running-req: {num_running_reqs}, {token_usage_msg}"',
        ),
        (
            "0.5.9",
            "srt/model_executor/model_runner.py",
            'f"Capture {graph_backend[self.device]} begin. This can take up to several minutes.',
        ),
    ],
)
def test_the_formats_are_the_ones_sglang_prints(sglang_root, version: str, path: str, needle: str) -> None:
    """The real release's source still holds the format strings the parser was written from."""
    assert needle in (sglang_root(version) / "sglang" / path).read_text()


def test_the_0_5_9_graph_capture_lines() -> None:
    begin = parse(
        "[2026-11-30 06:24:06 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.15 GB"
    )
    end = parse(
        "[2026-11-30 06:24:06 TP0] Capture cuda graph end. Time elapsed: 9.87 s. mem usage=0.69 GB. avail mem=19.46 GB."
    )
    assert isinstance(begin, Milestone) and isinstance(end, Milestone)
    assert (begin.kind, begin.values["graph"], begin.number("avail mem")) == (
        "graph_capture_begin",
        "cuda graph",
        20.15,
    )
    assert (end.kind, end.number("mem usage"), end.number("avail mem")) == ("graph_capture_end", 0.69, 19.46)


def _real_messages(name: str) -> list[str]:
    """The text lines of a real SGLang 0.5.23 journal (tests/data/sglang-0.5.23/)."""
    path = Path(__file__).parents[1] / "data" / "sglang-0.5.23" / name
    return [m for line in path.read_text().splitlines() if isinstance(m := json.loads(line)["MESSAGE"], str)]


def test_a_real_0_5_23_on_a_cpu_says_cpu_graph() -> None:
    """Its batch lines name the graph after the device (`cpu graph: False`), and a server without
    speculative decoding prints no accept figures."""
    got = [e for m in _real_messages("real-tp1-repeat.jsonl") if (e := parse(m)) is not None]
    assert [type(e) for e in got] == [PrefillStats, DecodeStats, PrefillStats, DecodeStats, DecodeStats]
    decode, hit = got[1], got[2]
    assert (decode.running_req, decode.tokens, decode.gen_throughput, decode.queue_req) == (1, 39, 1.61, 0)
    assert (decode.graph, decode.accept_len, decode.accept_rate) == (False, None, None)
    assert decode.fields["cpu graph"] == "False" and "cuda graph" not in decode.fields
    assert (hit.new_token, hit.cached_token, hit.graph, hit.input_throughput) == (1, 4, False, 0.25)


def test_the_facts_of_a_real_0_5_23_start() -> None:
    """The server_args dict, each rank's KV cache, and SGLang's own start-up timings."""
    got = {
        e.kind: e.values
        for m in _real_messages("real-tp2-start.jsonl")
        if isinstance(e := parse(m), Milestone) and e.kind in ("server_args", "kv_cache_allocated", "engine_timings")
    }
    args = got["server_args"]
    assert len(args) > 400 and (args["tp_size"], args["mem_fraction_static"]) == ("2", "0.95")
    assert (args["model_path"], args["speculative_algorithm"], args["device"]) == ("/models/tiny-llama", "None", "cpu")
    assert got["kv_cache_allocated"] == {
        "dtype": "torch.bfloat16",
        "#tokens": "16384",
        "K size": "0.00 GB",
        "V size": "0.00 GB",
    }
    assert got["engine_timings"] == {
        "load_weight": "0.02",
        "kv_cache_allocation": "0.53",
        "scheduler_e2e": "2.56",
        "tokenizer_e2e": "25.28",
        **{f"cuda_graph {g}": "0.00" for g in ("prefill", "decode", "target_verify")},
        **{f"cuda_graph {g}": "0.00" for g in ("draft_prefill", "draft_decode", "draft_extend")},
    }


def test_the_arguments_line_of_older_releases() -> None:
    line = (
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', tp_size=8, mem_fraction_static=0.88, "
        "lora_paths=[1, 2])"
    )
    event = parse(line)
    assert isinstance(event, Milestone) and event.kind == "server_args"
    assert event.values == {"model_path": "/m", "tp_size": "8", "mem_fraction_static": "0.88"}  # lists are not read
