"""`ast.parse` for the big files SGLang ships (server_args.py is 250 to 360 KB).

CPython 3.11 before 3.11.8 can fail converting a large tree with `SystemError: AST constructor
recursion depth mismatch` (gh-106905) when the calling thread's recursion bookkeeping is off,
which happens after deep calls in the same thread; a fresh thread has fresh bookkeeping.
"""

from __future__ import annotations

import ast
import concurrent.futures
import re

_PY_EOL = re.compile("\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """A file's lines as Python and its tracebacks number them: a line ends at \\n, \\r\\n or
    \\r only. str.splitlines() also ends lines at a form feed (\\x0c, found in real sources),
    \\x1c-\\x1e and \\x85, which would shift every later line number."""
    lines = _PY_EOL.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SystemError:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ast.parse, source, filename).result()
