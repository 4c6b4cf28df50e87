"""Changing a unit: start, stop, restart, daemon-reload, reset-failed, with `sudo -n` where the
host config asks for it. A password prompt or a refusal becomes one sentence, never a hang:
`sudo -n` fails at once instead of asking, and there is no terminal to ask on anyway."""

from __future__ import annotations

from typing import Sequence

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, RunResult

ACTIONS = ("start", "stop", "restart", "reset-failed")


class ControlError(CockpitError):
    pass


class ReadOnlyError(CockpitError):
    pass


def privileged(config: HostConfig, argv: Sequence[str]) -> list[str]:
    return ["sudo", "-n", *argv] if config.sudo else list(argv)


def explain_failure(host: str, user: str | None, argv: Sequence[str], result: RunResult) -> str:
    """One sentence for a failed privileged command."""
    err = (result.error_text or result.text).strip()
    low = err.lower()
    tool = argv[2] if argv[:2] == ["sudo", "-n"] and len(argv) > 2 else argv[0]
    who = user or "this user"
    if "a password is required" in low or "a terminal is required" in low:
        return f"sudo on {host} needs a password: allow `{tool}` for {who} with NOPASSWD"
    if "not in the sudoers" in low or "not allowed to execute" in low or "may not run sudo" in low:
        return f"{who} may not run `sudo {tool}` on {host}: add a sudoers rule with NOPASSWD for it"
    if "interactive authentication required" in low or "access denied" in low:
        return (f"{who} on {host} may not manage units without sudo: set `sudo = true` for this host "
                "and allow `sudo -n systemctl` with NOPASSWD")
    if "not found" in low and "unit" in low:
        unit = argv[-1]
        return f"unit {unit} not found on {host}"
    first = err.splitlines()[0] if err else f"exit status {result.returncode}"
    return f"`{' '.join(argv)}` failed on {host}: {first}"


class UnitControl:
    """The changing systemctl verbs for one host; refuses everything on a read-only host."""

    def __init__(self, host: Host, config: HostConfig, read_only: bool = False) -> None:
        self.host = host
        self.config = config
        self.read_only = read_only or config.read_only

    async def _systemctl(self, *args: str, timeout: float = 120.0) -> RunResult:
        if self.read_only:
            raise ReadOnlyError(f"{self.config.name} is read-only here: `systemctl {' '.join(args)}` was not run")
        argv = privileged(self.config, ["systemctl", *args])
        result = await self.host.run(argv, timeout=timeout)
        if not result.ok:
            raise ControlError(explain_failure(self.config.name, self.config.user, argv, result))
        return result

    async def act(self, action: str, unit: str) -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action}")
        # --no-block for stop/restart would hide failures to start; Type=simple returns at exec.
        await self._systemctl(action, "--", unit)

    async def daemon_reload(self) -> None:
        await self._systemctl("daemon-reload")
