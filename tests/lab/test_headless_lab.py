"""Headless subcommands against the lab: a missing unit is an error, not a run against whatever
listens on port 30000, and the server's address comes from the unit's own --host/--port."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import LabHandle

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
ELSEWHERE = "[Service]\nExecStart=/bin/sh -c 'sleep infinity' --host 0.0.0.0 --port 30009\n"


def _cockpit(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COCKPIT, *argv], capture_output=True, text=True, timeout=timeout)


def test_bench_against_a_missing_unit_is_an_error(lab: LabHandle) -> None:
    out = _cockpit("bench", "--host", lab.name, "--unit", "nosuch", "--concurrency", "1", "--requests", "1")
    assert out.returncode == 2
    assert out.stderr.strip() == f"cockpit: unit nosuch.service not found on {lab.name}"


def test_readiness_is_asked_where_the_unit_says_it_listens(lab: LabHandle) -> None:
    lab.ssh("tee", "/etc/systemd/system/elsewhere.service", input=ELSEWHERE)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "start", "elsewhere.service")
    try:
        # The stand-in answers /health on 30000; this unit's server would be on 30009, where nothing is.
        out = _cockpit("status", "--host", lab.name, "--unit", "elsewhere", "--json")
        data = json.loads(out.stdout)
        assert data["active_state"] == "active" and data["ready"] is False and out.returncode == 1
    finally:
        lab.ssh("systemctl", "stop", "elsewhere.service", check=False)
        lab.ssh("rm", "-f", "/etc/systemd/system/elsewhere.service", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


def test_preflight_says_dry_run_once(lab: LabHandle) -> None:
    out = _cockpit("preflight", "--host", lab.name, "--unit", "sglang-demo")
    assert "dry-run: SGLang's own argument resolution on" in out.stdout and "dry run: dry run" not in out.stdout


def test_a_reader_that_closes_early_leaves_the_commands_own_exit_status(lab: LabHandle) -> None:
    """`cockpit status | head -1` and `cockpit stacks | head -30` exited 1 with nothing on stderr,
    so a script under `set -o pipefail` broke on a healthy server. The reader here (`true`) reads
    nothing at all and is gone before the command prints."""
    target = ["--host", lab.name, "--unit", "sglang-demo.service"]
    for words in (["status"], ["stacks"], ["status", "--json"]):
        alone = subprocess.run([COCKPIT, *words, *target], capture_output=True, text=True, timeout=120)
        piped = subprocess.run(
            ["bash", "-o", "pipefail", "-c", '"$0" "$@" | true', COCKPIT, *words, *target],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert alone.stdout and (piped.returncode, piped.stderr) == (alone.returncode, ""), (words, piped, alone)
