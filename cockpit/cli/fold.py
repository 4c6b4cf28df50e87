"""`cockpit fold [FILE|-] [--json]`: a journal export or pasted log, tracebacks made whole.

Each input line is taken for a journal entry when it is a JSON object with a MESSAGE key
(`journalctl -o json`), and for a line of plain text otherwise, so an export and a log
copied from a terminal both work, mixed or not.

It streams: input is read in chunks of what is there (a pipe from `journalctl -f` prints as
it goes), each record is printed as soon as nothing can change it (a line that cannot start
a traceback at once, a traceback when it ends) and then forgotten, so memory is bounded by the
longest open traceback, not the input; a reader that stops (`| head`) stops it. Every control
character is shown escaped (cockpit.printable: `\\x1b` in text, `\\u001b` in JSON), so a
journal line cannot drive the terminal it is printed on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from cockpit.printable import json_printable, printable
from cockpit.textlines import complete_lines

if TYPE_CHECKING:
    from cockpit.traceback.fold import Record


CHUNK = 1 << 16
LATE_LINES = 1000  # records after which a late line of an exited process is no longer waited for


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "fold",
        help="fold a journal export or a log into whole tracebacks",
        description="Reads `journalctl -o json` lines or plain text lines and prints every traceback "
        "whole, its lines gathered from between other processes' lines, under a one-line "
        "header; other lines as they came. Records are printed as soon as they are complete.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="the journal export or log to read (default: standard input)",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per record: a traceback's frames, exception, chain"
    )
    return parser


def chunks(stream: BinaryIO) -> Iterator[list[bytes]]:
    """Complete lines, in lists of whatever arrived together; the last line may lack its newline."""
    read = getattr(stream, "read1", stream.read)
    rest = b""
    while True:
        data = read(CHUNK)
        if not data:
            break
        lines, rest = complete_lines(rest, data)
        if lines:
            yield lines
    if rest:
        yield [rest]


class Printer:
    """Writes records as they settle; `records` counts what it wrote."""

    def __init__(self, out: BinaryIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.records = 0
        # host (as the lines' prefixes named it) -> node, the reader's: each record's host in the JSON
        self.hosts: dict[str, int] = {}
        self._host_of: dict[int, str] = {}  # its inverse, made again when the reader meets a new host
        import msgspec  # each subcommand imports what it needs only when it runs

        self._encode = msgspec.json.Encoder().encode

    def write(self, records: list[Record]) -> None:
        if not records:
            return
        from cockpit.traceback.render import as_text

        if self.as_json:
            encoded = b"".join(self._encode(self._json(r)) + b"\n" for r in records)
            data = json_printable(encoded.decode("utf-8", "replace")).encode("utf-8")
        else:
            data = "".join(printable(t) + "\n" for t in as_text(records)).encode("utf-8", "replace")
        self.out.write(data)
        self.out.flush()
        self.records += len(records)

    def _json(self, record: Record) -> dict[str, object]:
        """The record's JSON, with the host its lines' prefixes named (journalctl's, compose's
        service) where the input named any: the same PID on two hosts is two processes."""
        from cockpit.traceback.model import Line

        out = record.to_json()
        if self.hosts:
            node = record.entry.node if isinstance(record, Line) else record.node
            if len(self._host_of) != len(self.hosts):
                self._host_of = {n: host for host, n in self.hosts.items()}
            out["host"] = self._host_of.get(node)
        return out


def stream_fold(stream: BinaryIO, printer: Printer) -> int:
    """Returns how many journal entries came without their MESSAGE (an export made without
    `--all`: journalctl sends a field over 4096 bytes as null, a traceback's longest lines)."""
    from cockpit.traceback.fold import Folder, end_of_input, feed_lines
    from cockpit.traceback.prefixes import PrefixReader

    folder, reader = Folder(), PrefixReader()
    printer.hosts = reader.hosts
    left_out = 0
    for lines in chunks(stream):
        left_out += feed_lines(folder, lines, reader=reader)
        folder.release(LATE_LINES)
        done = folder.settled()
        printer.write(folder.records[:done])
        folder.discard(done)
    end_of_input(folder, reader)
    printer.write(folder.records)
    return left_out


def run(args: argparse.Namespace) -> int:
    printer = Printer(sys.stdout.buffer, args.json)
    try:
        if args.file == "-":
            left_out = stream_fold(sys.stdin.buffer, printer)
        else:
            with open(args.file, "rb") as stream:
                left_out = stream_fold(stream, printer)
        if left_out:
            one = left_out == 1
            print(
                f"cockpit: {left_out} journal entr{'y' if one else 'ies'} came without {'its' if one else 'their'} "
                "message (journalctl sends a field over 4096 bytes only with --all): export with "
                "`journalctl -o json --all` to see them whole.",
                file=sys.stderr,
            )
    except BrokenPipeError:  # `cockpit fold x | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except IsADirectoryError:
        print(f"cockpit: cannot read {args.file}: it is a directory.", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"cockpit: cannot read {args.file}: {e.strerror or e}.", file=sys.stderr)
        return 2
    return 0
