"""Assertions shared by the fold tests, here and against the lab's real journals."""

from __future__ import annotations

from collections import Counter

from cockpit.traceback import Line, Traceback


def lines_of(record: Line | Traceback) -> list[str]:
    return record.lines if isinstance(record, Traceback) else [record.text]


def assert_every_line_once(inputs: list[str], records: list[Line | Traceback]) -> None:
    """Every input line is in exactly one record, each record's lines in input order, and
    records in the order of their first lines."""
    got = Counter(line for r in records for line in lines_of(r))
    want = Counter(inputs)
    assert got == want, f"lost: {list((want - got).elements())[:5]}, extra: {list((got - want).elements())[:5]}"
    unused: dict[str, list[int]] = {}
    for position, line in enumerate(inputs):
        unused.setdefault(line, []).append(position)
    firsts = []
    for record in records:
        position: int | None = -1
        for i, line in enumerate(lines_of(record)):
            position = next((p for p in unused[line] if p > position), None)
            assert position is not None, f"out of input order: {line[:80]!r} in {lines_of(record)[0][:80]!r}"
            unused[line].remove(position)
            if i == 0:
                firsts.append(position)
    assert firsts == sorted(firsts), "records are not in the order of their first lines"


def assert_same(got: dict, want: dict) -> None:
    """A record's JSON against Python's own account of the exception (tests/data/fold/truth.py)."""
    assert (got["exception"], got["message"]) == (want["exception"], want["message"]), got["lines"][:3]
    frames = [[f["file"], f["line"], f["function"], f["code"]] for f in got["frames"]]
    assert frames == want["frames"], f"{frames} != {want['frames']}"
    location = got.get("location")
    assert ([location["file"], location["line"], location["code"]] if location else None) == want["location"]
    assert all(isinstance(f["function"], str) for f in got["frames"])  # the contract: a frame has a function
    assert got.get("relation") == want["relation"]
    assert len(got["chained"]) == len(want["chained"]), [c["exception"] for c in got["chained"]]
    for g, w in zip(got["chained"], want["chained"]):
        assert_same(g, w)
    assert len(got["sub_exceptions"]) == len(want["sub_exceptions"])
    for g, w in zip(got["sub_exceptions"], want["sub_exceptions"]):
        assert_same(g, w)
