"""/metrics read for the passive series (cockpit.sglang.metrics): the lab's stand-in's answer
(tests/data/metrics-standin.txt: after six requests, 40% of their prompt tokens from the cache),
and a data-parallel, tensor-parallel server's, every name from SGLang 0.5.23's metric list."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cockpit.load.passive import MetricsPoller, ThroughputPoint, ThroughputSeries, point_from_reading
from cockpit.remote.local import LocalHost
from cockpit.sglang.metrics import reading, samples
from tests.conftest import FIXTURES, until
from tests.http_answers import answering

DATA = Path(__file__).parents[1] / "data"
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
                    _line("cached_tokens_total", cached / 2, dp, tp, ',source="device"'),
                    _line("cached_tokens_total", cached / 2, dp, tp, ',source="host"'),
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
