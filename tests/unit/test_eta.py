"""The sweep's time left, level by level (cockpit.load.eta)."""

from __future__ import annotations

from cockpit.load.eta import sweep_left_s


def test_a_sweep_at_its_first_slow_level_is_not_taken_for_a_long_one() -> None:
    """64 requests a level at 1, 2, 4, 8, 16, 32, each request 0.25 s: 32 s at concurrency 1,
    then 32 + 16 + 8 + 4 + 2 rounds. At 1% (the first request done) half a minute is left, not
    the minutes a straight line through the slow first level says."""
    plan = (1, 2, 4, 8, 16, 32)
    left = sweep_left_s(plan, 1, 64, 1, 0.25)
    assert left == (63 + 32 + 16 + 8 + 4 + 2) * 0.25  # 31.25 s
    assert sweep_left_s(plan, 32, 64, 64, 0.25) == 0.0  # the last level done
    assert sweep_left_s(plan, 8, 64, 60, 1.0) == 1 + 4 + 2  # a round of the last 4 at 8, then 16 and 32
    assert sweep_left_s(plan, 1, 64, 0, None) is None  # no request ended yet: nothing said
