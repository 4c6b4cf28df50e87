"""The headless commands' one boundary for host text: what they print cannot drive a terminal.

Their text carries what hosts sent (a process title in `cockpit stacks`, a model's class name in
`cockpit preflight`, a traceback's message in `cockpit status`), and a script pipes it on to a
terminal or a ticket. Every subcommand prints through `sys.stdout` and `sys.stderr`, so while
one runs both are wrapped: each control character is written as its escape (cockpit.printable),
newlines and tabs kept. JSON is the same data written inertly: JSON itself escapes only
U+0000-U+001F, so DEL, C1 and the reordering characters are written `\\u009b`, which every
parser reads back as the same string.

What a command writes to `sys.stdout.buffer` is data it means byte for byte (`cockpit unit set`'s
unit file, `cockpit fold`'s records, which it escapes itself) and passes as it is.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import TextIO

from cockpit.printable import json_printable, printable


class InertText(io.TextIOBase):
    """A text stream that writes every string through `shown` to the stream it wraps."""

    def __init__(self, wrapped: TextIO, shown: Callable[[str], str]) -> None:
        self._wrapped = wrapped
        self._shown = shown

    def write(self, s: str) -> int:
        try:
            self._wrapped.write(self._shown(s))
        except BrokenPipeError:
            reader_gone(self._wrapped)
        return len(s)

    def flush(self) -> None:
        try:
            self._wrapped.flush()
        except BrokenPipeError:
            reader_gone(self._wrapped)

    def fileno(self) -> int:
        return self._wrapped.fileno()

    def isatty(self) -> bool:
        return self._wrapped.isatty()

    def writable(self) -> bool:
        return True

    @property
    def buffer(self) -> io.BufferedIOBase:
        return self._wrapped.buffer  # type: ignore[return-value]

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._wrapped.encoding


def reader_gone(stream: TextIO) -> None:
    """The reader of `stream` closed it (`cockpit status | head -1`): it has what it wanted, so
    the rest goes to /dev/null and the command ends with its own exit status, not a broken
    pipe's (a script's `set -o pipefail` reads that status)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


@contextlib.contextmanager
def inert_streams(as_json: bool) -> Iterator[None]:
    """stdout (JSON or text, as the command prints it) and stderr (always sentences) wrapped."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = InertText(out, json_printable if as_json else partial(printable, lines=True))
    sys.stderr = InertText(err, partial(printable, lines=True))
    try:
        yield
        sys.stdout.flush()  # here, where a reader gone is the reader's business, not at exit
    finally:
        sys.stdout, sys.stderr = out, err
