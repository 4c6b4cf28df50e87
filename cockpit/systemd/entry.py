"""One journal entry, parsed from a line of `journalctl -o json --all`.

Parsing is the hot path of following a busy unit and of folding a million-line export. A
full `--all` line carries two dozen fields of which the cockpit reads eight; msgspec decodes
straight into a struct of those eight (numbers converted from journald's strings on the way)
and skips the rest without building them, which is 1.5 to 2.3 times as fast as decoding the
whole object with orjson. The unit, identifier and invocation ID repeat on every entry, so they are shared rather
than held once per entry (about 200 bytes an entry saved).

`MESSAGE` is an array of byte values when it holds invalid UTF-8 or control characters
(the `\\r` of a progress bar); it is decoded with replacement, and `binary` says so.
A field journald stored several times comes as an array of its values. Those lines, and
systemd's own messages about a unit, take the slower general path.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType, field

UNKNOWN_PRIORITY = 8  # a line of text says no syslog priority (they are 0-7): its record's priority is None


class JournalEntry(msgspec.Struct, gc=False):
    """A million of these stay alive in a folded export. A struct built in C and untracked by the
    cyclic collector (it holds only strings and numbers) is built in 150 ns, where a slotted
    dataclass takes 410, and is 88 bytes against 104.

    Each field is named as journalctl names it, so that a follow's block of ordinary lines
    decodes straight into entries (`parse_json_block`). `binary` and `node` are this side's
    own; their wire names are the keys that send a line to the general path (`entry_from_fields`),
    with a type no such line carries: a unit's name, a string, fails to decode as either, so
    a block holding systemd's or journald's word about the unit is read line by line, and
    one decoded with either set (a host's `true` or `5`) is read so too."""

    message: str = field(name="MESSAGE")
    cursor: str | None = field(name="__CURSOR", default=None)
    realtime_us: int | None = field(name="__REALTIME_TIMESTAMP", default=None)  # microseconds since the epoch
    pid: int | None = field(name="_PID", default=None)
    priority: int = field(name="PRIORITY", default=6)
    invocation_id: str | None = field(name="_SYSTEMD_INVOCATION_ID", default=None)
    unit: str | None = field(name="_SYSTEMD_UNIT", default=None)  # UNIT on systemd's messages about a unit
    identifier: str | None = field(name="SYSLOG_IDENTIFIER", default=None)
    # MESSAGE came as bytes (invalid UTF-8 or control characters)
    binary: bool = field(name="UNIT", default=False)
    # the node rank of the host it came from, where a deployment's journals are merged
    node: int = field(name="OBJECT_SYSTEMD_UNIT", default=0)

    def logged_at(self) -> float:
        """When the line was logged, in seconds since the epoch: now, for a line without
        journald's stamp (one just read from a live stream that lacked it)."""
        return self.realtime_us / 1e6 if self.realtime_us is not None else time.time()

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "cursor": self.cursor,
            "realtime_us": self.realtime_us,
            "pid": self.pid,
            "priority": self.priority,
            "invocation_id": self.invocation_id,
            "unit": self.unit,
            "identifier": self.identifier,
        }


_MEMO_LIMIT = 65536
# One copy of each unit name, identifier, invocation ID; parse_entry's fast path shares a
# missing field too, so None is a key (mapped to itself).
_strings: dict[str | None, str | None] = {}
share = _strings.setdefault


def trim_shared() -> None:
    """Forget the shared strings once they are _MEMO_LIMIT many, so that the memo stays bounded;
    called once a batch, not per entry."""
    if len(_strings) >= _MEMO_LIMIT:
        _strings.clear()


class _Wire(msgspec.Struct, gc=False):
    """The fields of a line the cockpit reads. UNIT is only on systemd's messages about a unit,
    OBJECT_SYSTEMD_UNIT on another program's (journald's `Suppressed N messages from U`)."""

    message: str | list | None | UnsetType = field(name="MESSAGE", default=UNSET)
    cursor: str | None = field(name="__CURSOR", default=None)
    realtime_us: int | None = field(name="__REALTIME_TIMESTAMP", default=None)
    pid: int | None = field(name="_PID", default=None)
    priority: int | None = field(name="PRIORITY", default=None)
    invocation_id: str | None = field(name="_SYSTEMD_INVOCATION_ID", default=None)
    unit: str | None = field(name="_SYSTEMD_UNIT", default=None)
    identifier: str | None = field(name="SYSLOG_IDENTIFIER", default=None)
    about_unit: str | None | UnsetType = field(name="UNIT", default=UNSET)
    about_object: str | None | UnsetType = field(name="OBJECT_SYSTEMD_UNIT", default=UNSET)


# What stands in a row for a MESSAGE an export left out: said where the line was, not a blank row.
LEFT_OUT = "[journalctl left this message out: over 4096 bytes, a field comes whole only with `-o json --all`]"

_decode_wire = msgspec.json.Decoder(_Wire, strict=False).decode  # strict=False: "4100" -> 4100
_decode_any = msgspec.json.Decoder().decode
# What systemd counts as a control character (is_unicode_control): a value holding one is bytes.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _message_from(value: Any) -> tuple[str, bool]:
    """MESSAGE as text, whatever shape a writer gave it: journald sends a string, an array of
    byte values (invalid UTF-8 or control characters), or an array of strings (the field
    stored twice); a number or an object written by some other tool is shown as its JSON."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, bytes):
        # journalctl -o export sends any value but one printable line as bytes, json only one
        # that is no printable text: a newline or a tab leaves it text, as json says.
        try:
            text = value.decode()
        except UnicodeDecodeError:
            return value.decode("utf-8", "replace"), True
        return text, _CONTROL.search(text) is not None
    if value is None:  # journalctl without --all sends a field over 4096 bytes as null
        return LEFT_OUT, False
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value), False  # MESSAGE stored more than once
    if isinstance(value, list) and value and all(isinstance(v, (str, bytes)) for v in value):
        parts = [_message_from(v) for v in value]  # ...some of them as bytes (export)
        return "\n".join(text for text, _ in parts), any(binary for _, binary in parts)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 256 for v in value):
        return bytes(value).decode("utf-8", "replace"), True
    return msgspec.json.encode(value).decode(), False


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _shared(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    trim_shared()
    return share(value, value)


def entry_from_fields(fields: dict[str, Any]) -> JournalEntry:
    """Any other field types, missing fields, byte-array messages, systemd's own messages."""
    message, binary = _message_from(fields.get("MESSAGE"))
    pid = fields.get("_PID")
    pid_number = _int(pid) if isinstance(pid, (str, int)) else None
    prio = fields.get("PRIORITY")
    priority = _int(prio) if isinstance(prio, (str, int)) else None
    cursor = fields.get("__CURSOR")
    return JournalEntry(
        message=message,
        cursor=cursor if isinstance(cursor, str) else None,
        realtime_us=_int(fields.get("__REALTIME_TIMESTAMP")),
        pid=pid_number,
        priority=priority if priority is not None else 6,
        # journald's (or another program's) entry about the unit names its process in OBJECT_*:
        # it belongs to that invocation of the unit, not to the writer's own.
        invocation_id=_shared(
            fields.get("OBJECT_SYSTEMD_INVOCATION_ID")
            or fields.get("_SYSTEMD_INVOCATION_ID")
            or fields.get("INVOCATION_ID")
        ),
        unit=_shared(fields.get("OBJECT_SYSTEMD_UNIT") or fields.get("UNIT") or fields.get("_SYSTEMD_UNIT")),
        identifier=_shared(fields.get("SYSLOG_IDENTIFIER")),
        binary=binary,
    )


def parse_entry(line: str | bytes) -> JournalEntry | None:
    """The entry of one `journalctl -o json` line; None for any line that is not a JSON
    object with a MESSAGE (a cut line, plain text, other JSON), and for one nested deeper than
    the decoder recurses (a thousand levels: a host's journalctl never prints one, a hostile
    host's can, and the RecursionError would end a whole batch)."""
    try:
        wire = _decode_wire(line)
    except msgspec.ValidationError:  # JSON, but not an object, or a field of another type (PIDs)
        try:
            fields = _decode_any(line)
        except RecursionError:
            return None
        return entry_from_fields(fields) if isinstance(fields, dict) and "MESSAGE" in fields else None
    except (msgspec.DecodeError, RecursionError):
        return None
    message = wire.message
    if (
        message.__class__ is not str
        or wire.about_unit is not UNSET
        or wire.about_object is not UNSET
        or wire.priority is None
    ):
        return None if message is UNSET else entry_from_fields(_decode_any(line))
    invocation, unit, identifier = wire.invocation_id, wire.unit, wire.identifier
    return JournalEntry(
        message,
        wire.cursor,
        wire.realtime_us,
        wire.pid,
        wire.priority,
        share(invocation, invocation),
        share(unit, unit),
        share(identifier, identifier),
    )


def parse_json_line(line: str | bytes) -> JournalEntry:
    """One `journalctl -o json` line -> entry. Raises ValueError on any other line."""
    entry = parse_entry(line)
    if entry is None:
        raise ValueError("not a journal entry: a JSON object with a MESSAGE")
    return entry


class Entries(list[JournalEntry]):
    """The entries of a run of `journalctl -o json` lines, and how many of its lines held
    something that was not one (`skipped`): a line cut by a dropped connection, or one nested
    too deep to read. journalctl prints none of those itself, so the count says what the host
    sent that was not shown."""

    skipped: int = 0


_decode_block = msgspec.json.Decoder(JournalEntry, strict=False).decode_lines


def parse_json_block(block: bytes) -> Entries:
    """The entries of a run of `journalctl -o json` lines as one read of a follow brought them,
    as `parse_json_lines` reads its lines.

    A block of ordinary lines (the whole of a flood) is decoded in one call straight into
    entries, with no split into lines and no second struct: 0.93 us a line of a serving
    server's journal against 1.66 (benchmarks/bench_fold.py --format serving). A block with
    anything else in it (a line that is no entry, a byte-array message, systemd's word about
    the unit) is read line by line, so each of its lines is taken, shared and counted as
    `parse_json_lines` does. One difference: a line holding two whole entries (no journalctl
    prints one) gives both, where the line-by-line reading skips it as no entry."""
    try:
        entries = _decode_block(block)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass
    else:
        if _shared_in_place(entries):
            return Entries(entries)
    return parse_json_lines(block.split(b"\n"))  # the empty piece after a last newline is no line


def _shared_in_place(entries: list[JournalEntry]) -> bool:
    """One copy of each unit name, invocation and identifier among `entries`, as `parse_entry`
    shares them (a run of lines of one start repeats the same three); False when an entry
    was decoded with this side's own fields set (JournalEntry's docstring says why)."""
    trim_shared()
    invocation = unit = identifier = None
    for entry in entries:
        if entry.binary or entry.node:
            return False
        if (value := entry.invocation_id) is not invocation:
            if value == invocation:
                entry.invocation_id = invocation
            else:
                invocation = entry.invocation_id = share(value, value)
        if (value := entry.unit) is not unit:
            if value == unit:
                entry.unit = unit
            else:
                unit = entry.unit = share(value, value)
        if (value := entry.identifier) is not identifier:
            if value == identifier:
                entry.identifier = identifier
            else:
                identifier = entry.identifier = share(value, value)
    return True


def parse_json_lines(lines: Iterable[str | bytes]) -> Entries:
    """Entries of the lines that are journal objects; blank lines are passed over, and broken
    lines skipped and counted, never fatal.

    The cyclic garbage collector is paused meanwhile: a batch makes no cycles, and with a
    large window of entries alive its passes cost more than the parsing."""
    out = Entries()
    append, parse = out.append, parse_entry
    skipped = 0
    trim_shared()
    collecting = gc.isenabled()
    gc.disable()
    try:
        for line in lines:
            entry = parse(line)
            if entry is not None:
                append(entry)
            elif line.strip():
                skipped += 1
    finally:
        if collecting:
            gc.enable()
    out.skipped = skipped
    return out
