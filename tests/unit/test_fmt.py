"""The words numbers are said in."""

from __future__ import annotations

from cockpit.fmt import count


def test_a_count_says_its_noun_in_the_singular_for_one() -> None:
    """The fleet's footer said `1 hosts`."""
    assert (count(1, "host"), count(2, "host"), count(0, "unit")) == ("1 host", "2 hosts", "0 units")
