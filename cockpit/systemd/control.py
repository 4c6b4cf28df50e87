"""Changing a unit: start, stop, restart, daemon-reload, reset-failed, with `sudo -n` where the
host config asks for it. A password prompt or a refusal becomes one sentence, never a hang:
`sudo -n` fails at once instead of asking, and there is no terminal to ask on anyway."""

from __future__ import annotations

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, RunResult
from cockpit.remote.sudo import explain_failure, privileged

ACTIONS = ("start", "stop", "restart", "reset-failed")


class ControlError(CockpitError):
    pass


class ReadOnlyError(CockpitError):
    pass


class UnitControl:
    """The changing systemctl verbs for one host; refuses everything on a read-only host."""

    def __init__(self, host: Host, config: HostConfig, read_only: bool = False) -> None:
        self.host = host
        self.config = config
        self.read_only = read_only or config.read_only

    async def _systemctl(self, *args: str, timeout: float = 120.0) -> RunResult:
        if self.read_only:
            raise ReadOnlyError(f"{self.config.name} is read-only here: `systemctl {' '.join(args)}` was not run")
        argv = privileged(self.config.sudo, ["systemctl", *args])
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
