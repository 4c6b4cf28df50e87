"""Host text cannot drive the terminal: the bytes the app would write for each screen, with hostile
strings in the journal (a plain line and a folded traceback), the status pane, a notice, the
confirmation modal and the stacks screen, hold no control sequence but Textual's own CSI, and
show each hostile one by its escape. The lab test with a hostile host and a real terminal is
tests/lab/faults/test_hostile_text.py."""

from __future__ import annotations

import io
import re

import rich.segment
import rich.text
import textual.content
from rich.console import Console
from textual.strip import Strip

from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.stacks import ProcessStack, StackCapture, StackFrame, ThreadStack
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.stacks import StacksScreen
from tests.ui.test_app_shell import recorded_app, recorded_status

TITLE = "\x1b]2;PWNED-title\x07"
CLIPBOARD = "\x1b]52;c;UFdORUQ=\x07"
LINK = "\x1b]8;;http://pwned.invalid/\x1b\\PWNED-link\x1b]8;;\x1b\\"
C1 = "\x9d2;PWNED-c1\x9c"
EVIL = f"{TITLE}{CLIPBOARD}{LINK}{C1}\x07\u202eDENWP"
MARKUP = "[@click=app.quit]PWNED-action[/] [link=http://pwned.invalid]PWNED-markup-link[/]"
# Textual's own output: CSI sequences (cursor moves, colours, modes) only
NOT_TEXTUALS = re.compile("\x1b[^\\[]|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_bytes(app: CockpitApp) -> str:
    """What the driver would write for a full redraw of the screen as it is now."""
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=app.size.width)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return update.render_segments(console)


def assert_inert(raw: str) -> None:
    found = NOT_TEXTUALS.search(raw)
    near = raw[max(0, found.start() - 40) : found.end() + 40] if found else ""
    assert found is None, f"a control sequence reached the terminal: {near!r}"


def hostile_entries() -> list[JournalEntry]:
    lines = [
        f"plain {EVIL}",
        "Traceback (most recent call last):",
        f'  File "/opt/evil/{TITLE}model.py", line 7, in load{CLIPBOARD}',
        f"    raise ValueError({LINK!r})",
        f"ValueError: {EVIL} {MARKUP}",
    ]
    return [
        JournalEntry(message=m, cursor=f"c{i}", realtime_us=1_800_000_000_000_000 + i, pid=4242, unit="x.service")
        for i, m in enumerate(lines)
    ]


def test_the_hooks_are_where_rich_and_textual_read_them() -> None:
    """An upgrade of textual or rich that moves a hooked name fails here, not in front of a host."""
    recorded_app()  # installs them
    assert rich.text.strip_control_codes("\x1b") == "\\x1b"
    assert textual.content._strip_control_codes("\x9b") == "\\x9b"
    assert textual.content.Content(f"a{TITLE}").plain == "a\\x1b]2;PWNED-title\\x07"
    strip = Strip([rich.segment.Segment(f"x{TITLE}y")])
    assert strip.render(Console(file=io.StringIO(), force_terminal=True)) == "x]2;PWNED-titley"


async def test_hostile_text_in_every_widget_reaches_the_terminal_escaped() -> None:
    app = recorded_app()
    async with app.run_test(headless=True, size=(200, 40), notifications=True) as pilot:
        app.query_one(StatusPane).show_status(recorded_status(description=f"SGLang {EVIL}"))
        view = app.query_one(JournalView)
        view.append_entries(hostile_entries())
        app.notify(f"notice {EVIL} {MARKUP}", timeout=60)
        await pilot.pause(0.5)  # the toast is drawn a refresh later
        raw = terminal_bytes(app)
        assert_inert(raw)
        assert "plain \\x1b]2;PWNED-title\\x07" in raw  # the plain row, visible
        assert "ValueError: \\x1b]2;PWNED-title" in raw  # the folded row's summary
        assert "PWNED-action" in raw and "[@click=app.quit]" in raw  # a notice is never markup
        view.focus()
        view.cursor = 1
        await pilot.press("enter")  # unfold the traceback
        await pilot.pause()
        raw = terminal_bytes(app)
        assert_inert(raw)
        assert '/opt/evil/\\x1b]2;PWNED-title\\x07model.py", line 7, in load\\x1b]52;c;' in raw
        app.push_screen(ConfirmModal(f"End PID 4242 {TITLE}?", f"/opt/evil/{TITLE}py holds 1000 MiB {LINK}"))
        await pilot.pause()
        raw = terminal_bytes(app)
        assert_inert(raw)
        assert "End PID 4242 \\x1b]2;PWNED-title\\x07?" in raw and "/opt/evil/\\x1b]2;PWNED-title\\x07py" in raw
        app.pop_screen()
        frame = StackFrame(f"wait{CLIPBOARD}", f"/opt/evil/{TITLE}frame.py", 3)
        stack = ProcessStack(4242, f"/opt/evil/{TITLE}py", [ThreadStack(f"main{TITLE}", True, [frame])])
        app.push_screen(StacksScreen(StackCapture(at=1_800_000_000.0, processes=[stack]), "x.service"))
        await pilot.pause()
        raw = terminal_bytes(app)
        assert_inert(raw)
        assert "\\x1b]2;PWNED-title" in raw
