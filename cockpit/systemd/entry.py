"""One journal entry, parsed from a line of `journalctl -o json --all`.

Parsing is the hot path of following a busy unit and of folding a million-line export.
orjson decodes a line in one C call, faster than any Python-level scan for the few fields the
cockpit reads once the line holds journald's full field set; what is left per entry is a
handful of dict lookups. The unit, identifier and invocation ID repeat on every entry, so
they are shared rather than held once per entry (about 200 bytes an entry saved).

`MESSAGE` is an array of byte values when it holds invalid UTF-8 or control characters
(the `\\r` of a progress bar); it is decoded with replacement, and `binary` says so.
A field journald stored several times comes as an array of its values.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson


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


_PRIORITIES = {str(p): p for p in range(8)}
_MEMO_LIMIT = 65536
_pids: dict[str, int] = {}  # "_PID" text -> number
_strings: dict[str, str] = {}  # one copy of each unit name, identifier, invocation ID
_share = _strings.setdefault
_service_fields = itemgetter("MESSAGE", "__CURSOR", "__REALTIME_TIMESTAMP", "_PID", "PRIORITY",
                             "_SYSTEMD_INVOCATION_ID", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER")


def _message_from(value: Any) -> tuple[str, bool]:
    if isinstance(value, str):
        return value, False
    if isinstance(value, list):
        try:
            if value and isinstance(value[0], str):
                return "\n".join(value), False  # MESSAGE stored more than once
            return bytes(value).decode("utf-8", "replace"), True
        except (ValueError, TypeError):
            return "", True
    return "", False  # null: a field journald did not send (without --all, over 4096 bytes)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _shared(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if len(_strings) >= _MEMO_LIMIT:
        _strings.clear()
    return _strings.setdefault(value, value)


def from_fields(fields: dict[str, Any]) -> JournalEntry:
    """An entry from an already decoded journal object (any formatting, null fields)."""
    try:  # a service's line as journalctl writes it: one C call fetches every field
        message, cursor, realtime, pid, priority, invocation, unit, identifier = _service_fields(fields)
        if message.__class__ is str and "UNIT" not in fields:
            return JournalEntry(message, cursor, int(realtime), _pids[pid], _PRIORITIES[priority],
                                _share(invocation, invocation), _share(unit, unit),
                                _share(identifier, identifier))
    except (KeyError, TypeError, ValueError):
        pass
    return _careful(fields)


def _careful(fields: dict[str, Any]) -> JournalEntry:
    """Any other field types, missing fields, and the first sight of a PID."""
    if not isinstance(fields, dict):
        raise ValueError("a journal entry must be a JSON object")
    message, binary = _message_from(fields.get("MESSAGE"))
    pid = fields.get("_PID")
    pid_number = _int(pid) if isinstance(pid, (str, int)) else None
    if isinstance(pid, str) and pid_number is not None:
        if len(_pids) >= _MEMO_LIMIT:
            _pids.clear()
        _pids[pid] = pid_number
    prio = fields.get("PRIORITY")
    priority = _int(prio) if isinstance(prio, (str, int)) else None
    cursor = fields.get("__CURSOR")
    return JournalEntry(
        message=message,
        cursor=cursor if isinstance(cursor, str) else None,
        realtime_us=_int(fields.get("__REALTIME_TIMESTAMP")),
        pid=pid_number,
        priority=priority if priority is not None else 6,
        invocation_id=_shared(fields.get("_SYSTEMD_INVOCATION_ID") or fields.get("INVOCATION_ID")),
        unit=_shared(fields.get("UNIT") or fields.get("_SYSTEMD_UNIT")),
        identifier=_shared(fields.get("SYSLOG_IDENTIFIER")),
        binary=binary,
    )


def parse_json_line(line: str | bytes) -> JournalEntry:
    """One `journalctl -o json` line -> entry. Raises ValueError on a line that is not JSON."""
    return from_fields(orjson.loads(line))


def parse_json_lines(lines: Iterable[str | bytes]) -> list[JournalEntry]:
    """Entries of the lines that are journal objects; blank and broken lines (a cut
    connection) are skipped, not fatal.

    `from_fields`'s common case is repeated inline: at a few hundred thousand entries a
    second, a function call per entry is a tenth of the time. The cyclic garbage collector
    is paused meanwhile: a batch makes no cycles, and with a large window of entries alive
    its passes cost more than the parsing."""
    loads, fields_of, entry, pids, priorities, share = (orjson.loads, _service_fields, JournalEntry, _pids,
                                                         _PRIORITIES, _share)
    out: list[JournalEntry] = []
    append = out.append
    if len(_strings) >= _MEMO_LIMIT:  # checked per batch, not per entry
        _strings.clear()
    collecting = gc.isenabled()
    gc.disable()
    try:
        for line in lines:
            try:
                fields = loads(line)
            except orjson.JSONDecodeError:
                continue
            try:
                message, cursor, realtime, pid, priority, invocation, unit, identifier = fields_of(fields)
                if message.__class__ is str and "UNIT" not in fields:
                    append(entry(message, cursor, int(realtime), pids[pid], priorities[priority],
                                 share(invocation, invocation), share(unit, unit), share(identifier, identifier)))
                    continue
            except (KeyError, TypeError, ValueError):
                pass
            if fields.__class__ is dict:
                append(_careful(fields))
    finally:
        if collecting:
            gc.enable()
    return out
