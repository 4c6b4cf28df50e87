"""The early state line (cockpit/ui/early_state.py): drawn only while the terminal is the
cockpit's, taken back when the app does not start, and inert whatever the host sent."""

from __future__ import annotations

import os
import signal
import subprocess
import threading

from cockpit.remote.base import RunResult
from cockpit.remote.mux import ended_within
from cockpit.ui.early_state import ENTER, LEAVE, EarlyState, headline

SHOW = "Id={unit}\nLoadState=loaded\nActiveState=active\nSubState=running\n"


class Answer:
    """A master whose first answer comes when `release` is set (the real one is in the lab test)."""

    def __init__(self, text: str, name: str = "gpu-7") -> None:
        self.name, self.text = name, text
        self.release = threading.Event()

    def first_answer_in(self, timeout: float) -> RunResult | None:
        self.release.wait(timeout)
        return RunResult(("systemctl",), 0, self.text.encode(), b"")


def read_now(fd: int) -> bytes:
    """What the non-blocking pipe `fd` holds now (nothing drawn: b"")."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def _drawn(reader: Answer, *, hand_over_first: bool = False, give_back: bool = False) -> bytes:
    read, write = os.pipe()
    os.set_blocking(read, False)
    try:
        early = EarlyState(reader, write)  # type: ignore[arg-type]
        if hand_over_first:
            early.hand_over()
        reader.release.set()
        early._thread.join(5)
        if give_back:
            early.give_back()
        return read_now(read)
    finally:
        os.close(read)
        os.close(write)


def test_the_line_is_the_status_panes_first_row() -> None:
    drawn = _drawn(Answer(SHOW.format(unit="sglang-demo.service"))).decode()
    assert drawn.startswith(ENTER)
    assert "● active (running)" in drawn and "sglang-demo.service" in drawn and " on gpu-7" in drawn


def test_an_answer_after_the_hand_over_draws_nothing_and_a_failed_start_leaves_the_screen() -> None:
    assert _drawn(Answer(SHOW.format(unit="u.service")), hand_over_first=True) == b""
    assert _drawn(Answer(SHOW.format(unit="u.service")), give_back=True).endswith(LEAVE.encode())
    # Nothing drawn, nothing to leave: the terminal is left as it was.
    assert _drawn(Answer("Id=u.service\nLoadState=not-found\n"), give_back=True) == b""


def test_what_the_host_sent_is_shown_by_its_escapes() -> None:
    line = headline("active\x1b]52;c;cm0gLXJmIC8=\x07", "running", "u\x1b[2J.service", "h")
    assert "\x1b]" not in line and "\x07" not in line and "\x1b[2J" not in line
    assert "\\x1b]52;c;cm0gLXJmIC8=\\x07" in line and "u\\x1b[2J.service" in line


def test_the_wait_for_the_first_answer_ends_when_ssh_does() -> None:
    """`ended_within` (what the early line waits with): None while the process runs, its status
    once it ended, also when another thread reaped it first (the app's own wait for the answer)."""
    running = subprocess.Popen(["sleep", "30"])
    try:
        assert ended_within(running, 0.05) is None
        running.kill()
        assert ended_within(running, 5) == -signal.SIGKILL
        assert ended_within(running, 0) == -signal.SIGKILL  # asked again: the status kept
    finally:
        running.kill()
        running.wait()
    ended = subprocess.Popen(["sh", "-c", "exit 3"])
    reaper = threading.Thread(target=ended.wait)
    reaper.start()
    reaper.join()
    assert ended_within(ended, 5) == 3
    # ending while waited for, by this and by another thread at once
    later = subprocess.Popen(["sh", "-c", "sleep 0.2; exit 4"])
    reaper = threading.Thread(target=later.wait)
    reaper.start()
    assert ended_within(later, 5) == 4
    reaper.join()
    assert later.returncode == 4
