"""Where labs keep their files; the SSH layer reads the ssh_config files found here."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_NAME = "cockpit-lab"


def run_root() -> Path:
    """Per-boot state of running labs (PID, address); gone after a reboot, like the labs."""
    return Path(os.environ.get("COCKPIT_LAB_RUN", "/run/cockpit-lab"))


def state_root() -> Path:
    """Keys, ssh_config and known_hosts of each lab, kept across `down` and `up`."""
    return Path(os.environ.get("COCKPIT_LAB_STATE", "/var/lib/cockpit-lab"))


def lab_dirs() -> list[Path]:
    """The labs' state root and each lab's directory in it: what a lab made, or given its
    ssh_config, changes (the early master's memory watches them, cockpit/remote/early_master.py)."""
    root = state_root()
    try:
        return [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    except OSError:
        return [root]


def ssh_configs() -> list[Path]:
    """The ssh_config files of labs that are up, so `--host cockpit-lab` needs no setup."""
    root = state_root()
    try:
        return sorted(p for p in root.glob("*/ssh_config") if p.is_file())
    except OSError:
        return []
