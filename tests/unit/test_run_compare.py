"""Comparing two recorded load runs (plain decoding and EAGLE-3 on the stand-in)."""

from __future__ import annotations

import json

import pytest

from cockpit.load.store import compare
from tests.conftest import ROOT

RUNS = ROOT / "tests" / "data" / "runs"


def run(name: str) -> dict:
    return json.loads((RUNS / f"{name}.json").read_text())


def test_comparison_ratios() -> None:
    rows = {r["concurrency"]: r for r in compare(run("plain"), run("eagle"))}
    assert set(rows) == {1, 2, 4, 8, 16, 32}
    assert rows[1]["per_stream_speedup"] == pytest.approx(66.0 / 40.0, rel=0.02)  # EAGLE-3: 1.65x per stream
    assert rows[32]["speedup"] == pytest.approx(1.0, rel=0.03)  # both at the server's 1200 tok/s capacity
