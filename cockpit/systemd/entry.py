"""One journal entry, parsed from a line of `journalctl -o json --all`.

Parsing is the hot path of following a busy unit and of folding a million-line export, so
the common case reads only the fields the cockpit uses, straight from the line: journald
writes flat objects whose keys are plain names, so `"KEY":` can only occur as a key (a
quote inside a value is always escaped). Anything unusual falls back to `json.loads`.

`MESSAGE` is an array of byte values when it holds invalid UTF-8 or control characters
(the `\\r` of a progress bar); it is decoded with replacement, and `binary` says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any


@dataclass(slots=True)
class JournalEntry:
    message: str
    cursor: str | None = None
    realtime_us: int | None = None  # __REALTIME_TIMESTAMP, microseconds since the epoch
    pid: int | None = None
    priority: int = 6
    invocation_id: str | None = None
    unit: str | None = None  # UNIT (systemd's messages about a unit), else _SYSTEMD_UNIT
    identifier: str | None = None  # SYSLOG_IDENTIFIER
    binary: bool = False  # MESSAGE came as bytes (invalid UTF-8 or control characters)

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "cursor": self.cursor, "realtime_us": self.realtime_us,
                "pid": self.pid, "priority": self.priority, "invocation_id": self.invocation_id,
                "unit": self.unit, "identifier": self.identifier}


def _field(line: str, key: str) -> str | None:
    """A plain string value `"KEY":"value"` (no escapes: ids, numbers, cursors)."""
    i = line.find(key)
    if i < 0:
        return None
    i += len(key)
    j = line.find('"', i)
    return line[i:j] if j >= 0 else None


def _message_from(value: Any) -> tuple[str, bool]:
    if isinstance(value, str):
        return value, False
    if isinstance(value, list):
        try:
            return bytes(value).decode("utf-8", "replace"), True
        except (ValueError, TypeError):
            return "", True
    return "", False  # null: a field journald did not send (without --all, over 4096 bytes)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_json_line(line: str | bytes) -> JournalEntry:
    """One `journalctl -o json` line -> entry. Raises ValueError on a line that is not JSON."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    i = line.find('"MESSAGE":')
    if i >= 0 and line.find('"MESSAGE" :') < 0:
        i += 10
        if line.startswith('"', i):
            message, _ = scanstring(line, i + 1)
            binary = False
        elif line.startswith("[", i):
            end = line.index("]", i)
            message, binary = _message_from(json.loads(line[i:end + 1]))
        else:
            message, binary = "", False
        prio = _field(line, '"PRIORITY":"')
        return JournalEntry(
            message=message,
            cursor=_field(line, '"__CURSOR":"'),
            realtime_us=_int(_field(line, '"__REALTIME_TIMESTAMP":"')),
            pid=_int(_field(line, '"_PID":"')),
            priority=_int(prio) if prio is not None else 6,
            invocation_id=_field(line, '"_SYSTEMD_INVOCATION_ID":"') or _field(line, '"INVOCATION_ID":"'),
            unit=_field(line, '"UNIT":"') or _field(line, '"_SYSTEMD_UNIT":"'),
            identifier=_slow_string(line, '"SYSLOG_IDENTIFIER":'),
            binary=binary,
        )
    return from_fields(json.loads(line))


def _slow_string(line: str, key: str) -> str | None:
    i = line.find(key)
    if i < 0 or not line.startswith('"', i + len(key)):
        return None
    return scanstring(line, i + len(key) + 1)[0]


def from_fields(fields: dict[str, Any]) -> JournalEntry:
    """An entry from an already decoded journal object (any formatting, null fields)."""
    if not isinstance(fields, dict):
        raise ValueError("a journal entry must be a JSON object")
    message, binary = _message_from(fields.get("MESSAGE"))
    prio = _int(fields.get("PRIORITY"))
    ident = fields.get("SYSLOG_IDENTIFIER")
    return JournalEntry(
        message=message,
        cursor=fields.get("__CURSOR") if isinstance(fields.get("__CURSOR"), str) else None,
        realtime_us=_int(fields.get("__REALTIME_TIMESTAMP")),
        pid=_int(fields.get("_PID")),
        priority=prio if prio is not None else 6,
        invocation_id=fields.get("_SYSTEMD_INVOCATION_ID") or fields.get("INVOCATION_ID"),
        unit=fields.get("UNIT") or fields.get("_SYSTEMD_UNIT"),
        identifier=ident if isinstance(ident, str) else None,
        binary=binary,
    )
