"""`Environment=` assignments and `EnvironmentFile=` files, read the way systemd 252 reads them.

`Environment=` is a list of words (quotes and C escapes as on a command line, but an unknown
escape makes systemd ignore the whole line); `%` specifiers are resolved, `$` means nothing.
An environment file is shell-like but not a shell: the state machine below is systemd's
parse_env_file_internal(), including its quirks (`export A=1` is an invalid name, quotes after
the first character of a value are kept, a comment ending in a backslash swallows the next line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.systemd.unit_exec import ENV_NAME, check_representable, quote_word, resolve_specifiers, split_words


@dataclass(frozen=True)
class Assignment:
    """One `KEY=value` word of an `Environment=` line."""

    raw: str  # as written, quotes and escapes intact
    key: str
    value: str  # unquoted, unescaped, specifiers resolved
    valid: bool  # systemd ignores assignments with a bad name or a value that is not clean UTF-8


def _valid_value(value: str) -> bool:
    try:
        check_representable(value)
    except ValueError:
        return False
    return True


def parse_assignments(value: str, known: Mapping[str, str]) -> list[Assignment]:
    """The assignments of one `Environment=` value; raises ExecSyntaxError where systemd ignores
    the whole line (unbalanced quotes, an unknown escape, an unknown specifier)."""
    out = []
    for word, start, end in split_words(value, strict=True):
        resolved, _ = resolve_specifiers(word, known)
        key, eq, val = resolved.partition("=")
        out.append(
            Assignment(value[start:end], key, val, bool(eq) and bool(ENV_NAME.fullmatch(key)) and _valid_value(val))
        )
    return out


def quote_assignment(key: str, value: str) -> str:
    """The `Environment=` word that systemd reads back as exactly KEY=value."""
    if not ENV_NAME.fullmatch(key):
        raise ValueError(f"{key!r} is not a valid environment variable name")
    return quote_word(f"{key}={value}", expand_env=False)


_NEWLINE = "\n\r"
_SPACE = " \t\n\r"
_SHELL_NEED_ESCAPE = '"\\`$'


def parse_env_file(text: str) -> dict[str, str]:
    """The variables an `EnvironmentFile=` sets, in order (invalid names and values skipped)."""
    result: dict[str, str] = {}
    state = "pre_key"
    key: list[str] = []
    value: list[str] = []
    key_ws: int | None = None  # where trailing whitespace of the key begins
    value_ws: int | None = None

    def push(strip_value: bool) -> None:
        name = "".join(key[:key_ws] if key_ws is not None else key)
        val = "".join(value[:value_ws] if strip_value and value_ws is not None else value)
        if ENV_NAME.fullmatch(name) and _valid_value(val):
            result[name] = val

    for c in text:
        if state == "pre_key":
            if c in "#;":
                state = "comment"
            elif c not in _SPACE:
                state, key, value, key_ws = "key", [c], [], None
        elif state == "key":
            if c in _NEWLINE:
                state = "pre_key"
            elif c == "=":
                state, value_ws = "pre_value", None
            else:
                if c not in _SPACE:
                    key_ws = None
                elif key_ws is None:
                    key_ws = len(key)
                key.append(c)
        elif state == "pre_value":
            if c in _NEWLINE:
                push(False)
                state = "pre_key"
            elif c == "'":
                state = "single"
            elif c == '"':
                state = "double"
            elif c == "\\":
                state = "value_escape"
            elif c not in _SPACE:
                state = "value"
                value.append(c)
        elif state == "value":
            if c in _NEWLINE:
                push(True)
                state = "pre_key"
            elif c == "\\":
                state, value_ws = "value_escape", None
            else:
                if c not in _SPACE:
                    value_ws = None
                elif value_ws is None:
                    value_ws = len(value)
                value.append(c)
        elif state == "value_escape":
            state = "value"
            if c not in _NEWLINE:
                value.append(c)
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                value.append(c)
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                value.append(c)
        elif state == "double_escape":
            state = "double"
            if c in _SHELL_NEED_ESCAPE:
                value.append(c)
            elif c != "\n":
                value += ["\\", c]
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c in _NEWLINE:
                state = "pre_key"
        else:  # comment_escape: systemd 252 keeps the next character, even a newline, in the comment
            state = "comment"
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        push(state == "value")
    return result
