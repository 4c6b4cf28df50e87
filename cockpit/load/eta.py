"""How long a sweep has left, from the levels it has still to run.

A sweep's levels are not alike: at concurrency 1 its requests run one after another, at 32 they
run 32 at a time. A straight line through the progress so far (Textual's ProgressBar ETA) said
6 minutes at 1% of a one-minute sweep, in its slow first level. Here each level left takes
ceil(requests / concurrency) rounds of one request's time, the mean time of the requests
finished in the running level (longer at higher concurrency, so an estimate on the high side
until that level has run)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def sweep_left_s(
    plan: Sequence[int], running: int, requests: int, done_in_level: int, request_s: float | None
) -> float | None:
    """Seconds the sweep has left: the running level's requests not done, then every level after
    it; None until a request of the running level has ended (nothing to go on yet)."""
    if request_s is None or running not in plan:
        return None
    rest = list(plan)[list(plan).index(running) + 1 :]
    left_now = math.ceil(max(0, requests - done_in_level) / running)
    rounds = left_now + sum(math.ceil(requests / c) for c in rest)
    return rounds * request_s
