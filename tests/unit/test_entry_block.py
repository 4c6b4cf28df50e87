"""A follow's block of lines decodes into the same entries, shares and counts as its lines do.

`parse_json_block` decodes a block of ordinary lines in one call and reads any other block line
by line (`parse_json_lines`): whichever path a block takes, what comes out must be the same."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from cockpit.systemd import entry as entry_module
from cockpit.systemd.entry import LEFT_OUT, Entries, JournalEntry, parse_json_block, parse_json_lines

DATA = Path(__file__).resolve().parent.parent / "data"
JOURNALS = sorted(DATA.glob("journal-*.jsonl"))


def line(message: object = "m", **more: object) -> bytes:
    fields = {
        "__CURSOR": "s=1;i=2",
        "__REALTIME_TIMESTAMP": "1796031916702801",
        "_PID": "4100",
        "PRIORITY": "6",
        "_SYSTEMD_INVOCATION_ID": "a22a3779f22044fc84296a35556e7cf7",
        "_SYSTEMD_UNIT": "sglang-demo.service",
        "SYSLOG_IDENTIFIER": "python",
        "MESSAGE": message,
        **more,
    }
    return msgspec.json.encode(fields)


def same(block: bytes) -> tuple[Entries, Entries]:
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    return parse_json_block(block), parse_json_lines(lines)


@pytest.mark.parametrize("path", JOURNALS, ids=lambda p: p.name)
def test_real_journals_cut_anywhere_give_the_entries_their_lines_give(path: Path) -> None:
    """Journals the lab and real SGLang produced (systemd's own lines, byte-array messages,
    eight ranks' tracebacks), cut at random line ends as reads of a follow are."""
    data = path.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    cuts = sorted(random.Random(path.name).sample(ends[:-1], min(len(ends) - 1, 20)))
    whole = parse_json_lines(data.splitlines())
    got: list[JournalEntry] = []
    skipped = 0
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        block, lines = same(data[a:b])
        assert block == lines and block.skipped == lines.skipped
        got += block
        skipped += block.skipped
    assert got == list(whole) and skipped == whole.skipped and len(whole) > 10


def test_ordinary_lines_decode_whole_and_share_their_repeated_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [line(f"line {i}", _PID=str(4100 + i % 3)) for i in range(50)]
    block = b"\n".join(lines) + b"\n"
    monkeypatch.setattr(entry_module, "parse_json_lines", lambda _: pytest.fail("read line by line"))
    entries = parse_json_block(block)
    assert [e.message for e in entries] == [f"line {i}" for i in range(50)]
    assert entries[7] == JournalEntry(
        "line 7",
        "s=1;i=2",
        1796031916702801,
        4101,
        6,
        "a22a3779f22044fc84296a35556e7cf7",
        "sglang-demo.service",
        "python",
    )
    assert len({id(e.unit) for e in entries}) == len({id(e.invocation_id) for e in entries}) == 1
    assert entries[0].identifier is entries[49].identifier
    # shared with the lines read one by one too (one copy of a unit's name in a 200,000-line window)
    assert parse_json_lines([lines[0]])[0].unit is entries[0].unit


UNUSUAL = {
    "a cut line": b'{"MESSAGE": "cut',
    "a blank line": b"",
    "spaces alone": b"   ",
    "an array": b"[]",
    "a byte-array message": line([104, 105, 13]),
    "a null message": line(None),
    "no message": b'{"PRIORITY":"6"}',
    "systemd's word about the unit": line("Started x.", UNIT="sglang-demo.service", _PID="1"),
    "journald's word about the unit": line("Suppressed 9 messages", OBJECT_SYSTEMD_UNIT="sglang-demo.service"),
    "a PID that is no number": line("m", _PID="abc"),
    "a field stored twice": line(["a", "b"], _PID=["1", "2"]),
    "no priority": msgspec.json.encode({"MESSAGE": "m", "_PID": "7"}),
    "a host's OBJECT_SYSTEMD_UNIT of another type": line("m", OBJECT_SYSTEMD_UNIT=5),
    "a host's UNIT of another type": line("m", UNIT=True),
    "nested too deep": b'{"MESSAGE":"x","PRIORITY":"6","OTHER":' + b"[" * 5000 + b"]" * 5000 + b"}",
}


@pytest.mark.parametrize("odd", sorted(UNUSUAL))
def test_a_block_with_anything_unusual_gives_what_its_lines_give(odd: str) -> None:
    block = b"\n".join([line("before"), UNUSUAL[odd], line("after")]) + b"\n"
    got, lines = same(block)
    assert got == lines and got.skipped == lines.skipped
    assert [e.message for e in got][0] == "before" and got[-1].message == "after"
    assert all(e.node == 0 for e in got)  # a host's "node" key labels nothing on this side


def test_what_the_unusual_lines_become() -> None:
    """The general path's readings, through a block (the checks above only say both paths agree)."""
    got = parse_json_block(b"\n".join(UNUSUAL[k] for k in sorted(UNUSUAL)))
    by_message = {e.message: e for e in got}
    assert by_message["hi\r"].binary and by_message[LEFT_OUT].priority == 6
    assert by_message["Started x."].unit == "sglang-demo.service" and by_message["a\nb"].pid is None
    # cut, array, no message, nested: 4 lines skipped; blank and spaces are no lines
    assert got.skipped == 4


def test_two_entries_on_one_line_are_both_read_in_a_block_of_ordinary_lines() -> None:
    """The one difference the docstring owns: no journalctl prints such a line, and a host that
    does shows both its entries rather than one line skipped."""
    block = b"\n".join([line("before"), line("one") + b" " + line("two"), line("after")]) + b"\n"
    got, lines = same(block)
    assert [e.message for e in got] == ["before", "one", "two", "after"] and got.skipped == 0
    assert [e.message for e in lines] == ["before", "after"] and lines.skipped == 1


def test_a_last_line_without_its_newline_is_read() -> None:
    got, lines = same(line("first") + b"\n" + line("last"))
    assert [e.message for e in got] == ["first", "last"] == [e.message for e in lines]
