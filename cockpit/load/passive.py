"""Passive throughput: what the server says it is doing, with no load run of ours going.

Three sources, one shown at a time (each point says which). `/metrics`, where the server runs
with `--enable-metrics`, is the first: the session polls it (every METRICS_S, 5 s), and it says
the throughput, the running and queued requests, the KV cache's use, the speculative accept
length and rate, and the prefix cache hit rate (cockpit.sglang.server.metrics); while it answers,
decode lines add nothing. Without it, SGLang's decode lines (`gen throughput (token/s)`,
`#running-req`, `accept len`), printed every `decode_log_interval` steps, come with the journal
the cockpit follows anyway. `/server_info`'s `internal_states` (`last_gen_throughput`,
`avg_spec_accept_length`, one entry per data-parallel rank) can be polled (`ServerInfoPoller`)
for when the lines do not come: `--log-level warning` hides them, or a long log interval leaves
the series still while 0.5.23 decays `last_gen_throughput` to 0 once decode stops; the session
does not poll it. The value it serves is the one the last decode line printed, so a polled
point is dropped while decode lines are fresh: the two never draw the same number twice.

With data-parallel attention every DP rank prints its own decode line, for its share of the
requests: a point is the sum of each rank's latest line, so the series shows the server.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from cockpit.remote.base import Host, HostError
from cockpit.sglang.server.logparse import DecodeStats, parse
from cockpit.sglang.server.metrics import Reading, reading
from cockpit.systemd.entry import JournalEntry


@dataclass(frozen=True, slots=True)
class ThroughputPoint:
    time: float  # epoch seconds: the journal entry's time, or when the poll was answered
    gen_throughput: float  # output tokens/s of the whole server
    running_req: int | None  # /server_info does not say
    accept_len: float | None  # speculative decoding only
    source: Literal["log", "server_info", "metrics"]
    queued: int | None = None  # only /metrics says these
    token_usage: float | None = None
    accept_rate: float | None = None
    cache_hit_rate: float | None = None  # cached / prompt tokens since the previous reading

    def words(self) -> str:
        """`4,352 tok/s · running 32 · queued 3 · KV 13% · accept 2.71 (rate 0.68) · prefix cache hit 41%`."""
        parts = [f"{self.gen_throughput:,.0f} tok/s"]
        if self.running_req is not None:
            parts.append(f"running {self.running_req}")
        if self.queued is not None:
            parts.append(f"queued {self.queued}")
        if self.token_usage is not None:
            parts.append(f"KV {100 * self.token_usage:.0f}%")
        if self.accept_len is not None:
            parts.append(
                f"accept {self.accept_len:.2f}" + (f" (rate {self.accept_rate:.2f})" if self.accept_rate else "")
            )
        if self.cache_hit_rate is not None:
            parts.append(f"prefix cache hit {100 * self.cache_hit_rate:.0f}%")
        return " · ".join(parts)


def _dp_of(rank: str) -> str | None:
    """The DP label of a rank prefix ("" without DP); None for a later pipeline stage, whose
    line repeats the first stage's tokens."""
    dp = ""
    for part in rank.split():
        if part.startswith("PP") and part != "PP0":
            return None
        if part.startswith("DP"):
            dp = part
    return dp


class ThroughputSeries:
    """A bounded series of the server's output throughput, fed from the journal and the poller."""

    def __init__(self, maxlen: int = 600, fresh_s: float = 10.0) -> None:
        self.points: collections.deque[ThroughputPoint] = collections.deque(maxlen=maxlen)
        self.fresh_s = fresh_s  # how long a decode line counts as the current word
        self._ranks: dict[str, tuple[float, DecodeStats]] = {}
        self._last_log = float("-inf")
        self._last_metrics = float("-inf")

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[ThroughputPoint]:
        return iter(self.points)

    @property
    def latest(self) -> ThroughputPoint | None:
        return self.points[-1] if self.points else None

    def values(self) -> list[float]:
        """The throughput alone, oldest first: what a sparkline draws."""
        return [p.gen_throughput for p in self.points]

    def add_entries(self, entries: list[JournalEntry]) -> list[ThroughputPoint]:
        """A batch's decode lines, at most one point per rank per second of journald's time (the
        rank's last line in it): a flood of decode lines costs a substring search a line, and the
        series keeps the resolution a sparkline draws. A real server prints a decode line per
        rank every `decode_log_interval` steps, so nothing is dropped there."""
        latest: dict[tuple[str, int], JournalEntry] = {}
        for entry in entries:
            message = entry.message
            if "Decode batch" not in message:
                continue
            head = message[message.find("[") + 1 : message.find("] ")].split(" ", 2)  # date, time, ranks
            key = (head[2] if len(head) > 2 else "", (entry.realtime_us or 0) // 1_000_000)
            latest.pop(key, None)  # the last line of the rank and second, in arrival order
            latest[key] = entry
        return [point for entry in latest.values() if (point := self.add_entry(entry)) is not None]

    def add_entry(self, entry: JournalEntry) -> ThroughputPoint | None:
        """A journal entry; only decode lines add a point."""
        if "Decode batch" not in entry.message:  # one C search: most lines of a flood are not decode lines
            return None
        return self.add_line(entry.message, entry.logged_at())

    def add_line(self, line: str, when: float) -> ThroughputPoint | None:
        event = parse(line)
        return self.add_decode(event, when) if isinstance(event, DecodeStats) else None

    def add_decode(self, event: DecodeStats, when: float) -> ThroughputPoint | None:
        dp = _dp_of(event.rank)
        if dp is None or when - self._last_metrics <= self.fresh_s:  # /metrics is the word while it answers
            return None
        self._ranks[dp] = (when, event)
        current = [e for t, e in self._ranks.values() if when - t <= self.fresh_s]
        accepts = [e.accept_len for e in current if e.accept_len is not None]
        point = ThroughputPoint(
            when,
            sum(e.gen_throughput for e in current),
            sum(e.running_req for e in current),
            sum(accepts) / len(accepts) if accepts else None,
            "log",
        )
        self._last_log = when
        self.points.append(point)
        return point

    def add_polled(self, point: ThroughputPoint) -> bool:
        """A polled point: /metrics always (the first source where the server has it), a
        /server_info one only when no decode line is fresh."""
        if point.source == "metrics":
            self._last_metrics = point.time
        elif point.time - self._last_log <= self.fresh_s:
            return False
        self.points.append(point)
        return True


def point_from_server_info(info: dict, when: float) -> ThroughputPoint | None:
    """`internal_states` (a list, one per DP rank; a dict in some releases) -> a point."""
    states = info.get("internal_states")
    if isinstance(states, dict):
        states = [states]
    if not isinstance(states, list):
        return None
    rates = [
        s["last_gen_throughput"]
        for s in states
        if isinstance(s, dict) and isinstance(s.get("last_gen_throughput"), (int, float))
    ]
    if not rates:
        return None
    accepts = [
        s["avg_spec_accept_length"]
        for s in states
        if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), (int, float))
    ]
    return ThroughputPoint(
        when, float(sum(rates)), None, sum(accepts) / len(accepts) if accepts else None, "server_info"
    )


class Poller:
    """Asks the server one of its own endpoints through the host (it listens on the host's
    loopback) every `interval_s`, and turns each answer into a point."""

    path = "/"

    def __init__(
        self, host: Host, port: int, *, address: str = "127.0.0.1", interval_s: float = 2.0, timeout_s: float = 5.0
    ) -> None:
        self.host = host
        self.port = port
        self.address = address
        self.interval_s = interval_s
        self.timeout_s = timeout_s

    async def _get(self, path: str) -> tuple[int, bytes]:
        try:
            return await self.host.http_request("GET", self.address, self.port, path, timeout=self.timeout_s)
        except (OSError, EOFError, asyncio.TimeoutError) as e:  # EOFError: cut off mid-answer
            raise HostError(
                f"{self.address}:{self.port} on {self.host.name} did not answer: {e or type(e).__name__}"
            ) from None

    async def poll(self) -> ThroughputPoint | None:
        """One request; raises HostError (with a sentence) when the server cannot be asked."""
        raise NotImplementedError

    async def run(self, on_point: Callable[[ThroughputPoint], None], on_error: Callable[[str], None]) -> None:
        """Until cancelled. A failed poll (the server restarting, say) is reported, not fatal."""
        while True:
            try:
                point = await self.poll()
            except HostError as e:
                on_error(str(e))
            else:
                if point is not None:
                    on_point(point)
            await asyncio.sleep(self.interval_s)


class ServerInfoPoller(Poller):
    """`/server_info`'s `internal_states`, for a server whose decode lines do not come.

    Older releases served it only at `/get_server_info`, which later ones keep but log a
    deprecation warning for on every call: it is asked only after a 404.
    """

    path = "/server_info"

    async def poll(self) -> ThroughputPoint | None:
        status, body = await self._get(self.path)
        if status == 404 and self.path == "/server_info":
            self.path = "/get_server_info"
            status, body = await self._get(self.path)
        if status != 200:
            raise HostError(f"{self.path} on {self.host.name} answered HTTP {status}")
        try:
            info = json.loads(body)
        except (ValueError, RecursionError):  # nested deeper than the decoder recurses: no JSON it reads
            raise HostError(f"{self.path} on {self.host.name} did not answer with JSON") from None
        return point_from_server_info(info, time.time()) if isinstance(info, dict) else None


class MetricsPoller(Poller):
    """`/metrics` of a server started with `--enable-metrics` (cockpit.sglang.server.metrics)."""

    path = "/metrics"

    def __init__(self, host: Host, port: int, **kwargs: Any) -> None:
        super().__init__(host, port, **kwargs)
        self.before: Reading | None = None

    async def poll(self) -> ThroughputPoint | None:
        status, body = await self._get(self.path)
        if status != 200:
            raise HostError(f"/metrics on {self.host.name} answered HTTP {status} (is --enable-metrics set?)")
        now = reading(body.decode(errors="replace"), time.time())
        if now is None:
            return None
        hit, self.before = now.cache_hit_rate(self.before), now
        return point_from_reading(now, hit)


def point_from_reading(now: Reading, cache_hit_rate: float | None) -> ThroughputPoint:
    def count(value: float | None) -> int | None:
        return None if value is None else round(value)

    return ThroughputPoint(
        now.at,
        now.gen_throughput or 0.0,
        count(now.running),
        now.accept_len,
        "metrics",
        queued=count(now.queued),
        token_usage=now.token_usage,
        accept_rate=now.accept_rate,
        cache_hit_rate=cache_hit_rate,
    )
