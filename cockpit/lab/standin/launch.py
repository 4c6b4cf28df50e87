"""What `launch_server` does before it serves: parse the real flags, then do what the real release
did with them.

The parser is built from the catalog of the SGLang release installed beside the stand-in, so an
unknown or malformed flag fails exactly as argparse fails in that release. After that the
stand-in judges nothing itself: the cockpit's pre-flight is what the lab tests, so the stand-in
must not share its rules. It looks the speculative flags up among the outcomes the real releases
gave (`replays/outcomes.json`: each flag set run through SGLang 0.5.9 and 0.5.23 themselves); a
recorded failure replays the traceback that release printed (`replays/`), and a flag set with
no record, or a recorded success, starts. Where SGLang really imports (the real-SGLang lab),
there is nothing to replay: the release resolves the flags itself, as launch_server does before
any GPU work, and dies with its own traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cockpit.sglang.catalog.flags import Catalog, Flag, load_catalog, on_cuda

REPLAYS = Path(__file__).with_name("replays")
RECORDED_PYTHON = "python3.11"  # what the real runs behind the replays ran on


def find_sglang_root(explicit: str = "") -> Path:
    """The directory that holds the `sglang` package (site-packages in the lab)."""
    candidates = [explicit] if explicit else [p for p in sys.path if p]
    for entry in candidates:
        root = Path(entry)
        if (root / "sglang" / "srt" / "server_args.py").is_file():
            return root
    where = explicit or "sys.path"
    raise SystemExit(
        f"stand-in: no SGLang source found in {where}; it needs the release's "
        "sglang/srt/server_args.py to know the flags"
    )


_TYPES = {"int": int, "float": float}


def build_parser(catalog: Catalog) -> argparse.ArgumentParser:
    """An argparse parser with the flags of that release; prog is what SGLang's parser shows."""
    parser = argparse.ArgumentParser(prog="launch_server.py")
    for flag in catalog.flags:
        parser.add_argument(*flag.names, **_argparse_kwargs(flag))
    return parser


def _argparse_kwargs(flag: Flag) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dest": flag.dest, "help": argparse.SUPPRESS, "default": None}
    if not flag.takes_value:
        kwargs["action"] = "store_true"
        return kwargs
    kwargs["type"] = _TYPES.get(flag.type or "", str)
    if flag.nargs not in (None, 0):
        kwargs["nargs"] = flag.nargs
    if flag.choices and all(isinstance(c, (str, int, float)) for c in flag.choices):
        kwargs["choices"] = list(flag.choices)
    if flag.required:
        kwargs["required"] = True
    return kwargs


def given_flags(catalog: Catalog, namespace: argparse.Namespace) -> dict[str, str | None]:
    """Canonical name -> value (None for a switch) of every flag the command line set."""
    out: dict[str, str | None] = {}
    for flag in catalog.flags:
        value = getattr(namespace, flag.dest, None)
        if value is None or value is False:
            continue
        out[flag.name] = (
            None if value is True else (" ".join(map(str, value)) if isinstance(value, list) else str(value))
        )
    return out


def replay_text(version: str, exception: str, pid: int) -> str:
    """The real release's output for that failure, with today's time stamps and this PID."""
    path = REPLAYS / version / f"{exception}.txt"
    if not path.is_file():
        known = sorted(p.name for p in REPLAYS.iterdir() if p.is_dir())
        return (
            f"stand-in: SGLang {version} would raise {exception} here, but the stand-in has no "
            f"recorded traceback for that release (it has: {', '.join(known)})\n"
        )
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    text = path.read_text()
    # Recorded under Python 3.11: on a host whose Python is another, its paths name that one.
    here = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if here != RECORDED_PYTHON:
        text = text.replace(f"/{RECORDED_PYTHON}/", f"/{here}/")
    text = re.sub(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "[" + stamp, text, flags=re.M)
    return re.sub(r"\b(parent_pid|pid)=\d+", lambda m: f"{m.group(1)}={pid}", text)


def recorded_outcome(version: str, flags: dict[str, str | None]) -> str | None:
    """What the real `version` did with these speculative flags (`AssertionError`, `TypeError`,
    `ok`), where a run of it is on record; None where none is. The record is keyed by the flags
    the recorded runs varied: every `--speculative-*` flag but the draft model's path, which
    names a directory of the machine it ran on."""
    given = {k: v for k, v in flags.items() if k.startswith("--speculative-") and k != "--speculative-draft-model-path"}
    if not given:
        return None  # no speculative decoding: nothing the recorded runs tried
    for record in json.loads((REPLAYS / "outcomes.json").read_text()):
        if record["release"] == version and record["flags"] == given:
            return str(record["outcome"])
    return None


def resolve_with_sglang(argv: Sequence[str]) -> bool:
    """SGLang's own argument resolution, where it imports: what launch_server runs before any
    GPU work (`prepare_server_args`, then `resolve_once` and `check_server_args` where the release
    has them). Its exception, if any, is left to end the process with SGLang's own traceback.
    False where SGLang does not import (the plain lab holds its source alone)."""
    try:
        from sglang.srt.server_args import prepare_server_args  # type: ignore[import-not-found]  # the lab's, where it imports
    except ImportError:
        return False
    resolved = prepare_server_args(on_cuda(argv))
    for step in ("resolve_once", "check_server_args"):
        if hasattr(resolved, step):
            getattr(resolved, step)()
    return True


def parse_or_die(argv: Sequence[str], sglang_root: str) -> tuple[Catalog, argparse.Namespace, dict[str, str | None]]:
    """Parse like SGLang; exit 2 on bad flags, or die as the release did (its own resolution where it
    imports, else its recorded traceback) and exit 1."""
    catalog = load_catalog(find_sglang_root(sglang_root))
    namespace = build_parser(catalog).parse_args(list(argv))
    flags = given_flags(catalog, namespace)
    if resolve_with_sglang(argv):
        return catalog, namespace, flags
    version = catalog.version or "unknown"
    outcome = recorded_outcome(version, flags)
    if outcome is not None and outcome != "ok":
        sys.stdout.flush()
        sys.stderr.write(replay_text(version, outcome, os.getpid()))
        sys.stderr.flush()
        raise SystemExit(1)
    speculative = {k: v for k, v in flags.items() if k.startswith("--speculative-")}
    if outcome is None and speculative:
        print(
            f"stand-in: no run of SGLang {version} with these speculative flags is on record "
            f"({' '.join(f'{k} {v}' for k, v in speculative.items())}): starting as if it accepted them",
            file=sys.stderr,
            flush=True,
        )
    return catalog, namespace, flags
