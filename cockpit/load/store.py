"""Load runs kept on the jump box, per host and unit, so that runs compare later (EAGLE-3
against plain decoding, before and after a flag change)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.statedir import state_dir


def runs_dir(host: str, unit: str) -> Path:
    return state_dir("runs", host, unit)


def save_run(host: str, unit: str, record: dict[str, Any]) -> Path:
    directory = runs_dir(host, unit)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(record.get('started_at') or time.time()))}.json"
    path.write_text(json.dumps(record, indent=1))
    return path


def load_runs(host: str, unit: str) -> list[tuple[Path, dict[str, Any]]]:
    """Every saved run, oldest first; an unreadable file is skipped, not fatal."""
    out = []
    for path in sorted(runs_dir(host, unit).glob("*.json")):
        try:
            out.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return out


def label(record: dict[str, Any]) -> str:
    """What distinguishes a run at a glance: its time and its speculative settings."""
    args = record.get("server_args") or {}
    algo = args.get("speculative_algorithm") or "plain decoding"
    when = time.strftime("%m-%d %H:%M", time.localtime(record.get("started_at") or 0))
    return f"{when} · {algo}" + (f" · {record['note']}" if record.get("note") else "")


def _ratio(base: dict[str, Any], level: dict[str, Any], key: str) -> float | None:
    """`level`'s `key` over `base`'s, to 3 places; None when either is missing or zero."""
    x, y = base.get(key), level.get(key)
    return round(y / x, 3) if x and y else None


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per concurrency level both runs have: output tok/s, per-stream tok/s and TTFT, and b/a."""
    by_level = {lv["concurrency"]: lv for lv in a.get("levels", [])}
    rows = []
    for lv in b.get("levels", []):
        base = by_level.get(lv["concurrency"])
        if base is None:
            continue
        rows.append(
            {
                "concurrency": lv["concurrency"],
                "a_tok_s": base["output_tokens_per_s"],
                "b_tok_s": lv["output_tokens_per_s"],
                "a_per_stream": base.get("output_tokens_per_s_per_stream"),
                "b_per_stream": lv.get("output_tokens_per_s_per_stream"),
                "speedup": _ratio(base, lv, "output_tokens_per_s"),
                "per_stream_speedup": _ratio(base, lv, "output_tokens_per_s_per_stream"),
                "a_ttft_p50_ms": (base.get("ttft_ms") or {}).get("p50"),
                "b_ttft_p50_ms": (lv.get("ttft_ms") or {}).get("p50"),
            }
        )
    return rows


@dataclass(frozen=True)
class SavedRun:
    """A saved run as a picker lists it."""

    label: str
    record: dict[str, Any]


@dataclass(frozen=True)
class Comparison:
    """Two runs side by side: A the baseline, B against it, per concurrency level both ran."""

    a: SavedRun
    b: SavedRun
    rows: list[dict[str, Any]]


def comparison(a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    return Comparison(SavedRun(label(a), a), SavedRun(label(b), b), compare(a, b))
