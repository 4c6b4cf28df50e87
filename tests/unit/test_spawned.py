"""The OpenSSH master's process without `subprocess` (cockpit/remote/spawned.py): started as
`Popen` would start it (no input, output in files, no inherited descriptor, SIGPIPE and
SIGXFSZ as a program expects them), and waited for by two threads at once without losing how
it ended."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from cockpit.remote.spawned import Spawned, spawn


def _spawned(directory: Path, *argv: str) -> tuple[Spawned, Path, Path]:
    directory.mkdir(exist_ok=True)
    out, said = directory / "stdout", directory / "stderr"
    return spawn(list(argv), str(out), str(said)), out, said


def test_the_wait_ends_when_the_process_does_and_keeps_its_status(tmp_path: Path) -> None:
    """`ended_within` (what the early line waits with): None while the process runs, its status
    once it ended, also when another thread reaped it first (the app's own wait for the answer)."""
    running, _, _ = _spawned(tmp_path, "sleep", "30")
    try:
        assert running.ended_within(0.05) is None
        assert running.poll() is None
        running.kill()
        assert running.ended_within(5) == -signal.SIGKILL
        assert running.ended_within(0) == -signal.SIGKILL  # asked again: the status kept
        running.kill()  # ended and reaped: nothing to signal, nothing raised
    finally:
        if running.poll() is None:
            os.kill(running.pid, signal.SIGKILL)
            running.wait()
    ended, _, _ = _spawned(tmp_path, "sh", "-c", "exit 3")
    reaper = threading.Thread(target=ended.wait)
    reaper.start()
    reaper.join()
    assert ended.ended_within(5) == 3
    # ending while waited for, by this and by another thread at once
    later, _, _ = _spawned(tmp_path, "sh", "-c", "sleep 0.2; exit 4")
    reaper = threading.Thread(target=later.wait)
    reaper.start()
    assert later.ended_within(5) == 4
    reaper.join()
    assert later.returncode == 4 and later.wait() == 4


def test_it_starts_as_popen_would_start_it(tmp_path: Path) -> None:
    """Input from /dev/null (cat ends at once), output and errors in their files, a descriptor
    this process had open (a pipe to a pager) not carried into it, and SIGPIPE and SIGXFSZ not
    ignored there: Python ignores both, and a child inherits what is ignored."""
    read_end, write_end = os.pipe()
    carried = os.dup2(write_end, 50, inheritable=True)
    try:
        cat, out, said = _spawned(tmp_path / "cat", "sh", "-c", "cat; echo said >&2; cat /proc/self/status")
        listing = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
        shown, fds, _ = _spawned(tmp_path / "fds", sys.executable, "-c", listing)
    finally:
        for fd in (read_end, write_end, carried):
            os.close(fd)
    assert cat.wait() == 0 and shown.wait() == 0
    assert said.read_text() == "said\n"
    status = out.read_text()
    assert status.startswith("Name:")  # nothing read from the input before it
    mask = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    assert not mask & (1 << (signal.SIGPIPE - 1)) and not mask & (1 << (signal.SIGXFSZ - 1))
    assert fds.read_text() == "[0, 1, 2, 3]\n"  # 3: its own listing's


def test_a_program_that_is_not_there_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        spawn(["cockpit-no-such-program"], str(tmp_path / "o"), str(tmp_path / "e"))
