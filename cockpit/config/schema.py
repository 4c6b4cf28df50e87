"""The cockpit's config as dataclasses: what a host, a unit, a load profile and the UI may say.
`cockpit.config.reader` fills them from TOML."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass


DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class HostConfig:
    """How to reach one host: an ssh_config alias, or explicit connection settings."""

    name: str
    ssh: str | None = None  # ssh_config alias; defaults to `name` when no `hostname` is given
    hostname: str | None = None
    user: str | None = None
    port: int | None = None
    jump: str | None = None  # ProxyJump: another [hosts] entry or an ssh_config alias
    identity_file: str | None = None
    sudo: bool = False  # prefix changing systemctl/install calls with `sudo -n`
    read_only: bool = False
    local: bool = False  # the jump box itself: run commands locally, no SSH

    @property
    def ssh_alias(self) -> str:
        return self.ssh or self.name

    @property
    def destination(self) -> str:
        """What an SSH client is told to connect to: the hostname, else the ssh_config alias."""
        return self.hostname or self.ssh_alias


@dataclass(frozen=True)
class UnitConfig:
    """One SGLang service: where it runs and how to reach its HTTP API from that host."""

    name: str
    host: str
    unit: str
    python: str | None = None  # the Python that runs SGLang; None: taken from ExecStart
    url: str = "http://127.0.0.1:30000"
    profile: str = "default"


@dataclass(frozen=True)
class DeploymentConfig:
    """One SGLang launch that spans nodes: its [units] entries in node-rank order (node 0 first)."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class LoadProfile:
    """A load-run sweep: concurrency levels, requests per level, prompt and output sizes."""

    name: str
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests: int = 64
    warmup: int = 2
    input_len: int = 1024
    output_len: int = 256
    endpoint: str = "completions"  # or "chat"


@dataclass(frozen=True)
class UIConfig:
    theme: str = "cockpit-dark"
    keys: dict[str, str] = field(default_factory=dict)  # binding id -> keys, for App.set_keymap


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    hosts: dict[str, HostConfig] = field(default_factory=dict)
    units: dict[str, UnitConfig] = field(default_factory=dict)
    profiles: dict[str, LoadProfile] = field(default_factory=dict)
    ui: UIConfig = field(default_factory=UIConfig)
    deployments: dict[str, DeploymentConfig] = field(default_factory=dict)

    def host(self, name: str) -> HostConfig:
        """A configured host, or an ssh_config alias of that name with default settings."""
        return self.hosts.get(name) or HostConfig(name=name)

    def profile(self, name: str) -> LoadProfile:
        return self.profiles.get(name) or LoadProfile(name=name)
