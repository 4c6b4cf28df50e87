"""Journal entries from `journalctl -o export`, the format the follower reads a unit's journal in.

Why not json, which every finished query still reads (cockpit.systemd.entry): journalctl builds
each json line as a tree of values before it prints it, and export prints the fields as it
reads them. On 300,000 lines of a flood in the lab (systemd 252), `-o json --all` with the
cockpit's fields took 5.5 s of journalctl's CPU and `-o export` with the same fields 2.5 s:
following a busy unit costs the GPU host less than half as much, at 1.3 to 1.4 us a line here
against msgspec's 0.7 for a json line (docs/facts.md).

The format (systemd's "Journal Export Format"): an entry is its fields, one a line as
`NAME=value`, then a blank line. A value that is not printable UTF-8 on one line (a control
character, a newline, invalid UTF-8) comes as `NAME`, a newline, its size as 64-bit
little-endian, its bytes and a newline. Such a size always holds a zero byte (no field is
2**56 bytes long), which no text field can hold (NUL is a control character): in a buffer
without one, a blank line ends an entry and nothing else, and one regular expression reads it.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from cockpit.systemd.entry import Entries, JournalEntry, entry_from_fields, share, trim_shared

# journald's largest field (DATA_SIZE_MAX, 768 MiB): a size over it is no size but a broken stream
DATA_SIZE_MAX = 768 << 20

# Possessive quantifiers where Python has them (3.11 and later): a field's value never gives back
# what it took, which spares the engine its bookkeeping for a retreat (0.83 against 0.99 to 1.24
# us a line for the findall below); Python 3.10 reads the same expression without them.
_ONCE = "+" if sys.version_info >= (3, 11) else ""
# A unit's own line to stdout as journald 252 stores it, the fields in the order export prints
# them (journald sorts an entry's fields by where each value first went into the file, so a
# message seen before, or the first line of a new process, can come in another order), else any
# entry whole (`other`), read field by field. The numbers' lengths are bounded: int() refuses a
# string of over 4,300 digits, which a hostile host could send.
_ENTRY = re.compile(
    rf"__CURSOR=([^\n]*{_ONCE})\n__REALTIME_TIMESTAMP=([0-9]{{1,20}}{_ONCE})\n__MONOTONIC_TIMESTAMP=[^\n]*{_ONCE}\n"
    rf"(?:__[A-Z_]+{_ONCE}=[^\n]*{_ONCE}\n)*{_ONCE}_BOOT_ID=[^\n]*{_ONCE}\n"  # 254 and later add __SEQNUM, __SEQNUM_ID
    rf"PRIORITY=([0-7])\nSYSLOG_IDENTIFIER=([^\n]*{_ONCE})\n_PID=([0-9]{{1,10}}{_ONCE})\n"
    rf"_SYSTEMD_UNIT=([^\n]*{_ONCE})\n_SYSTEMD_INVOCATION_ID=([^\n]*{_ONCE})\nMESSAGE=([^\n]*{_ONCE})\n\n"
    rf"|((?:[^\n]+{_ONCE}\n)+{_ONCE})\n"
)


class _NotText(Exception):
    """A line with no `=`: the name of a field sent as bytes (or a broken stream)."""


def parse_export(buffer: bytes) -> tuple[Entries, int]:
    """The whole entries at the start of `buffer` and how many of its bytes they took (the
    rest is an entry still arriving). Anything that is no entry (no MESSAGE, a broken size) is
    passed over and counted in `skipped`, never fatal."""
    if b"\x00" not in buffer:
        end = buffer.rfind(b"\n\n") + 2
        if end < 2:
            return Entries(), 0
        try:
            return _text(buffer[:end].decode("utf-8", "replace")), end
        except _NotText:
            pass  # a field sent as bytes whose size has not arrived whole: read field by field
    return _fields(buffer)


def _text(text: str) -> Entries:
    out = Entries()
    append = out.append
    trim_shared()
    for cursor, realtime, priority, identifier, pid, unit, invocation, message, other in _ENTRY.findall(text):
        if other:
            fields: dict[str, Any] = {}
            for line in other[:-1].split("\n"):
                name, equals, value = line.partition("=")
                if not equals:
                    raise _NotText
                _add(fields, name, value)
            _close(out, fields)
            continue
        append(
            JournalEntry(
                message,
                cursor,
                int(realtime),
                int(pid),
                int(priority),
                share(invocation, invocation),
                share(unit, unit),
                share(identifier, identifier),
            )
        )
    return out


def _add(fields: dict[str, Any], name: str, value: str | bytes) -> None:
    """A field stored more than once comes once a value, as a list of them (json's array)."""
    if name not in fields:
        fields[name] = value
    elif isinstance(had := fields[name], list):
        had.append(value)
    else:
        fields[name] = [had, value]


def _close(out: Entries, fields: dict[str, Any]) -> None:
    """An entry's fields all read: its entry, or one more skipped when it has no MESSAGE (a
    blank line with no fields before it is no entry at all)."""
    if "MESSAGE" in fields:
        out.append(entry_from_fields(fields))
    elif fields:
        out.skipped += 1


def _fields(buffer: bytes) -> tuple[Entries, int]:
    """Field by field, for a buffer holding fields sent as bytes: the slow path, taken by the
    few lines with a control character or invalid UTF-8 (a progress bar's `\\r`, colours)."""
    out = Entries()
    fields: dict[str, Any] = {}
    pos = taken = 0
    while (newline := buffer.find(b"\n", pos)) >= 0:
        line = buffer[pos:newline]
        if not line:  # a blank line ends an entry
            _close(out, fields)
            fields, pos = {}, newline + 1
            taken = pos
            continue
        name, equals, value = line.partition(b"=")
        if equals:
            _add(fields, name.decode("utf-8", "replace"), value.decode("utf-8", "replace"))
            pos = newline + 1
            continue
        if newline + 9 > len(buffer):
            break  # its size is still arriving
        size = int.from_bytes(buffer[newline + 1 : newline + 9], "little")
        end = newline + 9 + size
        if size > DATA_SIZE_MAX or (end < len(buffer) and buffer[end] != 0x0A):
            # No size a journal holds, or no newline after the bytes: this entry is broken.
            # Pass over it to the next blank line and read on from there.
            if (blank := buffer.find(b"\n\n", newline)) < 0:
                break
            out.skipped += 1
            fields, pos = {}, blank + 2
            taken = pos
            continue
        if end >= len(buffer):
            break  # its bytes are still arriving
        _add(fields, name.decode("utf-8", "replace"), buffer[newline + 9 : end])
        pos = end + 1
    return out, taken
