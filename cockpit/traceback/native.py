"""Stacks that are not Python tracebacks: what the worst crashes leave, folded like a traceback.

- faulthandler's dump (`Fatal Python error: Segmentation fault`, then `Thread 0x... (most recent
  call first):` and `  File "...", line N in f` frames): SGLang's scheduler enables faulthandler,
  so a segfault or an abort in a kernel prints one. Its Python frames open in the source pane; the
  current thread's innermost frame is the failing one.
- a C++ exception that reached `std::terminate` (`terminate called after throwing an instance of
  'c10::Error'`, `  what():  ...`, `Exception raised from F at FILE:LINE (most recent call first):`,
  then `frame #0: ...` or torch's `C++ CapturedTraceback:` with `#4 ...`). A `CUDA error: ...` in
  its what() makes it a CUDA error record.
- NCCL's watchdog timeout (`[rank3]:[E... ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught
  collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, ..., Timeout(ms)=600000)
  ran for 600020 milliseconds before timing out.`), with the rank's further ProcessGroupNCCL lines
  and the C++ exception that ends the process: which collective, its sequence number, how long.

The folder asks `opener` of a line no record takes (a few string tests), and `NativeStack.takes`
of each further line of its stream. A blank line (a paste: journald drops them) never opens one.
"""

from __future__ import annotations

import re
from typing import Any

from cockpit.traceback.frames import Frame
from cockpit.traceback.grammar import HEADER, cuda_error, is_log_line
from cockpit.traceback.model import Traceback, _Reading

FAULTHANDLER, CPP, NCCL, CUDA = "faulthandler", "cpp", "nccl", "cuda"
FATAL = "Fatal Python error: "
TERMINATE = "terminate called after throwing an instance of "
RAISED = "Exception raised from "
WATCHDOG = "Watchdog caught collective operation timeout: WorkNCCL("
OPENING = (FATAL, TERMINATE, RAISED)  # how a line that opens a faulthandler or C++ record starts

_FH_FRAME = re.compile(r'  File "(.*)", line (\d+|\?\?\?) in (.*)\Z')
_FH_LINES = (
    "Thread 0x",
    "Current thread 0x",
    "Stack (most recent call first):",
    "  File ",
    "  <no Python frame>",
    "  Garbage-collecting",
    "  Binary file ",  # Python 3.13's C stack
    "  <cannot get C stack",
    "Current thread's C stack trace",
    "Extension modules: ",
    "Python runtime state: ",
)
_CPP_FRAME = re.compile(r"frame #\d+: |#\d+ |C\+\+ CapturedTraceback:")
_RANK = re.compile(r"\[rank(\d+)\]:|\[(?:PG [^\]]{0,80})?Rank (\d+)\]")
_RANK_WITHIN = 400  # the rank is in the line's first words; a long line is not searched through
_WORK = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?P<rest>(?:[^()]|\([^()]*\)){0,400})\) "
    r"ran for (?P<ran>\d+) milliseconds"
)
_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d+)")
_MESSAGE_LINES = 50  # a what() of more lines than this without its `Exception raised from`: not one
# what a C++ record expects next
_WHAT, _MESSAGE, _FRAMES = range(3)


def ends_a_message(text: str) -> bool:
    """A Python exception's message takes the lines after it (torch's `Exception raised from` and
    C++ frames included), but not what only a dying process prints next."""
    return text.startswith((FATAL, TERMINATE)) or WATCHDOG in text


def opener(text: str) -> str | None:
    """The kind of record the line starts, or None."""
    if text.startswith(OPENING):
        return FAULTHANDLER if text.startswith(FATAL) else CPP
    if WATCHDOG in text:
        return NCCL
    return None


class NativeStack(Traceback):
    """A record like a traceback (one row, unfolds, frames that open) read by its own grammar."""

    __slots__ = ("kind", "_phase", "_said", "_prefix")

    def __init__(self, kind: str, lines: list[str], times: list[int | None], **fields: Any) -> None:
        super().__init__(lines, times, **fields)
        first = lines[0]
        self.kind = kind
        self._phase = _FRAMES if first.startswith(RAISED) else _WHAT
        self._said = 0  # message lines after what()
        rank = _RANK.search(first, 0, _RANK_WITHIN) if kind == NCCL else None
        # c10's own lines of that rank (`[rank3]:[E1203 ...`), not torchrun's `[rank3]: ` before any line
        end = first.find("]:[") if kind == NCCL and first.startswith("[rank") else -1
        self._prefix = first[: end + 3] if end > 0 else None
        if rank is not None:  # its own word, over what the process's lines said before it
            self.rank = f"rank{rank.group(1) or rank.group(2)}"
        self.complete = kind == NCCL

    def takes(self, text: str) -> bool:
        """Whether the next line of the stream belongs to this record (the folder then adds it)."""
        if self.kind == FAULTHANDLER:
            if text == "" or text.startswith(_FH_LINES):
                self.complete = self.complete or text.startswith("  File ")
                return True
            return False
        if self.kind == NCCL and self._prefix is not None and text.startswith(self._prefix):
            return True
        return self._cpp_takes(text)

    def _cpp_takes(self, text: str) -> bool:
        if text.startswith(TERMINATE):
            self._phase = _WHAT
            return True
        if self._phase == _WHAT:
            if text.startswith("  what():"):
                self._phase, self._said = _MESSAGE, 0
                self.complete = True
                return True
            return self._frames_take(text)
        if self._phase == _MESSAGE:
            if text.startswith(RAISED):
                self._phase = _FRAMES
                return True
            self._said += 1  # what() may run over lines; a logger's line or a traceback is past it
            return (
                self._said <= _MESSAGE_LINES
                and opener(text) is None
                and not is_log_line(text)
                and not text.endswith(HEADER)
            )
        return self._frames_take(text)

    def _frames_take(self, text: str) -> bool:
        if text == "" or _CPP_FRAME.match(text) or text.startswith(RAISED):
            self._phase = _FRAMES
            self.complete = True
            return True
        return False

    def _reading(self) -> _Reading:
        if self._read_at != len(self.lines) or self._read is None:
            read = _faulthandler if self.kind == FAULTHANDLER else _cpp
            self._read = read(self)
            self._read_at = len(self.lines)
        return self._read

    @property
    def cpp_frames(self) -> list[str]:
        return [line for line in self.lines if _CPP_FRAME.match(line) and not line.startswith("C++ ")]

    @property
    def record_kind(self) -> str:
        if self.kind == CPP and cuda_error(self.message) is not None:
            return CUDA
        return self.kind

    def failing_frame_line(self) -> int:
        """faulthandler prints the innermost frame first: the current thread's first frame."""
        if self.kind != FAULTHANDLER:
            return super().failing_frame_line()
        current = next((k for k, line in enumerate(self.lines) if line.startswith("Current thread 0x")), 0)
        return next((k for k in range(current, len(self.lines)) if _FH_FRAME.match(self.lines[k])), 0)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["kind"] = self.record_kind
        if self.kind != FAULTHANDLER:
            out["cpp_frames"] = self.cpp_frames
        if self.kind == NCCL:
            out["collective"] = nccl_work(self.lines)
        return out


def _faulthandler(stack: NativeStack) -> _Reading:
    """Every thread's frames, innermost last as a traceback's, the current thread's at the end."""
    threads: list[list[Frame]] = []
    current: list[Frame] = []
    for line in stack.lines:
        if line.startswith(("Thread 0x", "Stack (")):
            threads.append([])
        elif line.startswith("Current thread 0x"):
            threads.append(current)
        elif (m := _FH_FRAME.match(line)) is not None and threads:
            number = m.group(2)
            threads[-1].append(Frame(m.group(1), int(number) if number.isdigit() else None, m.group(3), None))
    frames = [f for thread in threads if thread is not current for f in reversed(thread)]
    frames += list(reversed(current))
    what = stack.lines[0][len(FATAL) :].strip() if stack.lines[0].startswith(FATAL) else ""
    return _Reading(frames, None, "Fatal Python error", what, [], [])


def _cpp(stack: NativeStack) -> _Reading:
    lines = stack.lines
    thrown = next((line[len(TERMINATE) :].strip().strip("'") for line in lines if line.startswith(TERMINATE)), None)
    what = next((line.split("what():", 1)[1].strip() for line in lines if line.startswith("  what():")), "")
    raised = next((line[len(RAISED) :].split(" (most recent", 1)[0] for line in lines if line.startswith(RAISED)), "")
    if stack.kind == NCCL:
        work = nccl_work(lines)
        message = (
            f"{work['op']} SeqNum={work['seq']} ran {work['ran_ms']} ms"
            + (f" (timeout {work['timeout_ms']} ms)" if work.get("timeout_ms") else "")
            if work
            else what
        )
        return _Reading([], None, "NCCL watchdog timeout", message, [], [])
    return _Reading([], None, thrown or "C++ exception", what or (f"raised from {raised}" if raised else ""), [], [])


def nccl_work(lines: list[str]) -> dict[str, Any] | None:
    """The collective that timed out: operation, sequence number, how long it ran, its timeout."""
    for line in lines:
        at = line.find("WorkNCCL(")
        while at >= 0:  # each candidate matched where it stands: no search that rescans a long line
            m = _WORK.match(line, at)
            if m is not None:
                timeout = _TIMEOUT.search(m["rest"])
                return {
                    "op": m["op"],
                    "seq": int(m["seq"]),
                    "ran_ms": int(m["ran"]),
                    "timeout_ms": int(timeout[1]) if timeout else None,
                }
            at = line.find("WorkNCCL(", at + 1)
    return None
