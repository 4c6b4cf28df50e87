"""What every `ssh` the cockpit starts is given: an ssh_config that includes the user's and the
labs' files, no questions (`BatchMode`), and the config's own host settings as options.

Kept free of asyncio and asyncssh: `cockpit status` and the app start their `ssh` with these
before importing either (cockpit.remote.mux).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cockpit.config import HostConfig


def config_paths(extra: Sequence[str] = ()) -> list[str]:
    """Any in $COCKPIT_SSH_CONFIG (colon-separated), ~/.ssh/config, then `extra`: the files the
    caller knows of (the session adds the running labs' ssh_config; this layer knows no lab)."""
    paths = [p for p in config_candidates(extra) if p.is_file()]
    return [str(p) for p in dict.fromkeys(paths)]


def config_candidates(extra: Sequence[str] = ()) -> list[Path]:
    """Every file `config_paths` looks at, there or not."""
    given = [Path(p).expanduser() for p in os.environ.get("COCKPIT_SSH_CONFIG", "").split(":") if p]
    return [*given, Path("~/.ssh/config").expanduser(), *map(Path, extra)]


def config_text(files: Sequence[str]) -> str:
    """An ssh_config that reads `files` in order, then the system's (which `-F` would skip)."""
    lines = [f'Include "{f}"' for f in files]
    if os.path.isfile("/etc/ssh/ssh_config"):
        lines.append('Include "/etc/ssh/ssh_config"')
    return "\n".join(lines) + "\n"


def _jump(config: HostConfig) -> str:
    user = f"{config.user}@" if config.user else ""
    port = f":{config.port}" if config.port else ""
    return f"{user}{config.destination}{port}"


def options(config: HostConfig, config_file: str, jump: HostConfig | None = None) -> list[str]:
    """`ssh`'s arguments before the destination: the config written for the call, never a
    question (`BatchMode`), only host keys the user has accepted (as the asyncssh connection
    checks them, whatever the ssh_config says), and the config's own host settings."""
    argv = ["ssh", "-F", config_file, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    if config.user:
        argv += ["-l", config.user]
    if config.port:
        argv += ["-p", str(config.port)]
    if config.identity_file:
        argv += ["-i", os.path.expanduser(config.identity_file)]
    if jump is not None:
        argv += ["-J", _jump(jump)]
    return argv


def last_word(said: bytes) -> str:
    """The last line ssh wrote to its stderr (its reason, when it gave up), or ""."""
    lines = said.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""
