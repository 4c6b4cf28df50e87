"""What Python prints for an exception, as data: the ground truth a fold must reconstruct.

Read from Python's own `traceback.TracebackException`, not from printed text, so a test
never checks the folder against a parser of the same kind. The lab's scenario scripts carry
this file (Debian's Python 3.11 runs it there), so it uses the standard library only.
"""

from __future__ import annotations

import traceback


def _name(te: traceback.TracebackException) -> str:
    """The exception's name as `format_exception_only` prints it."""
    stype = te.exc_type.__qualname__
    module = te.exc_type.__module__
    if module not in ("__main__", "builtins"):
        stype = (module if isinstance(module, str) else "<unknown>") + "." + stype
    return stype


def _code(f: traceback.FrameSummary) -> str | None:
    """The statement as Python prints it: its first line, or (Python 3.13, which prints a
    statement that spans lines whole when it knows the columns) every line of it."""
    lines = getattr(f, "_dedented_lines", None)
    if lines and f.colno is not None and f.end_colno is not None and f.end_lineno is not None:
        shown = lines.splitlines()[:f.end_lineno - f.lineno + 1]
        return "\n".join(s for line in shown if (s := line.strip())) or None
    return f.line or None


def _part(te: traceback.TracebackException, exc: BaseException, relation: str | None) -> dict:
    frames = [[f.filename, f.lineno, f.name, _code(f)] for f in te.stack]
    location = None  # a SyntaxError's place: not a frame (Python's stack ends before it)
    if isinstance(exc, SyntaxError) and (te.filename or te.lineno is not None):
        text = (te.text or "").strip()
        lineno = int(te.lineno) if te.lineno is not None else None  # kept as text by 3.11
        location = [te.filename or "<string>", lineno, text or None]
        message = te.msg or "<no detail available>"
    else:
        message = str(exc)
    notes = getattr(exc, "__notes__", None) or []
    message = "\n".join([message, *notes]).rstrip("\n")
    subs = []
    if isinstance(exc, BaseExceptionGroup):
        subs = [describe_exception(e) for e in exc.exceptions]
    return {"exception": _name(te), "message": message, "frames": frames, "location": location,
            "relation": relation, "sub_exceptions": subs}


def describe_exception(exc: BaseException) -> dict:
    """The propagated exception with `chained`: the earlier ones, in printed order."""
    chain: list[tuple[BaseException, str | None]] = []
    current: BaseException | None = exc
    relation = None
    seen = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, relation))
        if current.__cause__ is not None:
            current, relation = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, relation = current.__context__, "context"
        else:
            current = None
    chain.reverse()  # printed order: the earliest first
    parts = [_part(traceback.TracebackException.from_exception(e, capture_locals=False), e, r)
             for e, r in chain]
    last = parts[-1]
    last["relation"] = None
    last["chained"] = [dict(p, chained=[]) for p in parts[:-1]]
    return last


def printed(exc: BaseException) -> list[str]:
    """The lines Python prints for it (`traceback.print_exception`)."""
    return "".join(traceback.format_exception(exc)).splitlines()
