"""The stand-in on loopback: SGLang's flags and failures, its endpoints, its token rate."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cockpit.load.runner import LoadConfig, Runner
from tests.conftest import FIXTURES, ROOT


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run_standin(sglang_root, version: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "COCKPIT_STANDIN_SGLANG_ROOT": str(sglang_root(version)), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "cockpit.lab.standin", "--model-path", "/m", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def without_stamps(text: str) -> str:
    text = re.sub(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "[T", text, flags=re.M)
    return re.sub(r"\b(parent_pid|pid)=\d+", r"\1=N", text)


@pytest.mark.parametrize(
    "version,flags,fixture",
    [
        (
            "0.5.23",
            ["--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "3"],
            "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.txt",
        ),
        ("0.5.23", ["--speculative-num-steps", "3"], "launch_server/launch_server-0.5.23-eagle3-steps3-only.txt"),
        (
            "0.5.9",
            ["--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "3"],
            "launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt",
        ),
    ],
)
def test_eagle_rule_replays_the_release_output(sglang_root, version: str, flags: list[str], fixture: str) -> None:
    proc = run_standin(sglang_root, version, "--speculative-algorithm", "EAGLE3", *flags)
    assert proc.returncode == 1
    assert without_stamps(proc.stderr) == without_stamps((FIXTURES / "sglang" / fixture).read_text())


@pytest.mark.parametrize(
    "flags",
    [
        ["--speculative-num-draft-tokens", "3"],  # c2
        ["--speculative-eagle-topk", "4"],  # c5
    ],
)
def test_other_assert_cases_die_like_the_release(sglang_root, flags: list[str]) -> None:
    proc = run_standin(sglang_root, "0.5.9", "--speculative-algorithm", "EAGLE3", *flags)
    assert proc.returncode == 1
    assert proc.stderr.rstrip().endswith(
        "and self.speculative_num_draft_tokens is None\n"
        "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError"
    )


def test_steps_without_topk_in_0_5_9_is_a_type_error(sglang_root) -> None:
    proc = run_standin(
        sglang_root,
        "0.5.9",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-num-draft-tokens",
        "4",
    )
    expected = (FIXTURES / "sglang/preflight/traceback-0.5.9-c4-steps3-drafttok4-notopk.txt").read_text()
    tail = expected[
        expected.index('  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/server_args.py", line 5592') :
    ]
    assert proc.returncode == 1 and proc.stderr.endswith(tail)


def test_unknown_and_malformed_flags_fail_as_argparse_does(sglang_root) -> None:
    proc = run_standin(sglang_root, "0.5.23", "--num-speculative-tokens", "16")
    assert proc.returncode == 2
    assert (
        proc.stderr.splitlines()[-1] == "launch_server.py: error: unrecognized arguments: --num-speculative-tokens 16"
    )
    proc = run_standin(sglang_root, "0.5.9", "--tp-size", "eight")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "launch_server.py: error: argument --tensor-parallel-size/--tp-size: invalid int value: 'eight'"
    )


def test_endpoints(standin) -> None:
    sp = standin("--tp-size", "2", "--served-model-name", "demo", "--enable-metrics")
    assert get(sp.url + "/health")[0] == 200
    assert json.loads(get(sp.url + "/v1/models")[1])["data"][0]["id"] == "demo"
    info = json.loads(get(sp.url + "/server_info")[1])
    assert info["tp_size"] == 2 and info["version"] == "0.5.23" and "stand-in" in info["standin"]
    assert "last_gen_throughput" in info["internal_states"][0]
    assert json.loads(get(sp.url + "/model_info")[1])["architectures"] == ["LlamaForCausalLM"]
    assert b"sglang:num_running_reqs" in get(sp.url + "/metrics")[1]
    assert get(sp.url + "/nope")[0] == 404
    log = sp.log()
    assert re.search(r"^\[[\d\- :]+ TP1\] Load weight begin", log, re.M)
    assert "The server is fired up and ready to roll!" in log


def wait_for_line(sp, text: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while text not in sp.log():
        assert time.monotonic() < deadline and sp.proc.poll() is None, (text, sp.log()[-2000:])
        time.sleep(0.05)


def test_nothing_listens_while_the_ranks_start_and_health_is_503_through_the_warm_up(standin) -> None:
    """As 0.5.23: uvicorn starts once every rank is up, and /health answers 503 with no body
    until the warm-up's request is done (tests/data/sglang-0.5.23/real-tp1-start.jsonl)."""
    sp = standin(env={"COCKPIT_STANDIN_STARTUP_S": "4"}, wait_ready=False)
    wait_for_line(sp, "Load weight begin")
    with pytest.raises(urllib.error.URLError, match="Connection refused"):
        get(sp.url + "/health")
    wait_for_line(sp, "Uvicorn running on")
    assert get(sp.url + "/health") == (503, b"") and get(sp.url + "/ready") == (503, b"")
    assert "ready to roll" not in sp.log()
    wait_for_line(sp, "ready to roll")
    assert get(sp.url + "/ready") == (200, b"")


def children(pid: int) -> dict[int, tuple[str, bytes]]:
    """PID -> (comm, cmdline) of each child of `pid`."""
    out = {}
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if entry.isdigit() and stat.rsplit(")", 1)[1].split()[1] == str(pid):
                out[int(entry)] = (
                    Path(f"/proc/{entry}/comm").read_text().strip(),
                    Path(f"/proc/{entry}/cmdline").read_bytes(),
                )
        except (OSError, IndexError):
            continue
    return out


def test_the_children_carry_sglangs_titles_and_a_resource_tracker(standin) -> None:
    """setproctitle's way: the command line is the title alone, `comm` its first 15 bytes; and
    multiprocessing's resource tracker beside them (tests/data/sglang-0.5.23/real-tp2-processes.txt)."""
    sp = standin("--tp-size", "2")
    shown = sorted((comm, cmdline.rstrip(b"\0").decode()) for comm, cmdline in children(sp.proc.pid).values())
    tracker = [(comm, cmdline) for comm, cmdline in shown if "resource_tracker" in cmdline]
    assert [(c, line) for c, line in shown if (c, line) not in tracker] == [
        ("sglang::detoken", "sglang::detokenizer"),
        ("sglang::schedul", "sglang::scheduler_TP0"),
        ("sglang::schedul", "sglang::scheduler_TP1"),
    ], shown
    [(comm, cmdline)] = tracker
    assert re.fullmatch(r"\S+\0-c\0from multiprocessing\.resource_tracker import main;main\(\d+\)", cmdline), cmdline


def test_a_killed_rank_ends_the_server_as_sglangs_watchdog_does(standin) -> None:
    """0.5.23's SubprocessWatchdog: within a second of a scheduler's death, its line, then the
    SIGQUIT handler's and the kill of the tree; with both crash diagnostics off (SGLang's own
    switches), no 5 s of them."""
    off = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
    sp = standin(env=off)
    [rank] = [pid for pid, (comm, _) in children(sp.proc.pid).items() if comm == "sglang::schedul"]
    os.kill(rank, signal.SIGKILL)
    assert sp.proc.wait(5) == -9
    said = [re.sub(r"^\[[\d\- :]+\] ", "", line) for line in sp.log().splitlines()]
    main = sp.proc.pid
    assert said[
        said.index(
            f"Subprocess scheduler_0 (pid={rank}) crashed with exit code -9. Triggering SIGQUIT for cleanup..."
        ) :
    ] == [
        f"Subprocess scheduler_0 (pid={rank}) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        f"kill_process_tree called: parent_pid={main}, include_parent=True, pid={main}",
    ]
    assert children(main) == {}


def test_a_sigterm_drains_and_ends_clean_at_the_watchdogs_next_look(standin) -> None:
    """SIGTERM to the main process alone (KillMode=mixed): said at once, acted on when the
    tokenizer manager's watchdog next looks (every 5 s from the warm-up), exit 0."""
    sp = standin()
    os.kill(sp.proc.pid, signal.SIGTERM)
    began = time.monotonic()
    assert sp.proc.wait(10) == 0 and time.monotonic() - began <= 5.5
    said = [re.sub(r"^\[[\d\- :]+\] ", "", line) for line in sp.log().splitlines()]
    main = sp.proc.pid
    assert said[said.index("SIGTERM received. signum=None frame=None. Draining requests and shutting down...") :] == [
        "SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
        "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].",
        f"kill_process_tree called: parent_pid={main}, include_parent=False, pid={main}",
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
        f"INFO:     Finished server process [{main}]",
        f"kill_process_tree called: parent_pid={main}, include_parent=False, pid={main}",
    ]


def test_a_sigterm_to_every_process_reads_as_a_crash(standin) -> None:
    """systemd's default KillMode=control-group sends SIGTERM to every process of the unit: the
    ranks die of it before the watchdog's next look, and the server takes that for a crash,
    sleeps 5 s for its diagnostics and kills itself (tests/data/sglang-0.5.23/real-tp1-stop.jsonl)."""
    sp = standin()
    for pid in [sp.proc.pid, *children(sp.proc.pid)]:
        os.kill(pid, signal.SIGTERM)
    assert sp.proc.wait(10) == -9
    said = [re.sub(r"^\[[\d\- :]+\] ", "", line) for line in sp.log().splitlines()]
    start = said.index("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
    assert [re.sub(r"\d+", "N", line) for line in said[start:]] == [
        "SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
        "Subprocess scheduler_N (pid=N) crashed with exit code -N. Triggering SIGQUIT for cleanup...",
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "Sleeping N seconds before crash diagnostics to let GPU activity settle.",
        "No live scheduler processes found; skipping py-spy and CUDA coredump.",
        "kill_process_tree called: parent_pid=N, include_parent=True, pid=N",
    ]
    assert "exit code -15." in said[start + 1]


def metric(text: str, line_start: str) -> float | None:
    """The value of the sample whose line starts with `line_start`, None where there is none."""
    found = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    return found[0] if found else None


def test_metrics_count_the_warm_up_and_a_request_once_it_is_done_and_no_health_check(standin) -> None:
    """As SGLang's tokenizer manager counts: its own warm-up (6 prompt tokens, 8 new ones, one
    request) before ready, a request when it finishes, a generating health check never
    (log_metrics=False): prompt, generated and requests, each as a plain and a streamed sample."""
    sp = standin("--enable-metrics", env={"COCKPIT_STANDIN_TOKENS_PER_S": "40"})
    generated = 'sglang:generation_tokens_total{engine_type="unified",is_streaming='
    at_ready = get(sp.url + "/metrics")[1].decode()
    assert (metric(at_ready, generated + '"false"'), metric(at_ready, "sglang:prompt_tokens_total")) == (8.0, 6.0)
    assert metric(at_ready, "sglang:cached_tokens_total") is None
    body = json.dumps({"prompt": "one two three", "max_tokens": 40, "stream": True}).encode()
    req = urllib.request.Request(sp.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.readline()  # the first token is out: the request runs for about a second more
        running = get(sp.url + "/metrics")[1].decode()
        resp.read()
    done = get(sp.url + "/metrics")[1].decode()
    assert metric(running, generated + '"true"') is None and metric(done, generated + '"true"') == 40.0
    requests = 'sglang:num_requests_total{engine_type="unified",is_streaming='
    assert (metric(at_ready, requests + '"false"'), metric(running, requests + '"true"')) == (1.0, None)  # the warm-up
    assert metric(done, requests + '"true"') == 1.0
    before = sp.log().count("#new-token: 1,")
    assert get(sp.url + "/health")[0] == 200  # it generates: 0.5.23's default
    assert sp.log().count("#new-token: 1,") == before + 1
    after = get(sp.url + "/metrics")[1].decode()
    counters = [line for line in done.splitlines() if line.startswith("sglang:") and "_total{" in line]
    assert len(counters) == 6 and counters == [line for line in after.splitlines() if line in counters]


def test_non_streaming_and_chat(standin) -> None:
    sp = standin()
    body = json.dumps({"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5}).encode()
    req = urllib.request.Request(
        sp.url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        out = json.loads(resp.read())
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert len(out["choices"][0]["message"]["content"].split()) == 5


def _delivered(url: str) -> list[tuple[float, float, float, int]]:
    with urllib.request.urlopen(f"{url}/standin/delivered", timeout=10) as resp:
        return [tuple(r) for r in json.loads(resp.read())["requests"]]


def _truth(served: list[tuple[float, float, float, int]]) -> dict[str, float]:
    """What the stand-in delivered to these requests (start, first token, end, tokens), by its clock."""
    return {
        "rate": sum(r[3] for r in served) / (max(r[2] for r in served) - min(r[0] for r in served)),
        "tpot_ms": 1000 * sum((r[2] - r[1]) / (r[3] - 1) for r in served) / len(served),
        "per_stream": sum((r[3] - 1) / (r[2] - r[1]) for r in served) / len(served),
    }


async def measure(url: str, concurrency: int, requests: int, output_len: int = 100) -> dict:
    cfg = LoadConfig(
        url=url, concurrency=(concurrency,), requests=requests, warmup=1, input_len=32, output_len=output_len
    )
    [level] = await Runner(cfg).run()
    assert level.errors == 0
    return level.to_json()


async def test_measured_rate_matches_what_was_delivered_at_concurrency_1_and_8(standin) -> None:
    """The measurer against the stand-in's own account of the same run; the settings only bound it
    from above (a busy machine delivers less, never more). 100 tok/s per stream and 400 for the
    whole server: one stream may get 100, eight streams share the 400 (at most 50 each)."""
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "100", "COCKPIT_STANDIN_CAPACITY": "400"})
    one = await measure(sp.url, 1, 4)
    served = _delivered(sp.url)[1:]  # the warm-up request first
    truth = _truth(served)
    assert one["output_tokens_per_s_per_stream"] == pytest.approx(truth["per_stream"], rel=0.05)
    assert one["tpot_ms"]["mean"] == pytest.approx(truth["tpot_ms"], rel=0.05)
    assert truth["per_stream"] <= 100 * 1.05
    before = len(_delivered(sp.url)) + 1
    eight = await measure(sp.url, 8, 16)
    served = _delivered(sp.url)[before:]
    truth = _truth(served)
    assert len(served) == 16
    assert eight["output_tokens_per_s_per_stream"] == pytest.approx(truth["per_stream"], rel=0.05)
    assert eight["output_tokens_per_s"] == pytest.approx(truth["rate"], rel=0.05)
    assert truth["per_stream"] <= 50 * 1.05  # shared: one stream alone was allowed 100
    assert eight["output_tokens"] == 16 * 100 and eight["token_count_source"] == "usage"


async def test_speculative_chunks_and_early_stop(standin) -> None:
    sp = standin(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
        env={
            "COCKPIT_STANDIN_TOKENS_PER_S": "120",
            "COCKPIT_STANDIN_ACCEPT_LEN": "3",
            "COCKPIT_STANDIN_EARLY_STOP": "61",
            "COCKPIT_STANDIN_DECODE_LOG_INTERVAL": "5",
        },
    )
    level = await measure(sp.url, 2, 4, output_len=200)
    served = _delivered(sp.url)[1:]
    assert level["output_tokens"] == 4 * 61 == sum(r[3] for r in served)  # the true count, not the requested 200
    assert level["tokens_per_chunk"] == pytest.approx(61 / 21, rel=0.01)  # 1 + 20 chunks of 3
    assert level["itl_ms"]["mean"] == pytest.approx(_truth(served)["tpot_ms"], rel=0.05)
    true_gap_ms = 1000 * sum((r[2] - r[1]) / 20 for r in served) / len(served)
    assert level["chunk_gap_ms"]["mean"] == pytest.approx(true_gap_ms, rel=0.05)
    assert re.search(
        r"Decode batch, .*accept len: 3\.00, accept rate: 0\.67, .*gen throughput \(token/s\): [\d.]+", sp.log()
    )


def test_crash_makes_every_rank_print_its_traceback(standin) -> None:
    sp = standin("--tp-size", "4")
    req = urllib.request.Request(sp.url + "/standin/crash", data=b"", method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    assert sp.proc.wait(15) == -9  # killed, as SGLang's kill_process_tree kills the parent
    log = sp.log()
    for rank in range(4):
        assert re.search(
            rf"^\[[\d\- :]+ TP{rank}\] Scheduler hit an exception: Traceback \(most recent call last\):$", log, re.M
        )
    assert log.count("StandinCudaError: CUDA error: an illegal memory access") == 4
    # Each rank SIGQUITs the server (run_scheduler_process), whose handler runs once: 5 s of crash
    # diagnostics, by when the ranks have ended, then the kill (real-tp2-kill9-scheduler-tp1.jsonl).
    main = re.findall(r"^\[[\d\- :]+\] (.*)$", log[log.index("ready to roll") :], re.M)  # no rank's
    assert main == [
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "Sleeping 5 seconds before crash diagnostics to let GPU activity settle.",
        "No live scheduler processes found; skipping py-spy and CUDA coredump.",
        f"kill_process_tree called: parent_pid={sp.proc.pid}, include_parent=True, pid={sp.proc.pid}",
    ]


def test_cockpit_bench_at_1_4_16_and_64_reads_what_the_standin_delivered(standin, tmp_path) -> None:
    """`cockpit bench` against what the stand-in says it delivered in the same run (its own count
    of tokens and its own clock), level by level: on a busy machine the stand-in may fall short of
    its settings (1,472 tok/s of 1,600 was seen at 16 streams), and the measurer must read that."""
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "100", "COCKPIT_STANDIN_CAPACITY": "3200"})
    for c in (1, 4, 16, 64):
        before = len(_delivered(sp.url))
        out = tmp_path / f"run-{c}.json"
        proc = subprocess.run(
            [
                str(Path(sys.executable).with_name("cockpit")),
                "bench",
                "--url",
                sp.url,
                "--concurrency",
                str(c),
                "--requests",
                "8",
                "--warmup",
                "0",
                "--input-len",
                "16",
                "--output-len",
                "150",  # 1.5 s a level: the 64 connections' set-up is a small part of the span
                "--json",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        [lv] = json.loads(out.read_text())["levels"]
        served = _delivered(sp.url)[before:]  # exactly this level's requests: no warm-up ran
        assert len(served) == lv["requests"] == max(8, c) and lv["output_tokens"] == sum(r[3] for r in served)
        truth = _truth(served)
        assert lv["output_tokens_per_s"] == pytest.approx(truth["rate"], rel=0.05), c
        assert lv["tpot_ms"]["mean"] == pytest.approx(truth["tpot_ms"], rel=0.05), c
        assert lv["itl_ms"]["mean"] == pytest.approx(truth["tpot_ms"], rel=0.05), c
        assert lv["output_tokens_per_s_per_stream"] == pytest.approx(truth["per_stream"], rel=0.05), c


def test_a_flag_set_with_no_recorded_outcome_starts_whatever_the_rule_says(sglang_root) -> None:
    """topk 2 and draft tokens 5 without steps break the EAGLE rule the pre-flight checks, but no
    run of the release with them is on record: the stand-in does not judge it, it starts."""
    from cockpit.lab.standin.launch import recorded_outcome
    from cockpit.sglang.preflight.rules import eagle_violation

    flags = {
        "--speculative-algorithm": "EAGLE3",
        "--speculative-eagle-topk": "2",
        "--speculative-num-draft-tokens": "5",
    }
    assert eagle_violation("0.5.23", flags) is not None and recorded_outcome("0.5.23", flags) is None
    recorded = {
        "--speculative-algorithm": "EAGLE3",
        "--speculative-eagle-topk": "4",
        "--speculative-num-draft-tokens": "3",
    }
    assert recorded_outcome("0.5.23", {**recorded, "--speculative-draft-model-path": "/m/draft"}) == "AssertionError"
    assert recorded_outcome("0.5.19", recorded) is None  # a release with no recorded runs
    code = (
        "import sys\nimport cockpit.lab.standin.server\n"
        "print(sorted(m for m in sys.modules if m == 'cockpit.sglang.preflight.rules'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"  # the stand-in does not even import the pre-flight's rules


def test_the_outcomes_name_runs_that_are_in_the_fixtures() -> None:
    records = json.loads((ROOT / "cockpit" / "lab" / "standin" / "replays" / "outcomes.json").read_text())
    assert len(records) == 16
    for record in records:
        text = (FIXTURES.parent / record["recorded"].removeprefix("shared/")).read_text()
        assert ("PREFLIGHT OK" in text) == (record["outcome"] == "ok"), record
        if record["outcome"] != "ok":
            assert text.rstrip().splitlines()[-1].startswith(record["outcome"]), record


def test_eagle_decodes_a_stream_faster_and_a_saturated_server_slower_than_plain_decoding() -> None:
    """The demo's EAGLE-3 (3 steps, 4 draft tokens, accept length 2.7) against plain decoding on
    the demo unit's 40 tok/s a stream and 1,200 tok/s in all: a step of it costs 1.6 plain ones,
    so one stream decodes 2.7 / 1.6 times as fast; it puts 4 tokens a request through the model,
    so a saturated server gives 2.7 / 4 of plain's. The stand-in once decoded every stream at 40
    tok/s whatever its accept length, and the README's picture said 1.63x where it gave 1.0x."""
    from cockpit.lab.standin.engine import Engine
    from cockpit.lab.standin.log import Logger

    def engine(accept_len: float, spec_steps: int | None, draft_tokens: int | None) -> Engine:
        return Engine(
            Logger(stream=io.StringIO()),
            tokens_per_s=40,
            capacity=1200,
            accept_len=accept_len,
            prefill_tokens_per_s=50000,
            ttft_base_ms=20,
            early_stop=0,
            decode_log_interval=40,
            max_running=None,
            spec_steps=spec_steps,
            draft_tokens=draft_tokens,
        )

    plain, eagle = engine(1.0, None, None), engine(2.7, 3, 4)

    def output_rate(e: Engine, streams: int) -> float:
        return streams * e.accept_len / e._interval(streams)

    assert output_rate(plain, 1) == pytest.approx(40) and output_rate(plain, 32) == pytest.approx(1200)
    assert output_rate(eagle, 1) / output_rate(plain, 1) == pytest.approx(2.7 / 1.6)
    assert output_rate(eagle, 8) / output_rate(plain, 8) == pytest.approx(2.7 / 1.6)
    assert output_rate(eagle, 32) / output_rate(plain, 32) == pytest.approx(2.7 / 4)
