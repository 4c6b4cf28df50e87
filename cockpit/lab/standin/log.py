"""SGLang's log format: `[%Y-%m-%d %H:%M:%S{ TPn}] message`, one write per record."""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import TextIO

JOURNAL_IDENTIFIER = "COCKPIT_STANDIN_JOURNAL_IDENTIFIER"  # a child's SYSLOG_IDENTIFIER, set by the server


def rank_prefix(tp_rank: int, tp_size: int) -> str:
    """` TP3` only when the server runs with more than one tensor-parallel rank, as SGLang does."""
    return f" TP{tp_rank}" if tp_size > 1 else ""


class Logger:
    """Writes whole records with a single write, as Python's logging does."""

    def __init__(self, prefix: str = "", stream: TextIO | None = None) -> None:
        self.prefix = prefix
        self.stream = stream or sys.stdout

    def stamp(self) -> str:
        return f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{self.prefix}] "

    def info(self, message: str) -> None:
        try:
            self.stream.write(self.stamp() + message + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # the journal or terminal went away; a stand-in keeps serving

    def plain(self, line: str) -> None:
        """A line without the stamp: a traceback's lines after its first, each written as it comes."""
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass


def connect_own_journal_stream(identifier: str) -> bool:
    """Point fds 1 and 2 at a journald stream of this process's own.

    journald stamps a stream's lines with the PID that opened it; the unit's inherited stdout
    carries the main PID, so without this every rank would share one `_PID`. This is what
    `systemd-cat` does; the process stays in the unit's cgroup, so `journalctl -u` sees it.
    """
    if not os.environ.get("JOURNAL_STREAM") or not os.path.exists("/run/systemd/journal/stdout"):
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("/run/systemd/journal/stdout")
        # identifier, unit id, priority, level prefix, syslog, kmsg, console
        sock.sendall(f"{identifier}\n\n6\n0\n0\n0\n0\n".encode())
    except OSError:
        sock.close()
        return False
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(sock.fileno(), 1)
    os.dup2(sock.fileno(), 2)
    sock.close()
    return True
