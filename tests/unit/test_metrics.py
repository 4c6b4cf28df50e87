"""/metrics read for the passive series (cockpit.sglang.server.metrics): the lab's stand-in's answer
(tests/data/metrics-standin.txt: EAGLE3, after six requests, 40% of their prompt tokens from the
cache), a real SGLang 0.5.23's (tests/data/sglang-0.5.23/real-tp1-metrics*.txt: no speculative
decoding; a prompt sent twice), and a data-parallel, tensor-parallel server's, every name from
SGLang 0.5.23's metric list."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

from cockpit.load.passive import MetricsPoller, ThroughputPoint, ThroughputSeries, point_from_reading
from cockpit.remote.local import LocalHost
from cockpit.sglang.server.metrics import reading, samples
from tests.conftest import FIXTURES, until
from tests.http_answers import answering

DATA = Path(__file__).parents[1] / "data"
REAL = DATA / "sglang-0.5.23"
NAMES = {
    line.split("\t")[1]
    for line in (FIXTURES / "sglang" / "logs" / "prometheus-metric-names-0.5.23.tsv").read_text().splitlines()[1:]
}


def test_the_standins_answer() -> None:
    text = (DATA / "metrics-standin.txt").read_text()
    assert {"sglang:" + s.name for s in samples(text)} <= NAMES  # only names the release has
    now = reading(text, 100.0)
    assert now is not None
    assert (now.running, now.queued, now.accept_len, now.prompt_tokens, now.cached_tokens) == (0, 0, 2.7, 210, 84)
    assert now.cache_hit_rate(None) == 0.4  # since the server started; the gauge itself reads 0
    point = point_from_reading(now, now.cache_hit_rate(None))
    assert point.source == "metrics" and point.words().endswith("accept 2.70 (rate 0.57) · prefix cache hit 40%")


def test_a_real_server_without_speculative_decoding_says_no_accept_figures() -> None:
    """0.5.23 exports spec_accept_length and spec_accept_rate at 0.0 on a plain server."""
    text = (REAL / "real-tp1-metrics.txt").read_text()
    assert 'sglang:spec_accept_length{engine_type="unified"' in text  # there, at 0.0
    now = reading(text, 100.0)
    assert now is not None and (now.accept_len, now.accept_rate) == (None, None)
    words = point_from_reading(now, now.cache_hit_rate(None)).words()
    assert "accept" not in words, words
    # No cache hit yet: the counter is not exported at all, and the prompts were served uncached.
    assert "cached_tokens_total" not in text and (now.prompt_tokens, now.cached_tokens) == (11, 0)
    assert words.endswith("prefix cache hit 0%"), words


def test_the_real_hit_rate_over_the_interval_of_the_first_hit() -> None:
    """The same prompt of five tokens twice after the warm-up's six: the second found four in the
    radix cache, and the first reading with `cached_tokens_total{cache_source="device"}` says so
    over the interval (4 of 10 prompt tokens), not over the server's life (4 of 16)."""
    before = reading((REAL / "real-tp1-metrics-before-repeat.txt").read_text(), 100.0)
    text = (REAL / "real-tp1-metrics-after-repeat.txt").read_text()
    after = reading(text, 105.0)
    assert before is not None and after is not None
    assert [s.labels["cache_source"] for s in samples(text) if s.name == "cached_tokens_total"] == ["device"]
    assert (before.prompt_tokens, before.cached_tokens, after.prompt_tokens, after.cached_tokens) == (6, 0, 16, 4)
    assert after.cache_hit_rate(before) == 0.4
    assert point_from_reading(after, after.cache_hit_rate(before)).words().endswith("prefix cache hit 40%")


def _families(text: str) -> dict[str, set[str]]:
    """Each family's label names, over all its samples."""
    found: dict[str, set[str]] = {}
    for s in samples(text):
        found.setdefault(s.name, set()).update(s.labels)
    return found


def _ask(url: str, path: str, body: dict | None = None) -> str:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read().decode()


def test_the_standin_says_what_a_real_0_5_23_says(standin) -> None:
    """Each family the stand-in writes carries the label names a real 0.5.23 gives it; a plain
    stand-in exports its accept gauges at 0.0 and no cache counter before a hit, as the real one
    does, and a speculative one with a prefix cache says both."""
    real: dict[str, set[str]] = {}
    for name in ("real-tp1-metrics-after-repeat.txt", "real-tp1-metrics.txt"):
        for family, labels in _families((REAL / name).read_text()).items():
            real.setdefault(family, set()).update(labels)
    completion = {"model": "x", "prompt": "a b c d e f g h", "max_tokens": 12}

    plain = standin("--enable-metrics", env={"COCKPIT_STANDIN_DECODE_LOG_INTERVAL": "2"})
    _ask(plain.url, "/v1/completions", completion)
    text = _ask(plain.url, "/metrics")
    said = _families(text)
    assert said == {name: real[name] for name in said}, {n: (said[n], real.get(n)) for n in said}
    assert {"spec_accept_length", "spec_accept_rate", "prompt_tokens_total"} <= set(said)
    assert "cached_tokens_total" not in said  # no hit yet: not exported, as the real server
    now = reading(text, 1.0)
    assert now is not None and (now.accept_len, now.cached_tokens) == (None, 0)

    spec = standin(
        "--enable-metrics",
        *("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"),
        *("--speculative-num-draft-tokens", "4"),
        env={"COCKPIT_STANDIN_DECODE_LOG_INTERVAL": "2", "COCKPIT_STANDIN_PREFIX_CACHE_HIT": "0.5"},
    )
    _ask(spec.url, "/v1/completions", completion)
    text = _ask(spec.url, "/metrics")
    said = _families(text)
    assert said == {name: real[name] for name in said} and "cached_tokens_total" in said
    assert 'cached_tokens_total{cache_source="device",' in text
    now = reading(text, 1.0)
    # Half the request's 8 prompt tokens cached; SGLang's warm-up (6, none cached) counted too.
    assert now is not None and now.accept_len == 2.7 and (now.prompt_tokens, now.cached_tokens) == (14, 4)


def _line(name: str, value: float, dp: int, tp: int, extra: str = "") -> str:
    labels = f'dp_rank="{dp}",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="{tp}"{extra}'
    return f"sglang:{name}{{{labels}}} {value}"


def test_ranks_are_counted_once_each_and_the_hit_rate_is_over_the_interval() -> None:
    def text(prompt: float, cached: float) -> str:
        lines = [
            "# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge",
        ]
        for dp in (0, 1):
            for tp in (0, 1, 2, 3):  # --enable-metrics-for-all-schedulers: every TP rank repeats its DP rank's batch
                lines += [
                    _line("num_running_reqs", 10 + dp, dp, tp),
                    _line("gen_throughput", 1000.0, dp, tp),
                    _line("token_usage", 0.2 + 0.2 * dp, dp, tp),
                    _line("prompt_tokens_total", prompt, dp, tp),
                    _line("cached_tokens_total", cached / 2, dp, tp, ',cache_source="device"'),
                    _line("cached_tokens_total", cached / 2, dp, tp, ',cache_source="host"'),
                ]
        return "\n".join([*lines, "process_cpu_seconds_total 12.5", "sglang:broken{"]) + "\n"

    first, later = reading(text(1000, 100), 1.0), reading(text(3000, 1100), 6.0)
    assert first is not None and later is not None
    assert (later.running, later.gen_throughput, round(later.token_usage or 0, 3)) == (21, 2000.0, 0.3)
    assert later.prompt_tokens == 6000 and later.cached_tokens == 2200  # both DP ranks, every cache source
    assert later.cache_hit_rate(first) == 2000 / 4000  # the interval's, not the server's life's 2200/6000


def test_metrics_are_the_word_while_they_answer() -> None:
    series = ThroughputSeries(fresh_s=10.0)
    now = reading((DATA / "metrics-standin.txt").read_text(), 100.0)
    assert now is not None and series.add_polled(point_from_reading(now, 0.4))
    decode = next(
        line
        for line in (FIXTURES / "sglang" / "logs" / "scheduler-lines-0.5.23.log").read_text().splitlines()
        if "Decode batch" in line
    )
    assert series.add_line(decode, 105.0) is None  # /metrics answered 5 s ago: the lines add nothing
    assert series.add_line(decode, 111.0) is not None  # it has gone quiet: back to the lines
    assert [p.source for p in series] == ["metrics", "log"]


async def test_a_sample_that_is_no_finite_number_is_skipped_and_the_poll_goes_on() -> None:
    """A server (or whatever answers on its port) that says NaN or 1e400 (float() reads it as
    infinity) had its first reading end the session's metrics poll: a count cannot be rounded."""
    answers = [
        b'sglang:num_running_reqs{tp_rank="0"} NaN\nsglang:gen_throughput{tp_rank="0"} 12.5\n'
        b'sglang:num_queue_reqs{tp_rank="0"} 1e400\nsglang:token_usage{tp_rank="0"} -Inf\n',
        b'sglang:num_running_reqs{tp_rank="0"} 2\nsglang:gen_throughput{tp_rank="0"} 40.5\n',
    ]
    points: list[ThroughputPoint] = []
    async with answering(answers) as port:
        poller = MetricsPoller(LocalHost(), port, interval_s=0.01)
        poll = asyncio.create_task(poller.run(points.append, lambda sentence: None))
        try:
            await until(lambda: len(points) >= 2 or poll.done(), 10)
            assert not poll.done(), poll.exception()
        finally:
            poll.cancel()
    first, second = points[:2]
    assert (first.running_req, first.gen_throughput, first.queued, first.token_usage) == (None, 12.5, None, None)
    assert (second.running_req, second.gen_throughput) == (2, 40.5)
