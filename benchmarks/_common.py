"""Helpers shared by the benchmarks: percentiles, a lab to run against, JSON output."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2))


def lab_up(name: str):
    from cockpit.lab.lab import Lab

    lab = Lab(name)
    lab.up(progress=lambda m: print(m, file=sys.stderr))
    return lab
