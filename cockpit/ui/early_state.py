"""The unit's state on the terminal before the app can draw it.

`ssh host systemctl status` answers in about 0.25 s; the app's first frame comes after Python,
Textual and the app are imported and the screen is composed and drawn, about twice that on a
2-core machine, and a three-widget Textual app alone drew its first line at 1.26x that ssh
(docs/facts.md). The early OpenSSH master (cockpit/remote/mux.py) has the unit's `systemctl
show` in by the time plain ssh would: a thread waits for it while the main thread imports, and
writes the status pane's first line, where that pane will draw it, on the alternate screen
Textual then takes over. The app's first frame draws over it with the same line in the same
place, and the rest of the screen around it.

The line is drawn until the app's first frame: `hand_over`, called as that frame is about to
be written, makes a later answer draw nothing, and `give_back` (when the app fails before it
starts) leaves the alternate screen again. Textual's driver starts about 0.06 s before that
frame (composing the screen and mounting the panes come between); an answer in that stretch is
drawn too, a write of its own between the driver's opening sequences, each also one write, and
ahead of the frame, which waits for the lock the write holds. Drawn only up to Textual's start,
the line waited for the frame, 0.1 s after it, in 7 launches of 45 (docs/facts.md). What the
host sent is shown through `printable`.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from cockpit.printable import printable

if TYPE_CHECKING:
    from cockpit.remote.mux import MuxHost

# The alternate screen, cursor hidden, cleared. Its cursor is put back where it came in (CSI s,
# CSI u: control sequences only, as everything else the app writes): xterm saves the cursor at
# Textual's own `?1049h` too, before or after this one, and puts the shell's prompt there when
# the app ends (Textual moves no cursor before its first frame).
ENTER = "\x1b[?1049h\x1b[?25l\x1b[s\x1b[H\x1b[2J"
BACK = "\x1b[u"
LEAVE = "\x1b[?25h\x1b[?1049l"
WAIT_S = 5.0  # the app's first frame comes well before: past it, the line is not worth drawing
# SGR of the status pane's state styles (cockpit/ui/panes/status.py, the theme's colours).
STATE_SGR = {
    "active": "1;32",
    "reloading": "1;32",
    "activating": "1;33",
    "deactivating": "1;33",
    "failed": "1;31",
    "inactive": "1;2",
}


def headline(active: str, sub: str, unit: str, host: str) -> str:
    """The status pane's first row as the terminal gets it: ` ● active (running)   UNIT on HOST`."""
    sgr = STATE_SGR.get(active, "2")
    state = printable(f"{active} ({sub})")
    return f" \x1b[{sgr}m● {state}\x1b[0m   \x1b[1m{printable(unit)}\x1b[0m\x1b[2m on {printable(host)}\x1b[0m"


class EarlyState:
    """Draws the unit's state from `reader`'s first answer on `fd`, once, from a thread."""

    def __init__(self, reader: MuxHost, fd: int) -> None:
        self._reader, self._fd = reader, fd
        self._lock = threading.Lock()
        self._ours = True  # the terminal is not Textual's yet
        self.drawn = False
        self._thread = threading.Thread(target=self._draw, name="early-state", daemon=True)
        self._thread.start()

    def _draw(self) -> None:
        answer = self._reader.first_answer_in(WAIT_S)
        if answer is None or not answer.ok:
            return
        from cockpit.systemd.status import parse_show

        statuses = parse_show(answer.text, self._reader.name)
        if len(statuses) != 1 or statuses[0].load_state != "loaded":
            return  # the app says what is wrong, in words
        st = statuses[0]
        line = headline(st.active_state, st.sub_state, st.unit, st.host)
        with self._lock:
            if self._ours:
                os.write(self._fd, f"{ENTER}{line}{BACK}".encode())
                self.drawn = True

    def hand_over(self) -> None:
        """Textual draws from now on (its first frame, or the app has ended without one): an
        answer that comes later draws nothing, and one being drawn is written first."""
        with self._lock:
            self._ours = False

    def give_back(self) -> None:
        """The app did not start: leave the alternate screen the line was drawn on."""
        self.hand_over()
        if self.drawn:
            os.write(self._fd, LEAVE.encode())
