"""Helpers shared by the benchmarks: percentiles, a lab or a stand-in to run against, JSON output."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2))


def lab_up(name: str, real_sglang: bool = False):
    """The lab, up, and reachable by name from an SSHHost built here (below the session, which
    would hand the labs' ssh_config to its host pool)."""
    from cockpit.lab.lab import Lab

    lab = Lab(name)
    info = lab.up(progress=lambda m: print(m, file=sys.stderr), real_sglang=real_sglang)
    os.environ["COCKPIT_SSH_CONFIG"] = ":".join(
        p for p in (os.environ.get("COCKPIT_SSH_CONFIG"), str(info.ssh_config)) if p
    )
    return lab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standin(port: int, **settings: float) -> subprocess.Popen:
    """The SGLang stand-in on 127.0.0.1:port, quiet and quick to start; `tokens_per_s=40` sets
    COCKPIT_STANDIN_TOKENS_PER_S=40, and so on for each setting."""
    from cockpit.sglang.catalog.releases import sglang_source

    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        COCKPIT_STANDIN_SGLANG_ROOT=str(sglang_source("0.5.23")),
        COCKPIT_STANDIN_STARTUP_S="0.1",
        COCKPIT_STANDIN_ACCESS_LOG="0",
        **{f"COCKPIT_STANDIN_{name.upper()}": str(value) for name, value in settings.items()},
    )
    return subprocess.Popen(
        [sys.executable, "-m", "cockpit.lab.standin", "--model-path", "/m", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
