"""Did-you-mean for config keys, host names and SGLang flags: one scoring for all of them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def _words(s: str) -> set[str]:
    return {w for w in re.split(r"[-_.\s]+", s.lower()) if w}


def _same_letters(a: str, b: str) -> bool:
    """`sodu` for `sudo`, `tp-szie` for `tp-size`: every letter there, some swapped."""
    return a != b and len(a) >= 3 and sorted(a) == sorted(b)


def score(word: str, candidate: str) -> float:
    """Similarity in [0, 1]: spelling, swapped letters, and shared words in any order
    (so `--num-speculative-tokens` finds `--speculative-num-draft-tokens`)."""
    a, b = word.lower().lstrip("-"), candidate.lower().lstrip("-")
    if _same_letters(a, b):
        return 0.9
    wa, wb = _words(a), _words(b)
    overlap = len(wa & wb) / len(wa | wb) if wa and wb else 0.0
    return max(overlap, difflib.SequenceMatcher(None, a, b).ratio() - 0.1)


def closest(word: str, candidates: Iterable[str], n: int = 1, cutoff: float = 0.55) -> list[str]:
    ranked = sorted(set(candidates), key=lambda c: (-score(word, c), c))
    return [c for c in ranked[:n] if score(word, c) >= cutoff]
