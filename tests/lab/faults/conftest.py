"""The fault harness: a lab of its own (faults freeze, cut and reboot it), a ticker unit whose every
line is counted against `journalctl` inside the lab, and the table the attacks report into."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from tests.conftest import LAB_RELEASE, TEST_LAB, LabHandle

FAULT_LAB = f"{TEST_LAB}-f"
TICKER = "ticker.service"
TICKER_PORT = 30001
# 20 lines a second, and a /health that answers 200, so the status pane has a "ready" to lose.
TICKER_SCRIPT = f"""import http.server, itertools, threading, time


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", {TICKER_PORT}), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
for i in itertools.count():
    print(f"tick {{i}}", flush=True)
    time.sleep(0.05)
"""
TICKER_UNIT = f"""[Unit]
Description=cockpit fault-test ticker (20 lines/s, /health on {TICKER_PORT})

[Service]
ExecStart=/usr/bin/python3 -u /opt/cockpit-lab/units/ticker.py
Restart=always
RestartSec=1
"""


@dataclass
class FaultRow:
    attack: str
    lost: int
    duplicated: int
    delivered: int
    screen: list[str] = field(default_factory=list)  # what the status pane and journal title said
    stale_after_s: float | None = None  # from the attack to the first sign of trouble on screen
    recovered_after_s: float | None = None  # from the host's return to live data on screen


_ROWS: list[FaultRow] = []


@pytest.fixture(scope="session")
def fault_report() -> Iterator[list[FaultRow]]:
    """Rows of the note's table; written to $COCKPIT_FAULT_REPORT (JSON) when set."""
    yield _ROWS
    out = os.environ.get("COCKPIT_FAULT_REPORT")
    if out and _ROWS:
        Path(out).write_text(json.dumps([asdict(r) for r in _ROWS], indent=1))


@pytest.fixture(scope="session")
def fault_lab() -> Iterator[LabHandle]:
    from cockpit.lab.lab import Lab

    if os.geteuid() != 0:
        raise AssertionError("the lab tests need root: run `make test` as root")
    handle = Lab(FAULT_LAB)
    handle.units_dir.mkdir(parents=True, exist_ok=True)
    (handle.units_dir / TICKER).write_text(TICKER_UNIT)
    (handle.units_dir / "ticker.py").write_text(TICKER_SCRIPT)
    info = handle.up(progress=lambda m: print(m, file=sys.stderr), release=LAB_RELEASE)
    lab = LabHandle(FAULT_LAB, info)
    lab.wait_for_line(TICKER, "tick 20")
    try:
        yield lab
    finally:
        handle.down()
        (handle.units_dir / TICKER).unlink(missing_ok=True)
        (handle.units_dir / "ticker.py").unlink(missing_ok=True)


def journal_cursors(lab: LabHandle, unit: str, after: str | None = None) -> list[str]:
    """The unit's entries as journald inside the lab holds them: the truth the cockpit is counted against."""
    argv = ["journalctl", "-u", unit, "-o", "json", "--output-fields=MESSAGE", "--no-pager"]
    if after:
        argv.append(f"--after-cursor={after}")
    out = lab.ssh(*argv, timeout=120).stdout
    return [json.loads(line)["__CURSOR"] for line in out.splitlines() if line.startswith("{")]


def lost_and_duplicated(delivered: list[str], truth: list[str]) -> tuple[int, int]:
    """Entries of `truth` up to the last one delivered that never arrived, and arrivals twice."""
    seen = set(delivered)
    last = max((i for i, c in enumerate(truth) if c in seen), default=-1)
    lost = sum(1 for c in truth[: last + 1] if c not in seen)
    return lost, len(delivered) - len(seen)
