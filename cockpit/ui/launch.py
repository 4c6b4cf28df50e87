"""`cockpit` with no subcommand: the app on the unit the command line names, on a terminal."""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

from cockpit.config import Config
from cockpit.errors import UsageError
from cockpit.remote.early_master import import_yielding
from cockpit.targets import Target, all_targets
from cockpit.ui.early_state import EarlyState

if TYPE_CHECKING:
    from cockpit.remote.mux import MuxHost


def open_app(
    cfg: Config,
    target: Target | None,
    *,
    read_only: bool = False,
    reader: MuxHost | None = None,
    group: str | None = None,
) -> int:
    """The app on `target`; with none given, on the config's one unit, or the picker for several;
    with `group`, on that deployment's node 0 with the group watched."""
    collect_less_often()  # before the app's imports: the collector ran 94 times in them, 3 times at these
    use_the_terminal()
    early = EarlyState(reader, sys.stdout.fileno()) if reader is not None else None
    try:
        if reader is not None:
            import_yielding("cockpit.ui.app")
        from cockpit.ui.app import CockpitApp

        if target is None:
            targets = all_targets(cfg)
            target = targets[0] if len(targets) == 1 else None
        app = CockpitApp(cfg, target, read_only=read_only, reader=reader, group=group, early=early)
    except BaseException:
        if early is not None:
            early.give_back()
        raise
    try:
        app.run()
    finally:
        if early is not None:
            early.hand_over()  # the app drew its first frame, or ended without one
        # The process ends next, and the interpreter's collections at exit walked every object
        # the app and its imports made: 0.39 to 0.45 s from the last line of Python to the
        # shell's prompt (py-spy: gc_collect_main). Frozen, they are left to the exit to free.
        gc.freeze()
    return 0


GC_THRESHOLDS = (20_000, 20, 10)


def collect_less_often() -> None:
    """The cyclic collector at a pace for an app that makes thousands of short-lived objects a
    frame (Strips, each with seven caches) while holding a window of 200,000 lines: at Python's
    default (700, 10, 10) it ran 14 times a batch of 500 lines, and its collections together took
    890 ms per 80,000 lines in the flood harness, each full one about 100 ms (a frame's worth of
    keys waiting); at these, 178 ms (docs/facts.md)."""
    gc.set_threshold(*GC_THRESHOLDS)


def use_the_terminal() -> None:
    """Draw on the terminal even when stdout is a pipe (`make demo | tee log`): Textual sizes the
    screen from stdout, so a pipe there drew it at 80x24 in a bigger terminal. The terminal is
    /dev/tty, the one stdin comes from; with none at all, one sentence instead of a broken screen."""
    if sys.stdout.isatty() and sys.stderr.isatty():
        return
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise UsageError(
            "the cockpit needs a terminal: standard output is not one and there is no /dev/tty "
            "(run it in a terminal, or use a headless subcommand such as `cockpit status`)"
        ) from None
    for stream in (sys.stdout, sys.stderr):
        if not stream.isatty():
            stream.flush()
            os.dup2(tty, stream.fileno())
    os.close(tty)
