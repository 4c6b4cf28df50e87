"""Changing a unit: start, stop, restart, daemon-reload, reset-failed, and ending processes
that hold its GPUs, with `sudo -n` where the
host config asks for it. A password prompt or a refusal becomes one sentence, never a hang:
`sudo -n` fails at once instead of asking, and there is no terminal to ask on anyway."""

from __future__ import annotations

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, ReadOnlyError, RunResult
from cockpit.remote.sudo import explain_failure, privileged
from cockpit.systemd import process_end
from cockpit.systemd.process_end import END_GRACE_S, Ending, Identity

ACTIONS = ("start", "stop", "restart", "reset-failed")


class ControlError(CockpitError):
    pass


class UnitControl:
    """The changing systemctl verbs for one host; refuses everything on a read-only host."""

    def __init__(self, host: Host, config: HostConfig, read_only: bool = False) -> None:
        self.host = host
        self.config = config
        self.read_only = read_only or config.read_only or host.read_only  # the pool's say, whoever made this

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

    async def end_processes(self, identities: list[Identity], grace_s: float = END_GRACE_S) -> Ending:
        """SIGTERM to each process that is still the one listed, SIGKILL `grace_s` later to
        those still there (cockpit.systemd.process_end: by identity, never by a bare PID, a
        pattern or a process group)."""
        if self.read_only:
            raise ReadOnlyError(f"{self.config.name} is read-only here: no process was ended")
        return await process_end.end(self.host, self.config, identities, grace_s)
