"""`cockpit` with no subcommand: load the config, pick the unit, run the app."""

from __future__ import annotations

import argparse

from cockpit import config as config_mod
from cockpit.targets import Target, all_targets, resolve


def run_app(args: argparse.Namespace) -> int:
    from cockpit.ui.app import CockpitApp

    cfg = config_mod.load(args.config)
    target: Target | None
    if args.host or args.unit:
        target = resolve(cfg, args.host, args.unit)
    else:
        targets = all_targets(cfg)
        target = targets[0] if len(targets) == 1 else None  # several: the picker opens
    CockpitApp(cfg, target, read_only=args.read_only).run()
    return 0
