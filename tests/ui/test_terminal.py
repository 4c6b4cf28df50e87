"""The app in a real terminal (tmux): drawn at the terminal's size even when stdout is a pipe
(`make demo | tee log`), and one sentence when there is no terminal at all."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

COCKPIT = str(Path(sys.executable).with_name("cockpit"))


def test_with_stdout_piped_the_app_draws_at_the_terminals_size(tmp_path: Path) -> None:
    socket = f"cockpit-tty-{os.getpid()}"
    subprocess.run(
        [
            "tmux",
            "-L",
            socket,
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            f"env -u COLUMNS -u LINES {COCKPIT} --host no-such-host.invalid --unit sglang-demo"
            f" | tee {tmp_path / 'log'}",
        ],
        check=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            rows = subprocess.run(
                ["tmux", "-L", socket, "capture-pane", "-p"], capture_output=True, text=True
            ).stdout.split("\n")
            if any("unknown host" in r for r in rows) and any("palette" in r for r in rows):
                break
            assert time.monotonic() < deadline, "\n".join(rows)
            time.sleep(0.3)
        footer = next(r for r in rows if "palette" in r)
        assert len(footer.rstrip()) > 150  # the whole width, not 80 columns
        assert [i for i, r in enumerate(rows) if "palette" in r][0] >= 45  # at the bottom of 50 rows
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def test_with_no_terminal_at_all_it_says_so_in_one_sentence() -> None:
    proc = subprocess.run(
        [COCKPIT, "--host", "no-such-host.invalid", "--unit", "x"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("cockpit: the cockpit needs a terminal") and proc.stderr.count("\n") == 1
