"""Reading one folded block: its chain of exceptions, their frames, messages and groups.

The folder only decides which lines belong to a block; this module reads what they say,
from scratch, whenever a record is asked (a block still receiving lines is simply read
again). Keeping the two apart lets the per-line work of the folder stay tiny.

A block is a chain of parts in printed order, the propagated exception last. Exception
groups print their members inside a box (`| ` margins, `+-+---- 1 ----` separators); a
member is itself a chain, read by the same code once one level of margin is removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.traceback.frames import Frame, Location
from cockpit.traceback.grammar import (
    EXCEPTION,
    FENCE,
    FRAME,
    GROUP_HEADER,
    HEADER,
    RELATIONS,
    headerless_group_at,
    is_caret,
    is_group_closing,
    is_group_line,
    is_statement,
    without_fence,
)


@dataclass(slots=True)
class Part:
    """One exception of a chain; `first`/`end` index the block's lines."""

    frames: list[Frame]
    exception: str | None
    message: str
    location: Location | None = None  # a SyntaxError's
    first: int = 0
    end: int = 0
    relation: str | None = None  # how this part leads to the next one: "cause" or "context"
    members: list[list[Part]] = field(default_factory=list)  # an exception group's, each a chain


def parse_block(lines: list[str]) -> list[Part]:
    """The chain of a block, earliest exception first."""
    if not lines:
        return []
    texts = list(lines)
    first = texts[0]
    if first.endswith(GROUP_HEADER):
        texts[0] = "  " + GROUP_HEADER  # a log prefix before it: `[...] Scheduler hit an exception:   + Exc...`
    elif first.endswith(HEADER):
        texts[0] = HEADER
    elif (at := headerless_group_at(first)) > 0:
        texts[0] = first[at:]
    return _chain(texts, 0, margin=False)


def _chain(texts: list[str], base: int, margin: bool) -> list[Part]:
    """Parts separated by `The above exception...`/`During handling...` between blank lines.

    With `margin`, lines carry a group box's margin (`| `), and member boxes start with
    `+-+`, so members are cut out and read one level down.
    """
    parts: list[Part] = []
    i, n = 0, len(texts)
    while i < n:
        start = i
        relation = None
        if not margin and texts[i].startswith(("  + Exception Group", "  | ")):
            region, j = _box(texts, i)
            inner = _chain(region, base + i, margin=True)
            parts.extend(inner[:-1])
            part = inner[-1] if inner else Part([], None, "")
            i = j
            k = i + 1 if i < n and texts[i] == "" else i
            if k < n and texts[k] in RELATIONS:
                relation = RELATIONS[texts[k]]
                i = k + 2 if k + 1 < n and texts[k + 1] == "" else k + 1
            elif k == n:
                i = n  # the blank line logging adds after a formatted traceback
        else:
            own: list[str] = []
            members: list[list[int]] = []
            in_members = False
            while i < n:
                text = texts[i]
                if margin:
                    if text.startswith("+-+"):
                        members.append([i + 1, i + 1])
                        in_members = True
                        i += 1
                        continue
                    if in_members:
                        if text.startswith("  +-") and not text.startswith("  +-+"):
                            if is_group_closing(text):
                                in_members = False
                            else:
                                members.append([i + 1, i + 1])
                            i += 1
                            continue
                        if text.startswith("  "):
                            members[-1][1] = i + 1
                            i += 1
                            continue
                        in_members = False  # the last member's own closing line closed this box too
                    text = text[2:] if text[:1] in ("|", "+") else text
                if own and text in RELATIONS:  # between blank lines, unless journald dropped them
                    relation = RELATIONS[text]
                    i += 1
                    if i < n and (texts[i] == "" or (margin and texts[i].rstrip() == "|")):
                        i += 1
                    break
                own.append(text)
                i += 1
            part = _plain(own)
            for a, b in members:
                chain = _chain([t[2:] for t in texts[a:b]], base + a, margin=True)
                if chain and (chain[-1].exception is not None or chain[-1].frames):
                    part.members.append(chain)  # a `... (and 5 more exceptions)` box is neither
        part.first, part.end, part.relation = base + start, base + i, relation
        parts.append(part)
    return parts


def _box(texts: list[str], i: int) -> tuple[list[str], int]:
    """An exception group's box from line i, one level of margin removed, and where it ends.

    Python 3.11's own printer (uncaught exceptions; the traceback module does it right)
    writes the second and later lines of a member's message without the box's margin, so
    until a member ends, an unmarked line continues the line above it.
    """
    region: list[str] = []
    n = len(texts)
    while i < n:
        text = texts[i]
        if is_group_line(text):
            region.append(text[2:])
        elif region and not is_group_closing(region[-1]):
            above = region[-1]
            indent = len(above) - len(above.lstrip(" "))
            region.append(above[:indent] + "| " + text)
        else:
            break
        i += 1
    return region, i


def _plain(texts: list[str]) -> Part:
    """Frames, exception and message of one part, margins removed."""
    frames: list[Frame] = []
    sites: list[Frame | Location] = []
    codes: list[list[str]] = []
    exception: str | None = None
    message: list[str] = []
    loose = False  # the last frame lost its indentation in a paste: so did its code line
    for text in texts:
        if exception is not None:
            message.append(text)
        elif (text.startswith('  File "') and (m := FRAME.match(text))) or (
            text.startswith('File "') and (m := FRAME.match("  " + text))
        ):
            line = None if m[2] == "None" else int(m[2])
            site: Frame | Location = Frame(m[1], line, m[3], None) if m[3] is not None else Location(m[1], line, None)
            sites.append(site)
            codes.append([])
            loose = not text.startswith(" ")
        elif text.startswith("    ") or (
            loose and text and (is_statement(text) or not EXCEPTION.match(without_fence(text)))
        ):
            if codes and not is_caret(text):
                codes[-1].append(text)
        elif text[:1] not in ("", " ", "\t") and (m := EXCEPTION.match(without_fence(text))):
            exception = m[1]
            message.append(m[2] or "")
    for site, code in zip(sites, codes, strict=True):  # appended together, one code list per site
        site.code = "\n".join(stripped for c in code if (stripped := c.strip())) or None
    while message and message[-1] == "":
        message.pop()
    if message and "\n".join(message).count(FENCE) % 2:  # an odd fence: the paste's, not the message's
        message[-1] = without_fence(message[-1])
    frames = [s for s in sites if isinstance(s, Frame)]
    locations = [s for s in sites if isinstance(s, Location)]
    return Part(frames, exception, "\n".join(message), locations[-1] if locations else None)
