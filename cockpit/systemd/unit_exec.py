"""Command lines of `ExecStart=` as systemd reads them, and quoting that systemd reads back.

The rules are systemd's own (systemd.service(5) "Command lines", systemd.syntax(7) "Quoting"),
checked against systemd 252 in the lab rather than taken from the man pages alone:

- words are split at " \\t\\n\\r"; single and double quotes may open anywhere in a word
  (`a"b c"d` is `ab cd`); C escapes work inside both kinds of quotes; an unknown escape such as
  `\\q` is kept as written (systemd warns);
- the first word may carry the prefixes `-@:+!` and `!!`; `;` alone separates commands and `\\;`
  is a literal `;`;
- `%` specifiers are resolved after unquoting (`%%` is `%`; a trailing `%` stays);
- when the command runs, `$VAR` alone as a word becomes the variable's value split into words
  (zero words when unset), `${VAR}` anywhere is replaced by the exact value, `$$` is `$`, and the
  `:` prefix turns all of that off.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

SEPARATORS = " \t\n\r"
# Every specifier systemd 252 knows (systemd.unit(5), plus the deprecated %c %r %R it still
# accepts); any other letter after `%` is an error that stops the unit from loading.
SPECIFIERS = frozenset("aAbBcCdEfgGhHiIjJlLmMnNopPqrRsStTuUvVwWyY")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}
_HEX = "0123456789abcdefABCDEF"


class ExecSyntaxError(ValueError):
    """A command line systemd refuses; the message says why, without file and line."""


@dataclass(frozen=True)
class Word:
    """One word of a command line: as written, and as systemd stores it."""

    raw: str  # the exact text in the unit: quotes, escapes, specifiers and $-references intact
    value: str  # unquoted and unescaped, specifiers resolved (unresolvable ones kept as written)
    start: int  # offset of `raw` in the directive's value
    specifiers: tuple[str, ...] = ()  # specifiers left in `value` because only the host knows them


@dataclass(frozen=True)
class Command:
    """One command of an `ExecStart=`: the prefixes, the program and its arguments."""

    prefix: str  # the prefix characters before the program, as systemd read them ("", "-", "!!", ...)
    words: tuple[Word, ...]  # words[0].value is the program without its prefix

    @property
    def expands_env(self) -> bool:
        return ":" not in self.prefix

    @property
    def argv(self) -> list[str]:
        """argv as systemd stores it (before $-expansion): with `@`, the second word is argv[0]."""
        values = [w.value for w in self.words]
        return values[1:] if "@" in self.prefix else values


@dataclass(frozen=True)
class Arg:
    """One argument of the process systemd starts, and the word of the unit it comes from."""

    value: str
    word: int  # index into Command.words
    variable: str | None = None  # the variable a lone `$VAR` word was split from
    opaque: bool = False  # a lone `$VAR` nobody knows the value of: it may stand for any number of words


# --- words -------------------------------------------------------------------------------


def _is_scalar(c: int) -> bool:
    """systemd's unichar_is_valid(): no surrogates, no noncharacters, at most U+10FFFF."""
    return c < 0x110000 and not 0xD800 <= c <= 0xDFFF and not 0xFDD0 <= c <= 0xFDEF and (c & 0xFFFE) != 0xFFFE


def _unescape_one(text: str, i: int) -> tuple[bytes, int] | None:
    """systemd's cunescape_one() at `text[i]` (the character after a backslash): the bytes it
    stands for and how many characters it used, or None for an unknown escape."""
    c = text[i]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c].encode(), 1
    if c == "x":
        digits = text[i + 1 : i + 3]
        if len(digits) == 2 and all(d in _HEX for d in digits) and digits != "00":
            return bytes([int(digits, 16)]), 3
        return None
    if c in "uU":
        n = 4 if c == "u" else 8
        digits = text[i + 1 : i + 1 + n]
        if len(digits) != n or not all(d in _HEX for d in digits):
            return None
        code = int(digits, 16)
        if code == 0 or (c == "U" and not _is_scalar(code)):
            return None
        return chr(code).encode("utf-8", "surrogatepass"), n + 1
    if c in "01234567":
        digits = text[i : i + 3]
        if len(digits) == 3 and all(d in "01234567" for d in digits):
            code = int(digits, 8)
            if 0 < code <= 255:
                return bytes([code]), 3
        return None
    return None


def extract_word(
    text: str, pos: int, *, unescape: bool = True, strict: bool = False, relax: bool = False
) -> tuple[str, int, int] | None:
    """systemd's extract_first_word() from `pos`: (word, start, end), or None when only
    separators remain. `unescape` is EXTRACT_CUNESCAPE, where an unknown escape is kept as
    written (command lines) or, when `strict`, refused (`Environment=`); without `unescape` a
    backslash keeps the next character. `relax` tolerates an unbalanced quote and a trailing
    backslash (how `$VAR` values are split into words)."""
    n = len(text)
    while pos < n and text[pos] in SEPARATORS:
        pos += 1
    if pos >= n:
        return None
    start = pos
    out = bytearray()
    quote = ""
    while pos < n:
        c = text[pos]
        if c == "\\":
            if pos + 1 >= n:
                if relax:
                    pos += 1
                    break
                raise ExecSyntaxError(f"a trailing backslash in {text[start:]!r}")
            if unescape:
                known = _unescape_one(text, pos + 1)
                if known is None and strict:
                    raise ExecSyntaxError(f"unknown escape {text[pos : pos + 2]!r} in {text[start:]!r}")
                if known is None:
                    out += text[pos : pos + 2].encode("utf-8", "surrogateescape")
                    pos += 2
                else:
                    out += known[0]
                    pos += 1 + known[1]
            else:
                out += text[pos + 1].encode("utf-8", "surrogateescape")
                pos += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            else:
                out += c.encode("utf-8", "surrogateescape")
        elif c in "'\"":
            quote = c
        elif c in SEPARATORS:
            break
        else:
            out += c.encode("utf-8", "surrogateescape")
        pos += 1
    if quote and not relax:
        raise ExecSyntaxError(f"unbalanced quoting in {text[start:]!r}")
    return out.decode("utf-8", "surrogateescape"), start, pos


def split_words(
    text: str, *, unescape: bool = True, strict: bool = False, relax: bool = False
) -> list[tuple[str, int, int]]:
    words = []
    pos = 0
    while (found := extract_word(text, pos, unescape=unescape, strict=strict, relax=relax)) is not None:
        words.append(found)
        pos = found[2]
    return words


# --- specifiers --------------------------------------------------------------------------


def _unescape_unit_name(s: str) -> str:
    """unit_name_unescape(): `-` is `/` and `\\xNN` a byte."""
    s = s.replace("-", "/")
    return re.sub(
        rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), s.encode("utf-8", "surrogateescape")
    ).decode("utf-8", "surrogateescape")


def name_specifiers(unit_name: str) -> dict[str, str]:
    """The specifiers a unit's own name decides (%n %N %p %P %i %I %j %J); the others
    (boot ID, host name, user, directories...) are only known on the host."""
    stem, _, _ = unit_name.rpartition(".")
    prefix, at, instance = stem.partition("@")
    last = prefix.rpartition("-")[2] if "-" in prefix else prefix
    return {
        "n": unit_name,
        "N": stem,
        "p": prefix,
        "P": _unescape_unit_name(prefix),
        "i": instance if at else "",
        "I": _unescape_unit_name(instance) if at else "",
        "j": last,
        "J": _unescape_unit_name(last),
    }


def resolve_specifiers(s: str, known: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """specifier_printf(): `%%` is `%`, known specifiers are replaced, the other valid ones stay
    as written (and are returned), an unknown one is an error, a trailing `%` stays."""
    out: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "%" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        d = s[i + 1]
        if d == "%":
            out.append("%")
        elif d in known:
            out.append(known[d])
        elif d in SPECIFIERS:
            out.append("%" + d)
            kept.append("%" + d)
        else:
            raise ExecSyntaxError(f"unknown specifier %{d}")
        i += 2
    return "".join(out), tuple(kept)


# --- commands ----------------------------------------------------------------------------


def _split_prefix(word: str) -> tuple[str, str]:
    """config_parse_exec()'s prefix loop: which of `-@:+!` and `!!` lead the program."""
    ignore = argv0 = no_env = privileged = no_setuid = ambient = False
    i = 0
    while i < len(word):
        c = word[i]
        if c == "-" and not ignore:
            ignore = True
        elif c == "@" and not argv0:
            argv0 = True
        elif c == ":" and not no_env:
            no_env = True
        elif c == "+" and not (privileged or no_setuid or ambient):
            privileged = True
        elif c == "!" and not (privileged or no_setuid or ambient):
            no_setuid = True
        elif c == "!" and not (privileged or ambient):
            no_setuid, ambient = False, True
        else:
            break
        i += 1
    return word[:i], word[i:]


def parse_commands(value: str, known: Mapping[str, str]) -> list[Command]:
    """The commands of one `ExecStart=` value (usually one; `;` separates more)."""
    commands: list[Command] = []
    pos, n = 0, len(value)
    while True:
        first = extract_word(value, pos)
        if first is None:
            return commands
        text, start, pos = first
        if text == ";":
            continue
        prefix, program = _split_prefix(text)
        path, kept = resolve_specifiers(program, known)
        if not path:
            raise ExecSyntaxError(f"no program after the prefix {prefix!r}")
        if not path.startswith("/") and "/" in path:
            raise ExecSyntaxError(f"the program {path!r} is neither an absolute path nor a plain name")
        words = [Word(value[start:pos], path, start, kept)]
        while True:
            while pos < n and value[pos] in SEPARATORS:
                pos += 1
            if pos >= n:
                break
            ahead = value[pos + 1 : pos + 2]
            if value[pos] == ";" and (not ahead or ahead in SEPARATORS):
                pos += 1
                break
            if value[pos : pos + 2] == "\\;" and (pos + 2 >= n or value[pos + 2] in SEPARATORS):
                words.append(Word("\\;", ";", pos))
                pos += 2
                continue
            text, start, pos = extract_word(value, pos)  # type: ignore[misc]
            resolved, kept = resolve_specifiers(text, known)
            words.append(Word(value[start:pos], resolved, start, kept))
        if "@" in prefix and len(words) < 2:
            raise ExecSyntaxError("the '@' prefix needs an argv[0] after the program")
        commands.append(Command(prefix, tuple(words)))


# --- $-expansion when the command runs -----------------------------------------------------


def _replace_env(word: str, env: Mapping[str, str], missing: set[str]) -> str:
    """replace_env()'s state machine: `${VAR}` anywhere, `$$` is `$`, everything else (`$A`
    inside a word, `${A:-b}`, an unterminated `${A`) as written. A variable not in `env` is kept
    as written and added to `missing`."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        if word[i] != "$" or i + 1 == n:
            out.append(word[i])
            i += 1
            continue
        ahead = word[i + 1]
        if ahead == "$":
            out.append("$")
            i += 2
            continue
        if ahead != "{":
            out.append(word[i : i + 2])
            i += 2
            continue
        j = i + 2
        while j < n and word[j] not in "}:":
            j += 1
        if j == n:
            out.append(word[i:])
            break
        if word[j] == ":":  # `${A:-b}`: systemd leaves it alone and reads on after the colon
            out.append(word[i : j + 1])
        else:
            name = word[i + 2 : j]
            if name in env:
                out.append(env[name])
            elif ENV_NAME.fullmatch(name):
                missing.add(name)
                out.append(word[i : j + 1])
        i = j + 1
    return "".join(out)


def expand_env(command: Command, env: Mapping[str, str]) -> tuple[list[Arg], set[str]]:
    """The argv systemd hands the process, given the variables known to be set, and the names
    of the variables it refers to that `env` does not hold (kept as written: the host may set
    them, like $MAINPID or $USER)."""
    missing: set[str] = set()
    first = 1 if "@" in command.prefix else 0
    args: list[Arg] = []
    for index in range(first, len(command.words)):
        value = command.words[index].value
        if not command.expands_env:
            args.append(Arg(value, index))
        elif value.startswith("$") and value[1:2] not in ("{", "$"):
            name = value[1:]
            if name in env:
                args += [Arg(w, index, name) for w, _, _ in split_words(env[name], unescape=False, relax=True)]
            elif ENV_NAME.fullmatch(name):
                missing.add(name)
                args.append(Arg(value, index, name, opaque=True))
            # a name no variable can have (`$`, `$A/b`) always expands to no words at all
        else:
            args.append(Arg(_replace_env(value, env, missing), index))
    return args, missing


# --- quoting -----------------------------------------------------------------------------


def check_representable(value: str) -> None:
    """Raise ValueError for what no unit file can carry: NUL, lone surrogates, noncharacters
    (systemd rejects a line that holds them as not UTF-8 clean)."""
    for ch in value:
        if ch == "\0" or not _is_scalar(ord(ch)):
            raise ValueError(f"{value!r} holds {ch!r}, which a systemd unit cannot carry")


_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./$-]+")


def quote_word(value: str, *, expand_env: bool = True) -> str:
    """The word that systemd reads back as exactly `value`: `%` doubled, `$` doubled where the
    command expands variables, and double quotes with C escapes around anything else."""
    check_representable(value)
    text = value.replace("%", "%%")
    if expand_env:
        text = text.replace("$", "$$")
    if _BARE.fullmatch(value) and value != ";":
        return text
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
