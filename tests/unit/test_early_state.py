"""The early state line (cockpit/ui/early_state.py): drawn only while the terminal is the
cockpit's, taken back when the app does not start, and inert whatever the host sent."""

from __future__ import annotations

import os
import threading

from cockpit.remote.base import RunResult
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
