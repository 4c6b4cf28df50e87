"""`cockpit fold [FILE|-] [--json]`: a journal export or pasted log, tracebacks made whole.

Each input line is taken for a journal entry when it is a JSON object with a MESSAGE key
(`journalctl -o json`), and for a line of plain text otherwise, so an export and a log
copied from a terminal both work, mixed or not.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import msgspec

from cockpit.systemd.entry import JournalEntry, parse_entry
from cockpit.traceback.fold import Folder
from cockpit.traceback.render import as_text

BATCH = 10_000


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "fold", help="fold a journal export or a log into whole tracebacks",
        description="Reads `journalctl -o json` lines or plain text lines and prints every traceback "
                    "whole, its lines gathered from between other processes' lines, under a one-line "
                    "header; other lines as they came.")
    parser.add_argument("file", nargs="?", default="-", metavar="FILE",
                        help="the journal export or log to read (default: standard input)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per record: a traceback's frames, exception, chain")
    return parser


def journal_entry(line: bytes) -> JournalEntry | None:
    """The entry of a `journalctl -o json` line; None for any other line."""
    return parse_entry(line) if line.startswith(b"{") else None


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for raw in stream:
        yield raw[:-1] if raw.endswith(b"\n") else raw


def fold(lines: Iterable[bytes]) -> Folder:
    """Everything read, every traceback closed: what the subcommand prints."""
    folder = Folder()
    entries: list[JournalEntry] = []
    for line in lines:
        entry = journal_entry(line)
        if entry is not None:
            entries.append(entry)
            if len(entries) >= BATCH:
                folder.feed_batch(entries)
                entries = []
            continue
        if entries:
            folder.feed_batch(entries)
            entries = []
        text = line.decode("utf-8", "replace")
        folder.feed_text(text[:-1] if text.endswith("\r") else text)
    folder.feed_batch(entries)
    folder.close()
    return folder


def _write(out: BinaryIO, folder: Folder, as_json: bool) -> None:
    if as_json:
        encode = msgspec.json.Encoder().encode
        for record in folder.records:
            out.write(encode(record.to_json()) + b"\n")
    else:
        for text in as_text(folder.records):
            out.write(text.encode("utf-8", "replace") + b"\n")


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            folder = fold(_lines(sys.stdin.buffer))
        else:
            with open(args.file, "rb") as stream:
                folder = fold(_lines(stream))
    except OSError as e:
        print(f"cockpit: cannot read {args.file}: {e.strerror or e}.", file=sys.stderr)
        return 2
    try:
        _write(sys.stdout.buffer, folder, args.json)
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # `cockpit fold x | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
