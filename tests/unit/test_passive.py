"""Passive throughput: the series from decode lines and /server_info, checked against a load run
on the stand-in, which logs real decode lines at the rate it produces."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cockpit.load.passive import ServerInfoPoller, ThroughputPoint, ThroughputSeries, point_from_server_info
from cockpit.load.runner import LoadConfig, Runner
from cockpit.remote.local import LocalHost
from cockpit.systemd.entry import JournalEntry
from tests.conftest import FIXTURES, free_port, until
from tests.http_answers import answering

DECODE = (
    "[2026-11-30 06:23:49{rank}] Decode batch, #running-req: {running}, #token: 900, token usage: 0.01, "
    "{spec}cuda graph: True, gen throughput (token/s): {rate:.2f}, #queue-req: 0"
)


def decode(rate: float, running: int = 8, rank: str = "", accept: float | None = None) -> str:
    spec = f"accept len: {accept:.2f}, accept rate: 0.50, " if accept is not None else ""
    return DECODE.format(rank=rank, running=running, spec=spec, rate=rate)


def test_a_batch_gives_one_point_per_rank_and_second_the_last_line_of_each() -> None:
    """A flood of decode lines (4 DP ranks, 1,000 lines over two seconds, plain lines between):
    one point per rank and second, from that rank's last line, and the last point sums each
    rank's latest line, as a line-by-line series would have ended."""
    t0 = 1_796_000_000_000_000
    batch, rates = [], {}
    for i in range(1000):
        dp = i % 4
        rates[dp] = 100.0 + i
        us = t0 + i * 2000  # 2 ms apart: seconds 0 and 1
        batch.append(
            JournalEntry(message=decode(rates[dp], running=dp + 1, rank=f" DP{dp} TP{2 * dp}"), realtime_us=us)
        )
        batch.append(JournalEntry(message="[2026-11-30 06:23:49 DP0 TP0] Prefill batch, #new-seq: 1", realtime_us=us))
    every_line = ThroughputSeries()
    expected = [p for e in batch if (p := every_line.add_entry(e)) is not None][-1]
    series = ThroughputSeries()
    points = series.add_entries(batch)
    assert len(points) == 8 == len(series)
    assert points[-1].gen_throughput == expected.gen_throughput == sum(rates.values())
    assert points[-1].running_req == expected.running_req == 1 + 2 + 3 + 4
    assert series.add_entries(batch[1::2]) == []  # no decode line, no point


def test_decode_lines_of_sglang_become_points() -> None:
    series = ThroughputSeries()
    lines = (FIXTURES / "sglang" / "logs" / "scheduler-lines-0.5.23.log").read_text().splitlines()
    added = [series.add_line(line, 100.0 + i) for i, line in enumerate(lines)]
    assert [p is not None for p in added] == [True, False] * 3  # prefill lines add nothing
    assert [(p.time, p.gen_throughput, p.running_req, p.accept_len, p.source) for p in series] == [
        (100.0, 2559.97, 32, None, "log"),
        (102.0, 3468.94, 32, 2.71, "log"),
        (104.0, 4351.94, 32, 3.40, "log"),
    ]
    assert series.values() == [2559.97, 3468.94, 4351.94]
    assert series.latest.gen_throughput == 4351.94


def test_the_series_is_bounded() -> None:
    series = ThroughputSeries(maxlen=5)
    for i in range(20):
        series.add_line(decode(float(i)), float(i))
    assert len(series) == 5 and series.values() == [15.0, 16.0, 17.0, 18.0, 19.0]


def test_journal_entries_carry_their_own_time() -> None:
    series = ThroughputSeries()
    point = series.add_entry(JournalEntry(message=decode(807.0, running=32), realtime_us=1_796_000_000_250_000))
    assert point == ThroughputPoint(1_796_000_000.25, 807.0, 32, None, "log")
    assert series.add_entry(JournalEntry(message="[2026-11-30 06:23:49] Cache flushed", realtime_us=1)) is None


def test_data_parallel_ranks_add_up_and_later_pipeline_stages_do_not() -> None:
    series = ThroughputSeries(fresh_s=5.0)
    series.add_line(decode(400.0, running=16, rank=" DP0 TP0", accept=3.0), 10.0)
    point = series.add_line(decode(300.0, running=12, rank=" DP1 TP8", accept=2.0), 10.5)
    assert (point.gen_throughput, point.running_req, point.accept_len) == (700.0, 28, 2.5)
    assert series.add_line(decode(999.0, rank=" DP0 PP1 TP4"), 10.6) is None
    point = series.add_line(decode(500.0, running=20, rank=" DP0 TP0"), 12.0)
    assert (point.gen_throughput, point.running_req) == (800.0, 32)
    # DP1 fell silent: after fresh_s its last line no longer counts.
    point = series.add_line(decode(450.0, running=18, rank=" DP0 TP0"), 16.0)
    assert (point.gen_throughput, point.running_req) == (450.0, 18)


def test_polled_points_fill_in_only_when_decode_lines_are_stale() -> None:
    series = ThroughputSeries(fresh_s=10.0)
    polled = ThroughputPoint(1.0, 42.0, None, None, "server_info")
    assert series.add_polled(polled) and series.latest == polled  # no decode line at all yet
    series.add_line(decode(800.0), 100.0)
    assert not series.add_polled(ThroughputPoint(105.0, 800.0, None, None, "server_info"))
    assert series.add_polled(ThroughputPoint(111.0, 0.0, None, None, "server_info"))
    assert [p.source for p in series] == ["server_info", "log", "server_info"]


def test_server_info_internal_states() -> None:
    one = {"internal_states": [{"last_gen_throughput": 807.5, "avg_spec_accept_length": 2.7}], "tp_size": 8}
    assert point_from_server_info(one, 5.0) == ThroughputPoint(5.0, 807.5, None, 2.7, "server_info")
    dp = {"internal_states": [{"last_gen_throughput": 400.0}, {"last_gen_throughput": 300.0, "memory_usage": {}}]}
    assert point_from_server_info(dp, 5.0).gen_throughput == 700.0
    assert point_from_server_info({"internal_states": {"last_gen_throughput": 12}}, 5.0).gen_throughput == 12.0
    assert point_from_server_info({"tp_size": 8}, 5.0) is None
    assert point_from_server_info({"internal_states": [{"memory_usage": {}}]}, 5.0) is None


async def tail_into(path: Path, series: ThroughputSeries, logged: list[float], stop: asyncio.Event) -> None:
    """Follow the stand-in's log as the journal would deliver it, stamping lines on arrival."""
    offset, partial = 0, b""
    while not stop.is_set():
        data = (await asyncio.to_thread(path.read_bytes))[offset:]
        offset += len(data)
        *lines, partial = (partial + data).split(b"\n")
        for line in lines:
            point = series.add_line(line.decode(), time.time())
            if point is not None:
                logged.append(point.gen_throughput)
        await asyncio.sleep(0.02)


async def test_series_matches_a_load_run_on_the_stand_in(standin) -> None:
    # 100 tok/s per stream, a decode line every 20 steps (0.2 s): 8 streams make about 800 tok/s.
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "100", "COCKPIT_STANDIN_DECODE_LOG_INTERVAL": "20"})
    series, logged, polled, errors = ThroughputSeries(), [], [], []
    stop = asyncio.Event()
    tail = asyncio.create_task(tail_into(sp.log_path, series, logged, stop))
    poller = ServerInfoPoller(LocalHost(), urlsplit(sp.url).port, interval_s=0.1)

    def on_polled(point: ThroughputPoint) -> None:
        polled.append(point)
        series.add_polled(point)

    poll = asyncio.create_task(poller.run(on_polled, errors.append))
    config = LoadConfig(url=sp.url, concurrency=(8,), requests=32, warmup=2, input_len=32, output_len=100)
    [level] = await Runner(config).run()
    end = time.time()
    await asyncio.sleep(0.1)
    stop.set()
    poll.cancel()
    await asyncio.gather(tail, poll, return_exceptions=True)

    assert level.errors == 0 and errors == []
    measured = level.to_json()["output_tokens_per_s"]
    assert measured == pytest.approx(800, rel=0.1)
    # Points whose whole log interval lies inside the measured level.
    inside = [p for p in series if p.source == "log" and end - level.duration_s + 0.25 <= p.time <= end]
    assert len(inside) >= 10
    mean = sum(p.gen_throughput for p in inside) / len(inside)
    print(f"load measured {measured:.1f} tok/s, decode-line series {mean:.1f} tok/s over {len(inside)} points")
    assert mean == pytest.approx(measured, rel=0.1)
    assert max(p.running_req for p in inside) == 8
    # /server_info serves the number the last decode line printed; polled points entered the
    # series only before the first decode line, never while the lines were fresh.
    assert len(polled) >= 10
    assert {p.gen_throughput for p in polled} <= set(logged) | {0.0}
    assert any(p.gen_throughput > 0 for p in polled)
    first_log = next(p.time for p in series if p.source == "log")
    assert {p.source for p in series if first_log <= p.time <= end} == {"log"}


async def test_accept_length_from_both_sources(standin) -> None:
    sp = standin(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        env={
            "COCKPIT_STANDIN_TOKENS_PER_S": "150",
            "COCKPIT_STANDIN_ACCEPT_LEN": "3",
            "COCKPIT_STANDIN_DECODE_LOG_INTERVAL": "5",
        },
    )
    config = LoadConfig(url=sp.url, concurrency=(2,), requests=4, warmup=0, input_len=16, output_len=90)
    await Runner(config).run()
    series = ThroughputSeries()
    for line in sp.log().splitlines():
        series.add_line(line, time.time())
    assert len(series) >= 3 and {p.accept_len for p in series} == {3.0}
    point = await ServerInfoPoller(LocalHost(), urlsplit(sp.url).port).poll()
    assert point.accept_len == 3.0 and point.gen_throughput == series.latest.gen_throughput


async def test_a_server_that_does_not_answer_is_reported_not_fatal() -> None:
    errors: list[str] = []
    port = free_port()  # nothing listens there
    task = asyncio.create_task(
        ServerInfoPoller(LocalHost("gpu-3"), port, interval_s=0.01).run(lambda p: None, errors.append)
    )
    for _ in range(200):
        if len(errors) >= 2:
            break
        await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(errors) >= 2 and errors[0].startswith(f"127.0.0.1:{port} on gpu-3 did not answer:")


async def test_an_older_server_is_asked_at_get_server_info() -> None:
    asked: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        path = (await reader.readline()).split()[1].decode()
        while (await reader.readline()).strip():
            pass
        asked.append(path)
        body = b'{"internal_states": [{"last_gen_throughput": 26.0}]}' if path == "/get_server_info" else b"{}"
        status = b"200 OK" if path == "/get_server_info" else b"404 Not Found"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        poller = ServerInfoPoller(LocalHost(), port)
        assert (await poller.poll()).gen_throughput == 26.0
        assert (await poller.poll()).gen_throughput == 26.0
    finally:
        server.close()
        await server.wait_closed()
    assert asked == ["/server_info", "/get_server_info", "/get_server_info"]


async def test_a_server_info_nested_too_deep_is_no_json_and_the_poll_goes_on() -> None:
    """json.loads raises RecursionError past about a thousand levels: the poll of a server that
    answered so ended for the session."""
    errors: list[str] = []
    async with answering([b"[" * 100_000 + b"]" * 100_000]) as port:
        poll = asyncio.create_task(
            ServerInfoPoller(LocalHost("gpu-3"), port, interval_s=0.01).run(lambda p: None, errors.append)
        )
        try:
            await until(lambda: errors or poll.done(), 10)
            assert not poll.done(), poll.exception()
        finally:
            poll.cancel()
    assert errors[0] == "/server_info on gpu-3 did not answer with JSON"


async def test_the_incident_and_bench_read_of_server_info_takes_a_deep_answer_for_none() -> None:
    from cockpit.systemd.readiness import server_info

    async with answering([b"[" * 100_000 + b"]" * 100_000]) as port:
        assert await server_info(LocalHost("gpu-3"), "127.0.0.1", port) is None
