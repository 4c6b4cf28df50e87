"""The follow's format: `journalctl -o export` read into the same entries as its json.

tests/data/journal-edge.export and journal-edge.jsonl are one run of tests/data/journal-edge-writer.py
as a unit in the lab (systemd 252), read with the follower's fields in each format: plain
lines, colours, a `\\r`, invalid UTF-8, a tab, a 5,000-byte line, repeated lines, native
messages with newlines, a field stored twice, a message that holds a whole forged entry after
two newlines, a binary field the cockpit does not read, and systemd's own lines about the unit.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from cockpit.systemd import export
from cockpit.systemd.entry import JournalEntry, parse_json_block
from cockpit.systemd.export import parse_export

DATA = Path(__file__).resolve().parent.parent / "data"
EXPORT = (DATA / "journal-edge.export").read_bytes()
JSON = parse_json_block((DATA / "journal-edge.jsonl").read_bytes())


def binary(name: bytes, value: bytes) -> bytes:
    return name + b"\n" + len(value).to_bytes(8, "little") + value + b"\n"


def test_a_real_export_gives_the_entries_its_json_gives() -> None:
    entries, taken = parse_export(EXPORT)
    assert entries == JSON and taken == len(EXPORT) and entries.skipped == 0
    assert len(entries) == 19
    forged = next(e for e in entries if "__CURSOR=forged" in e.message)
    assert forged.unit == "journal-edge.service" and forged.cursor != "forged"  # the message stays a message
    assert [e.message for e in entries if e.identifier == "native"][:2] == ["two\nlines", "first\nsecond"]


def test_cut_at_every_byte_the_entries_are_the_same() -> None:
    """Reads of a follow end anywhere, inside a field sent as bytes too (its size, its bytes,
    a size whose first byte is a newline): what is taken is whole entries, the rest waits."""
    for cut in range(len(EXPORT) + 1):
        first, taken = parse_export(EXPORT[:cut])
        rest = EXPORT[taken:]
        second, taken_after = parse_export(rest)
        assert [*first, *second] == JSON and taken_after == len(rest), cut
        assert first.skipped == second.skipped == 0


def test_random_reads_joined_as_the_follower_joins_them() -> None:
    rng = random.Random(7)
    got: list[JournalEntry] = []
    rest, at = b"", 0
    while at < len(EXPORT):
        size = rng.randint(1, 3000)
        buffer = rest + EXPORT[at : at + size]
        at += size
        entries, taken = parse_export(buffer)
        got += entries
        rest = buffer[taken:]
    assert got == JSON and rest == b""


@pytest.mark.parametrize(
    "broken",
    [
        b"__CURSOR=x\nMESSAGE\nAAAAAAAAAAAAAAAA\n\n",
        b"__CURSOR=x\nMESSAGE\n" + (1 << 62).to_bytes(8, "little") + b"\n\n",  # the hostile lab test's
        b"__CURSOR=x\n" + binary(b"MESSAGE", b"12345")[:-1] + b"X\n\n",
        b"NO EQUALS HERE\nMESSAGE=m\n\n",
    ],
)
def test_a_size_journald_cannot_hold_passes_over_that_entry_only(broken: bytes) -> None:
    """A hostile host's export: a field name without `=` and then text (a size of
    0x4141414141414141), a size of 4 EiB, or a size whose bytes are not followed by a newline;
    read whole, and in two reads cut at every byte."""
    first, last = EXPORT.split(b"\n\n")[1] + b"\n\n", EXPORT.split(b"\n\n")[2] + b"\n\n"
    stream = first + broken + last
    entries, taken = parse_export(stream)
    assert entries == JSON[1:3] and entries.skipped == 1 and taken == len(stream)
    for cut in range(len(stream) + 1):
        head, taken = parse_export(stream[:cut])
        tail, taken_after = parse_export(stream[taken:])
        assert [*head, *tail] == JSON[1:3] and head.skipped + tail.skipped == 1, cut
        assert taken_after == len(stream) - taken, cut


def test_an_entry_without_a_message_is_counted_not_shown() -> None:
    entries, taken = parse_export(b"__CURSOR=x\nPRIORITY=6\n\n" + EXPORT)
    assert entries == JSON and entries.skipped == 1 and taken == len(EXPORT) + 23


@pytest.mark.parametrize("tail", [b"MESSAGE\n", b"MESSAGE\n\n", b"MESSAGE\n\n\x00", b"MESSAGE=half"])
def test_an_entry_still_arriving_is_left_for_the_next_read(tail: bytes) -> None:
    """`MESSAGE\\n\\n` is the start of a field sent as bytes whose size begins with a newline
    (ten bytes), not an entry's end."""
    entries, taken = parse_export(EXPORT + b"__CURSOR=y\n" + tail)
    assert entries == JSON and taken == len(EXPORT)


@pytest.mark.parametrize(("second", "is_binary"), [(b"two\nlines", False), (b"\x1b[0mcoloured", True)])
def test_a_message_stored_twice_one_value_as_bytes_is_binary_as_json_would_say(second: bytes, is_binary: bool) -> None:
    """json sends a value with a newline as text and one with a control character as bytes;
    export sends both as bytes: the entry says what json would."""
    head = b"__CURSOR=c\n__REALTIME_TIMESTAMP=1\n__MONOTONIC_TIMESTAMP=1\n_BOOT_ID=b\n"
    entries, _ = parse_export(head + b"MESSAGE=one\n" + binary(b"MESSAGE", second) + b"\n")
    assert [(e.message, e.binary) for e in entries] == [("one\n" + second.decode(), is_binary)]


def test_the_expression_python_3_10_builds_reads_as_3_11s(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.10 has no possessive quantifiers (`*+` is an error there): the module builds its
    expression without them there, and it must find the same entries."""
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    spec = importlib.util.spec_from_file_location("export_as_on_3_10", export.__file__)
    assert spec is not None and spec.loader is not None
    as_on_3_10 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(as_on_3_10)
    plain, possessive = as_on_3_10._ENTRY, export._ENTRY
    assert "*+" not in plain.pattern and "++" not in plain.pattern and "*+" in possessive.pattern
    text = EXPORT.decode("utf-8", "replace")  # its fields sent as bytes read as text too: any input
    assert plain.findall(text) == possessive.findall(text) and len(plain.findall(text)) >= 19
