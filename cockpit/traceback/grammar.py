"""What the lines of a Python traceback, and of the logs around it, look like.

The folder calls these only after a plain string test (`startswith`, `endswith`) has
narrowed a line down, so a busy log costs no regular expression per line. Every pattern is
anchored at the start and has no nested repetition: a 100,000-character line costs at most
one linear scan, never a backtracking blow-up.
"""

from __future__ import annotations

import keyword
import re

HEADER = "Traceback (most recent call last):"
GROUP_HEADER = "+ Exception Group Traceback (most recent call last):"
CAUSE = "The above exception was the direct cause of the following exception:"
CONTEXT = "During handling of the above exception, another exception occurred:"
RELATIONS = {CAUSE: "cause", CONTEXT: "context"}

# SGLang: `[%Y-%m-%d %H:%M:%S{ DPn}{ PPn}{ TPn}{ EPn}] `; other rank tokens are accepted too
# (0.5.23 prints `ATTN_CP1` and `MOE_DP2`). logparse builds its prefix from the same parts.
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?"
RANKS = r"((?: [A-Z_]+\d+)*)"
_PREFIX = re.compile(rf"\[{STAMP}{RANKS}\]")
# `  File "x.py", line 3, in f`; SyntaxError's location line has no `, in f`.
FRAME = re.compile(r'  File "(.*)", line (\d+|None)(?:, in (.*))?\Z', re.S)
# `torch.OutOfMemoryError: ...`, `AssertionError`, `f.<locals>.MyError: x`, `<unknown>.E`.
_NAME = r"(?:[^\W\d]\w*|<\w+>)(?:\.(?:[^\W\d]\w*|<\w+>))*"
EXCEPTION = re.compile(rf"({_NAME})(?::(?: (.*))?)?\Z", re.S)
# uvicorn (`INFO:     127.0.0.1:5000 - ...`) and Python warnings (`/x.py:92: UserWarning: ...`).
_LEVEL = re.compile(r"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")
_WARNING = re.compile(r"\S+:\d+: [A-Z]\w*Warning: ")


def log_rank(line: str) -> str | None:
    """The rank of an SGLang-prefixed line: "TP3", "DP1 TP3", "" without rank tokens; None
    when the line has no SGLang prefix at all."""
    if not line.startswith("[20"):
        return None
    m = _PREFIX.match(line)
    return m[1][1:] if m else None


def glued_rank(line: str) -> str | None:
    """The rank of an SGLang prefix that other text was glued before (a progress bar's last
    redraw without its newline, a paste's leftovers): `...2/2 [00:01<00:00][2025-.. TP0] ...`."""
    rank = log_rank(line)
    if rank is not None or "[20" not in line:
        return rank
    m = _PREFIX.search(line)
    return m[1][1:] if m else None


_CUDA_ERROR = re.compile(r"CUDA error: (.+)")


def cuda_error(message: str) -> str | None:
    """`an illegal memory access was encountered` of torch's `CUDA error: ...` message."""
    m = _CUDA_ERROR.match(message)
    return m[1].split("\n", 1)[0].strip() if m else None


UNRAISABLE = "Exception ignored in"  # Python's header for an exception no one could catch (a __del__)


FENCE = "```"  # a Markdown fence closing a paste, glued to the last line or on its own


def is_statement(line: str) -> bool:
    """A code line that reads like an exception line: `yield`, `pass`, `raise`, `return` alone. A frame
    that lost its indentation in a paste prints one as its code."""
    first = line.split(None, 1)[0] if line.strip() else ""
    return keyword.iskeyword(first)


def without_fence(line: str) -> str:
    return line[:-3].rstrip() if line.endswith(FENCE) else line


_BORDER = frozenset("─━═╭╮╰╯┌┐└┘├┤┬┴┼│ ")


def is_border(line: str) -> bool:
    """A terminal box's top or bottom (`╰────╯`): a paste's frame, never an exception's message."""
    return line.strip() != "" and set(line) <= _BORDER


def opens_traceback(line: str) -> bool:
    """A traceback starts here, possibly mid-line after a log prefix and message."""
    return line.endswith(HEADER)


def is_group_header(line: str) -> bool:
    return line.endswith(GROUP_HEADER)


def is_log_line(line: str) -> bool:
    """A line that a logger wrote, so it cannot continue an exception message."""
    first = line[:1]
    if first == "[":
        return log_rank(line) is not None
    if "A" <= first <= "Z" and _LEVEL.match(line):
        return True
    return bool(first) and first not in " \t" and _WARNING.match(line) is not None


def is_caret(line: str) -> bool:
    """Python 3.11+ position markers under a code line: `^^^^`, `~~~~^^^^~~`."""
    marks = line.strip()
    return bool(marks) and not marks.strip("^~")


def is_group_line(line: str) -> bool:
    """A line of an exception group's box: `  | ...`, `  +-+---- 1 ----`, `    | ...`."""
    if not line.startswith("  "):
        return False
    return line.lstrip(" ")[:1] in ("|", "+")


def is_group_closing(line: str) -> bool:
    """`    +------------------------------------`: the last member of a group box ends."""
    marks = line.lstrip(" ")
    return marks.startswith("+---") and not marks.strip("+-")


GROUP_TAILS = ("sub-exceptions)", "sub-exception)")


def headerless_group_at(line: str) -> int:
    """Where `  | ExceptionGroup: msg (2 sub-exceptions)` starts in the line, or -1: a group
    raised without a traceback of its own (`except*` re-raising) prints no header, and
    SGLang's logger may put its prefix and message before it."""
    if not line.endswith(GROUP_TAILS):
        return -1
    at = line.find("  | ")
    if at < 0 or (at > 0 and log_rank(line) is None) or EXCEPTION.match(line, at + 4) is None:
        return -1
    return at


def continues_frames(line: str) -> bool:
    """A frame, a code or caret line under it, or a recursion summary."""
    return line.startswith("    ") or line.startswith('  File "') or line.startswith("  [Previous line repeated ")


_SITE = re.compile(r'^\s*(?:\| )?\s*File "([^"]+)", line (\d+)')


def is_frame_line(line: str) -> bool:
    """`  File "...", line N`, also inside an exception group's `| ` margins."""
    return line.lstrip(" |").startswith("File ")


def frame_site(line: str) -> tuple[str, int] | None:
    """(path, line number) of a printed frame line, margins and all; None for any other line."""
    m = _SITE.match(line)
    return (m.group(1), int(m.group(2))) if m else None
