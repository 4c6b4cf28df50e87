"""`ast.parse` for the big files SGLang ships (server_args.py is 250 to 360 KB).

CPython 3.11 before 3.11.8 can fail converting a large tree with `SystemError: AST constructor
recursion depth mismatch` (gh-106905) when the calling thread's recursion bookkeeping is off,
which happens after deep calls in the same thread; a fresh thread has fresh bookkeeping.
"""

from __future__ import annotations

import ast
import concurrent.futures


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SystemError:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ast.parse, source, filename).result()


def parse_expression(source: str) -> ast.Expression:
    """`ast.parse(source, mode="eval")` with the same fallback (a string annotation was seen to
    hit the same SystemError once the catalog was read inside the app's event loop)."""
    try:
        return ast.parse(source, mode="eval")
    except SystemError:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ast.parse, source, "<unknown>", "eval").result()
