"""The feed says when it trails the journal, by how many lines, and stops saying it once it
has caught up; a recorded journal never does."""

from __future__ import annotations

import asyncio

from cockpit.remote.local import LocalHost
from cockpit.session import journal_feed
from cockpit.session.journal_feed import JournalFeed, Lag
from cockpit.systemd.entry import JournalEntry

T0 = 1_796_031_916.0


def burst(start: float, count: int, rate: float) -> list[JournalEntry]:
    """`count` entries stamped by journald from `start`, `rate` a second."""
    return [
        JournalEntry(f"line {i}", cursor=f"c{start}-{i}", realtime_us=round((start + i / rate) * 1e6))
        for i in range(count)
    ]


def test_on_time_batches_are_not_behind_whatever_the_clocks_differ_by() -> None:
    lag = Lag()
    skew = 37.0  # the host's clock is 37 s behind the jump box's, and the link adds 20 ms
    for k in range(10):
        batch = burst(T0 + k, 1000, 10_000)
        assert lag.update(batch, now=T0 + k + 0.1 + skew + 0.02) == 0


def test_a_feed_late_by_3_s_at_10k_lines_a_second_is_30k_lines_behind() -> None:
    lag = Lag()
    lag.update(burst(T0, 1000, 10_000), now=T0 + 0.1 + 0.02)  # on time: the link's delay is learned
    behind = lag.update(burst(T0 + 0.1, 20_000, 10_000), now=T0 + 2.1 + 0.02 + 3.0)
    assert behind == 30_000  # 3 s at 10,000 a second, to two figures
    assert lag.update(burst(T0 + 2.1, 100, 10_000), now=T0 + 2.11 + 0.02 + 0.5) == 0  # 0.5 s: within


def test_the_rate_is_journalds_over_seconds_not_one_batchs_burst() -> None:
    """journald stamps entries in bursts: 2,000 entries a millisecond apart, once a second, is
    2,000 a second, not the 1,000,000 a second that one batch's own span would say."""
    lag = Lag()
    lag.update(burst(T0, 2000, 1_000_000), now=T0 + 0.01)
    for k in range(1, 6):
        behind = lag.update(burst(T0 + k, 2000, 1_000_000), now=T0 + k + 0.01 + 4.0)
    assert behind == 8_000  # 4 s behind at 2,000 a second


def test_the_feed_reports_behind_then_caught_up_when_the_stream_runs_dry(monkeypatch) -> None:
    monkeypatch.setattr(journal_feed, "CAUGHT_UP_S", 0.05)
    now = [T0 + 0.12]
    heard: list[int] = []
    feed = JournalFeed(LocalHost, "flood.service", on_behind=heard.append, clock=lambda: now[0])
    seen: list[int] = []
    feed.subscribe(lambda batch: seen.append(batch.behind))

    async def run() -> None:
        feed.deliver(burst(T0, 1000, 10_000))
        now[0] = T0 + 2.1 + 0.02 + 3.0
        feed.deliver(burst(T0 + 0.1, 20_000, 10_000))
        assert feed.behind == 30_000
        await asyncio.sleep(0.2)  # no more batches: the feed read all there was

    asyncio.run(run())
    assert seen == [0, 30_000]
    assert heard == [30_000, 0]
    assert feed.behind == 0
    assert len(feed.rows.rows) == 21_000  # behind or not, every line is in the rows


def test_a_recorded_journal_is_never_behind() -> None:
    feed = JournalFeed(None, "sglang-demo.service", clock=lambda: T0 + 86_400)
    feed.deliver(burst(T0, 10, 10))
    feed.deliver(burst(T0 - 3600, 10, 10))  # older stamps later: the recording's order, not lateness
    assert feed.behind == 0


def test_the_estimate_has_two_figures() -> None:
    assert [journal_feed.two_figures(x) for x in (7, 99.4, 123, 12_449, 12_550, 987_654)] == [
        7,
        99,
        120,
        12_000,
        13_000,
        990_000,
    ]


def test_how_late_the_journal_comes_paces_the_frames_and_ends_when_it_runs_dry() -> None:
    """`late_s` (what the app's frame pacing reads): the last batch's delay beyond the link's own,
    0 once nothing came for CAUGHT_UP_S, and always 0 for a recorded journal."""
    now = [T0 + 0.12]
    feed = JournalFeed(LocalHost, "flood.service", clock=lambda: now[0])
    feed.deliver(burst(T0, 1000, 10_000))  # on time: 0.02 s of link beyond the batch's last stamp
    assert feed.late_s() == 0.0
    now[0] = T0 + 0.2 + 0.02 + 0.4
    feed.deliver(burst(T0 + 0.1, 1000, 10_000))
    assert round(feed.late_s(), 3) == 0.4
    now[0] += journal_feed.CAUGHT_UP_S + 0.01
    assert feed.late_s() == 0.0
    recorded = JournalFeed(None, "sglang-demo.service", clock=lambda: T0 + 86_400)
    recorded.deliver(burst(T0, 10, 10))
    assert recorded.late_s() == 0.0
