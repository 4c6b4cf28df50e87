"""The attempts of a session: each write-and-restart of a unit, kept on the jump box.

One JSON line per attempt, per host and unit, under ~/.local/state/cockpit/attempts/: the
flags before and after, the pre-flight findings, the outcome and its time, the traceback of a
crash, and the unit texts that were written, so that any earlier attempt can be rolled back
to and the incident note can tell the story.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cockpit.statedir import safe_name, state_dir

UNSET = "(unset)"
ORIGINAL = "original"  # attempt #0's outcome: no attempt, the unit as the cockpit first found it


@dataclass
class Attempt:
    number: int
    host: str
    unit: str
    started_at: float
    flags_before: dict[str, str | None]
    flags_after: dict[str, str | None]
    texts: dict[str, str]  # the unit files as written
    previous_texts: dict[str, str]  # as they were before
    findings: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = "pending"  # "ready", "crashed", "timeout", "refused", "failed", "pending", ORIGINAL
    seconds: float | None = None  # to ready, or to the crash
    detail: str = ""
    traceback: dict[str, Any] | None = None  # the folded crash (cockpit fold --json shape)
    backups: list[str] = field(default_factory=list)
    note: str = ""  # "rollback to attempt 2", ...

    def diff(self) -> list[tuple[str, str | None, str | None]]:
        """(flag, before, after) for every flag that changed; UNSET where one side lacks it."""
        names = dict.fromkeys([*self.flags_before, *self.flags_after])
        pairs = ((n, self.flags_before.get(n, UNSET), self.flags_after.get(n, UNSET)) for n in names)
        return [(n, a, b) for n, a, b in pairs if a != b]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class AttemptLog:
    def __init__(self, host: str, unit: str, root: Path | None = None, *, key: str | None = None) -> None:
        """`key`: the file's name where `unit` alone does not say whose timeline it is (a
        deployment's name, which two configs may give to launches on different hosts)."""
        self.path = (root or state_dir("attempts")) / safe_name(host) / f"{safe_name(key or unit)}.jsonl"
        self.host = host
        self.unit = unit

    def load(self) -> list[Attempt]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        attempts: dict[int, Attempt] = {}
        for line in lines:
            try:
                data = json.loads(line)
                attempts[data["number"]] = Attempt(**data)  # a later line updates the same attempt
            except (ValueError, TypeError, KeyError):
                continue  # a torn line (the app was killed while writing): skip it, keep the rest
        return [attempts[k] for k in sorted(attempts)]

    def new(self, **fields: Any) -> Attempt:
        existing = self.load()
        attempt = Attempt(
            number=(existing[-1].number + 1) if existing else 1,
            host=self.host,
            unit=self.unit,
            started_at=time.time(),
            **fields,
        )
        self.save(attempt)
        return attempt

    def keep_original(self, texts: dict[str, str], flags: dict[str, Any]) -> Attempt | None:
        """Attempt #0, `the original`: the unit as it was before the cockpit's first attempt, the
        way back that is always there. Kept once: from the first attempt's own record of what it
        found where the log has attempts from before #0 was kept, else from `texts` (the unit as
        the cockpit first opened it). None where it is kept already."""
        existing = self.load()
        if existing and existing[0].number == 0:
            return None
        first = existing[0] if existing else None
        original = Attempt(
            number=0,
            host=self.host,
            unit=self.unit,
            started_at=first.started_at if first else time.time(),
            flags_before=first.flags_before if first else flags,
            flags_after=first.flags_before if first else flags,
            texts=dict(first.previous_texts) if first and first.previous_texts else texts,
            previous_texts={},
            outcome=ORIGINAL,
            note="the unit as it was before the cockpit's first attempt",
        )
        self.save(original)
        return original

    def save(self, attempt: Attempt) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(attempt.to_json()) + "\n")
            f.flush()
            os.fsync(f.fileno())


def flags_in_effect(attempts: list[Attempt], when: float) -> tuple[dict[str, Any], Attempt] | None:
    """The flags the unit ran with at `when` (epoch seconds), as the attempt log knows them: what
    the last attempt before then wrote (or, if its write failed, what it found), else what the
    first attempt after then found. None when no attempt says."""
    ordered = sorted(attempts, key=lambda a: a.started_at)
    before = [a for a in ordered if a.started_at <= when]
    if before:
        last = before[-1]
        return (last.flags_before if last.outcome == "failed" else last.flags_after), last
    after = [a for a in ordered if a.started_at > when]
    return (after[0].flags_before, after[0]) if after else None
