"""The one set-up every subcommand that talks to a unit shares: the config, the target, a
session over it (its host pool knows the running labs' ssh_config), and the close.

Each subcommand wrote this itself before, five times, with its own idea of where the config
came from and when the pool was closed."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from cockpit import config as config_mod
from cockpit.config import Config
from cockpit.errors import UsageError
from cockpit.targets import Target, resolve

if TYPE_CHECKING:
    from cockpit.remote.mux import MuxHost
    from cockpit.session import Session


def targets_of(args: argparse.Namespace) -> tuple[Config, list[tuple[str, Target]]]:
    """The config and the units a command is about: `--deployment D`'s nodes (node 0 first), or
    the one unit `--host`/`--unit` name, as its own node."""
    name = getattr(args, "deployment", None)
    if not name:
        cfg, target = target_of(args)
        assert target is not None
        return cfg, [(target.unit, target)]
    if getattr(args, "unit", None) or getattr(args, "host", None):
        raise UsageError("--deployment names its nodes' units itself: give it without --host and --unit")
    from cockpit.targets import deployment_targets

    cfg = config_mod.load(getattr(args, "config", None))
    return cfg, deployment_targets(cfg, name)


def target_of(args: argparse.Namespace, *, unit: bool = True) -> tuple[Config, Target | None]:
    """The config and the unit `--host`/`--unit` name (or a [units] entry). With `unit=False`
    and no `--unit`, no target: a command about `--host` alone (or, for the app, the picker)."""
    cfg = config_mod.load(getattr(args, "config", None))
    host, name = getattr(args, "host", None), getattr(args, "unit", None)
    if unit or name:
        return cfg, resolve(cfg, host, name)
    return cfg, None


def early_reader(cfg: Config, target: Target) -> MuxHost | None:
    """An OpenSSH master for the target's host, logging in from now on and asking the unit's
    status first (cockpit.remote.mux); None for the jump box itself."""
    from cockpit.config.reader import config_candidates
    from cockpit.lab.paths import lab_dirs, ssh_configs
    from cockpit.remote import early_master
    from cockpit.remote.mux import MuxHost
    from cockpit.remote.ssh_client import config_candidates as ssh_candidates
    from cockpit.remote.ssh_client import config_paths
    from cockpit.systemd.status import show_argv

    host = cfg.host(target.host)
    if host.local:
        return None
    jump = cfg.host(host.jump) if host.jump else None
    labs = [str(p) for p in ssh_configs()]
    reader = MuxHost(host, config_paths(labs), jump, first=show_argv([target.unit]))
    # what chose that command line: the config (or where one would be), the ssh_config files,
    # and the labs' directories (a lab made since, or given its ssh_config, brings its own)
    chose = [*([cfg.path] if cfg.path else []), *config_candidates(), *ssh_candidates(labs), *lab_dirs()]
    early_master.remember(reader.master, reader.conf, [str(p) for p in (*chose, "/etc/ssh/ssh_config")])
    return reader


@contextlib.asynccontextmanager
async def open_target(
    args: argparse.Namespace, *, unit: bool = True, read_only: bool = False
) -> AsyncIterator[Session]:
    """A session of the target (`target_of`); with `unit=False` and no `--unit`, a session of
    the host alone (its `target` is None, `host_named(args.host)` reaches it). No trust prompt:
    an unknown host key is an error here, not a question. The session is closed after."""
    cfg, target = target_of(args, unit=unit)
    if target is None and not getattr(args, "host", None):
        raise UsageError("give --host")
    async with session_of(cfg, target, read_only=read_only or getattr(args, "read_only", False)) as session:
        yield session


@contextlib.asynccontextmanager
async def session_of(
    cfg: Config,
    target: Target | None,
    *,
    read_only: bool = False,
    reader: MuxHost | None = None,
    group: str | None = None,
) -> AsyncIterator[Session]:
    """A session of a target already resolved (with `group`, that [deployments] entry, whose node
    0 `target` is), with the OpenSSH master started for it early, if any; closed after."""
    from cockpit.session import Session  # asyncssh and the rest: only for a command that connects

    session = Session(cfg, target, read_only=read_only, reader=reader, group=group)
    try:
        yield session
    finally:
        await session.close()
