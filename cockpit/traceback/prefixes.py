"""What stands before a process's own text in a pasted log, read off and kept as the entry's fields.

A traceback folds by its process's stream. A JSON export names the PID of every line; text that
an operator pastes carries the same facts in a prefix instead: journalctl's text formats
(`May 25 19:34:29 host python[67732]: `), a collector's (docker compose's `sglang-1  | `,
Kubernetes' CRI `2025-10-24T11:07:36.123456789Z stderr F `, docker's json-file objects) and a
logger's (Python logging's `2025-.. - name - ERROR - `, ray's `(WorkerDict pid=616, ip=...) `,
vLLM's `(VllmWorkerProcess pid=185216) ERROR 03-05 05:40:33 [file.py:880] `). With the prefix
read off, each line is the message journald would have stored, so eight ranks' pasted journalctl
text folds by PID exactly as the export does, and SGLang's own `[date TPn]` stays in the message
where the rank is read.

A terminal box's borders (`│ ... │`, a paste out of tmux or a TUI) are taken off first.

Which prefix a line has is read from the line itself (one input may mix prefixed and bare lines,
and a collector's line may hold a logger's): the kind that matched last is tried first, so a
paste of one format costs one match a line. A line no prefix fits stays the plain text it was.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple

import msgspec

from cockpit.systemd.entry import UNKNOWN_PRIORITY, JournalEntry

_LEVELS = {"CRITICAL": 2, "FATAL": 2, "ERROR": 3, "WARNING": 4, "WARN": 4, "INFO": 6, "DEBUG": 7}
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_LEVEL = "CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG"

# journalctl -o short, short-precise, short-iso(-precise), short-full, with-unit, short-unix,
# short-monotonic and short-delta: a time, the host, the identifier (or unit) and its PID.
_JOURNALCTL = re.compile(
    r"(?P<time>"
    rf"(?:{_MONTHS}) [ \d]\d \d\d:\d\d:\d\d(?:\.\d{{6}})?"
    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{6})? [A-Z][A-Za-z0-9+-]*"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?(?:[+-]\d\d:?\d\d|Z)"
    r"|\d{9,}\.\d{6}"
    r"|\[ *\d+\.\d{6}(?: < *\d+\.\d{6} >| *)\]"  # short-delta pads the first entry's missing delta
    rf") (?!(?:{_LEVEL})\b)(?P<host>\S+) (?P<ident>[^\s\[]+?)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)",
    re.DOTALL,
)
# compose names a container `service-1` (v2) or `service_1` (v1) and pads it before ` | `
_COMPOSE = re.compile(r"(?P<host>[A-Za-z0-9][\w.-]*[-_]\d+) +\|(?: (?P<msg>.*))?$", re.DOTALL)
_CRI = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?P<stream>stdout|stderr) (?P<tag>[FP])"
    r"(?: (?P<msg>.*))?$",
    re.DOTALL,
)
# loggers, inside a collector's line or alone
_PY_LOGGING = re.compile(
    rf"(?:(?P<time>\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d{{3}}) - \S+ - (?P<level>{_LEVEL}) - "
    rf"|(?P<level2>{_LEVEL}):[\w.]+:)(?P<msg>.*)",
    re.DOTALL,
)
_WORKER = re.compile(
    r"\((?:[\w.:-]+ )?pid=(?P<pid>\d+)(?:, ip=[\w.:]+)?\) "
    rf"(?:(?P<level>{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+\] )?(?P<msg>.*)",
    re.DOTALL,
)
_VLLM = re.compile(rf"(?P<level>{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\] (?P<msg>.*)", re.DOTALL)
_CARRIERS = (("journalctl", _JOURNALCTL), ("cri", _CRI), ("compose", _COMPOSE))
_LOGGERS = (_WORKER, _PY_LOGGING, _VLLM)
DOCKER_JSON = b'{"log":'
_LOGGER_FIRST = frozenset("(0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")  # how a logger's prefix can start


class _DockerLine(msgspec.Struct):
    log: str
    stream: str = "stdout"
    time: str | None = None


_decode_docker = msgspec.json.Decoder(_DockerLine).decode


class Prefix(NamedTuple):
    """What one line's prefixes said; `width` is how many characters they took (journalctl
    indents the further lines of a multi-line message by as many)."""

    message: str
    width: int
    host: str | None = None
    pid: int | None = None
    time_us: int | None = None
    priority: int = UNKNOWN_PRIORITY
    unit: str | None = None
    identifier: str | None = None


BOX = "│"


def unboxed(text: str) -> str:
    """`│ text   │` -> `text`: the left border and the one space after it, the padding and right border."""
    inner = text[1:]
    inner = inner[1:] if inner.startswith(" ") else inner
    inner = inner.rstrip()
    return inner[:-1].rstrip() if inner.endswith(BOX) else inner


HELD = Prefix("", 0)  # a partial line (CRI's `P`, docker's over 16 KiB): its rest comes on the next line
_UNIT_SUFFIXES = (".service", ".scope", ".socket", ".mount", ".timer")  # `-o with-unit` names the unit


def _time_us(text: str | None) -> int | None:
    """Microseconds since the epoch where the text says it without doubt (an ISO time with its
    zone, or short-unix's epoch); None where it gives no year or no zone."""
    if not text or text[0] == "[" or text[6:7] == " ":  # `May 25 ...`, `[67006.6...]`: no year, no epoch
        return None
    if _UNIX.fullmatch(text):
        return int(text.replace(".", ""))  # short-unix: seconds and six digits
    if text.endswith(" UTC"):  # short-full and with-unit: `Thu 2026-12-03 11:43:52 UTC`
        text = text[4:-4] + "+00:00"
    elif "T" not in text:
        return None
    if _NANOS.match(text):  # CRI's and docker's nanoseconds: Python reads six digits
        text = text[:26] + text[29:]
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1_000_000)
    except ValueError:
        return None


_NANOS = re.compile(r".{19}\.\d{9}")
_UNIX = re.compile(r"\d{9,}\.\d{6}")


class PrefixReader:
    """Reads the prefixes off one input's lines in order, keeping what spans lines: the kinds
    seen last, journalctl's indented continuation lines, CRI's and docker's partial lines."""

    def __init__(self) -> None:
        self._carriers = list(_CARRIERS)
        self._loggers = list(_LOGGERS)
        self._last: Prefix | None = None  # the last journalctl line, whose continuations may follow
        self._indent = ""
        self._partial: dict[str, str] = {}  # stream -> the start of a line whose rest is still to come
        self.hosts: dict[str, int] = {}  # host (or compose service) -> node: two hosts' PIDs stay apart

    def read(self, text: str) -> Prefix | None:
        """The line's prefixes and message; None for a bare line. HELD for a partial line."""
        if text.startswith(BOX):  # copied out of a terminal box (tmux, a TUI): its borders go
            inside = unboxed(text)
            return self._read(inside) or Prefix(inside, 0)
        return self._read(text)

    def _read(self, text: str) -> Prefix | None:
        if self._last is not None:
            if text.startswith(self._indent):  # a further line of a multi-line message
                return self._last._replace(message=text[len(self._indent) :])
            self._last = None
        carried = self._carrier(text)
        if carried is HELD:
            return HELD
        return self._logged(text if carried is None else carried.message, carried)

    def read_docker(self, line: bytes) -> Prefix | None:
        """A docker json-file line (`{"log":"...\\n","stream":...,"time":...}`): `log` ends in the
        newline when the line ended; a line over 16 KiB comes in pieces without one. None when it
        is not one."""
        try:
            record = _decode_docker(line)
        except msgspec.DecodeError:
            return None
        whole = self._partial.pop(record.stream, "") + record.log
        if not whole.endswith("\n"):
            self._partial[record.stream] = whole
            return HELD
        message = whole[:-1]
        return self._logged(message, Prefix(message, 0, time_us=_time_us(record.time)))

    def flush(self) -> list[Prefix]:
        """The partial lines still held when the input ends (a process's last words, cut off):
        each a line of its own, nothing dropped."""
        held = [Prefix(text, 0) for text in self._partial.values()]
        self._partial = {}
        return held

    def _carrier(self, text: str) -> Prefix | None:
        for i, (name, pattern) in enumerate(self._carriers):
            m = pattern.match(text)
            if m is None:
                continue
            if i:  # this input's kind: first from now on
                self._carriers.insert(0, self._carriers.pop(i))
            message = m["msg"] or ""
            width = len(text) - len(message)
            if name == "cri":
                if m["tag"] == "P":
                    self._partial[m["stream"]] = self._partial.get(m["stream"], "") + message
                    return HELD
                message = self._partial.pop(m["stream"], "") + message
                return Prefix(message, width, time_us=_time_us(m["time"]))
            host = m["host"]
            if host not in self.hosts:
                self.hosts[host] = len(self.hosts)
            if name == "compose":
                return Prefix(message, width, host=host)
            stamp, ident, pid = m.group("time", "ident", "pid")
            unit = ident if "." in ident and ident.endswith(_UNIT_SUFFIXES) else None
            self._last = Prefix(
                message,
                width,
                host,
                int(pid) if pid else None,
                _time_us(stamp),
                UNKNOWN_PRIORITY,
                unit,
                None if unit else ident,
            )
            if len(self._indent) != width:
                self._indent = " " * width
            return self._last
        return None

    def _logged(self, text: str, carried: Prefix | None) -> Prefix | None:
        """A logger's prefix inside the carrier's message (or alone on a bare line)."""
        if text[:1] not in _LOGGER_FIRST:  # SGLang's own `[date TPn]` lines, frames, code: no logger's
            return carried
        for i, pattern in enumerate(self._loggers):
            m = pattern.match(text)
            if m is None:
                continue
            if i:
                self._loggers.insert(0, self._loggers.pop(i))
            groups = m.groupdict()
            level = groups.get("level") or groups.get("level2")
            pid = groups.get("pid")
            base = carried or Prefix(text, 0)
            return base._replace(
                message=m["msg"],
                width=base.width + m.start("msg"),
                pid=int(pid) if pid else base.pid,
                priority=_LEVELS[level] if level else base.priority,
            )
        return carried

    def entry(self, prefix: Prefix) -> JournalEntry:
        """The journal entry a prefixed line stands for."""
        return JournalEntry(
            message=prefix.message,
            realtime_us=prefix.time_us,
            pid=prefix.pid,
            priority=prefix.priority,
            unit=prefix.unit,
            identifier=prefix.identifier,
            node=self.hosts[prefix.host] if prefix.host else 0,
        )
