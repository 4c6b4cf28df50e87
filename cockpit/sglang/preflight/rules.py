"""SGLang's cross-flag rules that stop a server at start-up, with the releases they hold for.

The pre-flight's static layer reads them. The lab's stand-in does not: it replays what the real
releases did with a flag set (cockpit/lab/standin/replays/outcomes.json), so a lab test of the
pre-flight never checks these rules against themselves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


def release_tuple(version: str) -> tuple[int, ...]:
    """`0.5.23` -> (0, 5, 23); `0.4.6.post5` -> (0, 4, 6, 5); unparsable parts count as 0."""
    parts = []
    for piece in version.split("."):
        m = re.match(r"(?:post)?(\d+)", piece)
        parts.append(int(m.group(1)) if m else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Violation:
    """A rule the flags break: what SGLang raises, where, and how to fix it."""

    rule: str
    exception: str  # "AssertionError", "TypeError"
    function: str  # where the release raises it
    flags: tuple[str, ...]
    message: str
    fix: str
    sure: bool = True  # False: the GPU or the model may decide otherwise (an INFO, not an error)


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def eagle_check_location(version: str) -> str:
    """The function that holds the EAGLE checks in this release (docs/facts.md, SGLang)."""
    v = release_tuple(version)
    if v <= (0, 5, 2):
        return "__post_init__"
    if v <= (0, 5, 12):
        return "_handle_speculative_decoding"
    return "_handle_eagle_family"


def eagle_violation(version: str, flags: Mapping[str, str | None]) -> Violation | None:
    """Whether `launch_server` of `version` dies on the EAGLE parameter rule for these flags.

    `flags` maps canonical flag names to their values (None for a switch); absent flags keep
    SGLang's defaults, which are None for all three parameters.
    """
    algorithm = flags.get("--speculative-algorithm")
    if algorithm is None or algorithm.upper() not in EAGLE_FAMILY:
        return None
    if "--speculative-adaptive" in flags:
        return None
    steps = flags.get("--speculative-num-steps")
    topk = flags.get("--speculative-eagle-topk")
    draft = flags.get("--speculative-num-draft-tokens")
    where = eagle_check_location(version)
    if steps is None and (topk is not None or draft is not None):
        given = [
            n
            for n, v in (("--speculative-eagle-topk", topk), ("--speculative-num-draft-tokens", draft))
            if v is not None
        ]
        return Violation(
            rule="eagle-params-together",
            exception="AssertionError",
            function=where,
            flags=("--speculative-num-steps", *given),
            message=(
                f"SGLang {version} will stop at start-up: AssertionError in {where} "
                f"({' and '.join(given)} given without --speculative-num-steps)."
            ),
            fix=(
                "Set --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
                "together (for example 3, 4, 8), or leave all three out to let SGLang choose."
            ),
        )
    if steps is not None and topk is None and release_tuple(version) >= (0, 5, 2):
        return Violation(
            rule="eagle-topk-none",
            exception="TypeError",
            function=where,
            flags=("--speculative-num-steps", "--speculative-eagle-topk"),
            message=(
                f"SGLang {version} will stop at start-up: TypeError in {where} "
                "('>' not supported between NoneType and int): --speculative-num-steps is set "
                "but --speculative-eagle-topk is not."
            ),
            fix=(
                "Set --speculative-eagle-topk (1 for a linear draft, 4 or 8 for a tree) "
                "next to --speculative-num-steps."
            ),
        )
    return None


def speculative_params(flags: Mapping[str, str | None]) -> tuple[int | None, int | None, int | None]:
    """(num_steps, eagle_topk, num_draft_tokens) as integers where given."""
    return (
        _int_or_none(flags.get("--speculative-num-steps")),
        _int_or_none(flags.get("--speculative-eagle-topk")),
        _int_or_none(flags.get("--speculative-num-draft-tokens")),
    )
