"""`cockpit` with no subcommand: load the config, pick the unit, run the app."""

from __future__ import annotations

import argparse
import os
import sys

from cockpit import config as config_mod
from cockpit.config import Config
from cockpit.errors import UsageError
from cockpit.targets import Target, all_targets, resolve


def run_app(args: argparse.Namespace) -> int:
    cfg = config_mod.load(args.config)
    return open_app(cfg, args.unit, host=args.host, read_only=args.read_only)


def open_app(cfg: Config, unit: str | None, *, host: str | None = None, read_only: bool = False) -> int:
    from cockpit.ui.app import CockpitApp

    target: Target | None
    if host or unit:
        target = resolve(cfg, host, unit)
    else:
        targets = all_targets(cfg)
        target = targets[0] if len(targets) == 1 else None  # several: the picker opens
    use_the_terminal()
    CockpitApp(cfg, target, read_only=read_only).run()
    return 0


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
