"""An experiment's record on the jump box, written after every step, so that a run cut off (the
app closed, the connection lost, the jump box rebooted) goes on where it stopped and never
forgets the unit as it was before the experiment began: that text is what it puts back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError
from cockpit.statedir import safe_name, state_dir

FINISHED = "finished"  # the record's state once the unit is back (or left on the variant asked)


def record_path(host: str, unit: str, name: str, root: Path | None = None) -> Path:
    return (root or state_dir("experiments")) / safe_name(host) / safe_name(unit) / f"{safe_name(name)}.json"


def save(path: Path, record: dict[str, Any]) -> None:
    """Atomically: a record half written would lose the unit's original text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def load(path: Path) -> dict[str, Any] | None:
    """The record, or None where there is none; one that cannot be read is said, never dropped."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError as e:
        raise CockpitError(
            f"the experiment's record {path} cannot be read ({e}): move it aside to start afresh"
        ) from None
    return record if isinstance(record, dict) else None
