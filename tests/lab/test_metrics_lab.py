"""/metrics as the passive series' source, through the session, on the lab's stand-in started with
--enable-metrics: the prefix-cache hit rate the cockpit computes from the counters against what
the stand-in says its cache served in the same run."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cockpit.config import Config
from cockpit.session import Session
from cockpit.sglang.server.health import READY
from cockpit.targets import Target
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit

UNIT, PORT = "sglang-metrics.service", 30300
REQUESTS = f"""
import json, urllib.request as u
for i in range(8):
    body = json.dumps({{"model": "x", "prompt": "a b c d e f g h i j " * (i + 1), "max_tokens": 16}}).encode()
    u.urlopen(u.Request("http://127.0.0.1:{PORT}/v1/completions", data=body,
                        headers={{"Content-Type": "application/json"}}), timeout=30).read()
print(u.urlopen("http://127.0.0.1:{PORT}/standin/stats").read().decode())
"""


@pytest.fixture
def metrics_unit(lab: LabHandle) -> Iterator[str]:
    flags, env = "--enable-metrics", "COCKPIT_STANDIN_PREFIX_CACHE_HIT=0.4"
    with standin_unit(lab, UNIT, PORT, flags=flags, env=env, restart=False) as name:
        yield name


async def test_metrics_feed_the_passive_series_with_the_cache_hit_rate(lab: LabHandle, metrics_unit: str) -> None:
    session = Session(Config(), Target(lab.name, metrics_unit))
    session.start()
    try:
        await until(lambda: session.status is not None and session.status.readiness == READY, 60)
        await until(lambda: any(p.source == "metrics" for p in session.passive), 30, "a /metrics point")
        stats = json.loads(lab.ssh("python3", "-c", REQUESTS).stdout)
        assert stats["prompt_tokens"] > 0

        def served() -> bool:
            latest = session.passive.latest
            return latest is not None and latest.source == "metrics" and bool(latest.cache_hit_rate)

        await until(served, 30, lambda: list(session.passive)[-3:])
        latest = session.passive.latest
        assert latest is not None and latest.cache_hit_rate is not None
        truth = stats["cached_tokens"] / stats["prompt_tokens"]  # what the stand-in's cache served
        assert abs(latest.cache_hit_rate - truth) < 0.02, (latest, stats)
        assert all(p.source == "metrics" for p in list(session.passive)[-3:])  # the decode lines add nothing meanwhile
    finally:
        await session.close()
