"""One Host object, hence one connection, per host name, shared by every pane and command."""

from __future__ import annotations

from typing import Callable

from cockpit.config import Config
from cockpit.errors import UsageError
from cockpit.remote.base import Host, TrustPrompt
from cockpit.remote.local import LocalHost
from cockpit.remote.ssh import SSHHost


class HostPool:
    def __init__(
        self,
        config: Config,
        *,
        trust_prompt: TrustPrompt | None = None,
        on_state: Callable[[str, str, str | None], None] | None = None,
    ) -> None:
        self.config = config
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
            if name in _seen:
                raise UsageError(f"the jump hosts make a loop: {' -> '.join(_seen + (name,))}")
            jump = self.get(cfg.jump, _seen + (name,)) if cfg.jump else None
            host = SSHHost(
                cfg,
                trust_prompt=self.trust_prompt,
                jump=jump if isinstance(jump, SSHHost) else None,
                on_state=(lambda state, detail, n=name: self.on_state(n, state, detail)) if self.on_state else None,
            )
        self._hosts[name] = host
        return host

    async def close(self) -> None:
        for host in self._hosts.values():
            await host.close()
        self._hosts.clear()
