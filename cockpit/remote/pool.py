"""One Host object, hence one connection, per host name, shared by every pane and command.

Each host handed out is read-only when the pool's owner says so (`--read-only`) or the host's
config does (`read_only = true`): the host then refuses every change itself, whoever asks.

`ssh_configs` gives the ssh_config files beyond the user's own (the session's names the running labs'),
so this layer needs to know nothing of where they come from."""

from __future__ import annotations

import functools
from collections.abc import Callable

from cockpit.config import Config
from cockpit.errors import UsageError
from cockpit.remote.base import Host, SshConfigs, TrustPrompt
from cockpit.remote.local import LocalHost


class HostPool:
    def __init__(
        self,
        config: Config,
        *,
        trust_prompt: TrustPrompt | None = None,
        on_state: Callable[[str, str, str | None], None] | None = None,
        ssh_configs: SshConfigs = lambda: (),
        read_only: bool = False,
    ) -> None:
        self.config = config
        self.read_only = read_only
        self.ssh_configs = ssh_configs
        self.trust_prompt = trust_prompt
        self.on_state = on_state
        self._hosts: dict[str, Host] = {}

    def get(self, name: str, _seen: tuple[str, ...] = ()) -> Host:
        if name in self._hosts:
            return self._hosts[name]
        cfg = self.config.host(name)
        if cfg.local:
            host: Host = LocalHost(name)
        else:
            from cockpit.remote.ssh import SSHHost  # asyncssh takes 0.3 s to import: not before the first paint

            if name in _seen:
                raise UsageError(f"the jump hosts make a loop: {' -> '.join(_seen + (name,))}")
            jump = self.get(cfg.jump, _seen + (name,)) if cfg.jump else None
            host = SSHHost(
                cfg,
                trust_prompt=self.trust_prompt,
                jump=jump if isinstance(jump, SSHHost) else None,
                on_state=functools.partial(self.on_state, name) if self.on_state else None,
                ssh_configs=self.ssh_configs,
            )
        host.read_only = self.read_only or cfg.read_only
        self._hosts[name] = host
        return host

    def closing(self) -> None:
        """Say the connections close next, before the tasks using them are stopped: each stream
        the stop ends would otherwise wait for the host to end its command (nvidia-smi's loop
        ends only at its next block, seconds later), and quitting would wait for all of them."""
        for host in self._hosts.values():
            host.closing = True

    async def close(self) -> None:
        for host in self._hosts.values():
            await host.close()
        self._hosts.clear()
