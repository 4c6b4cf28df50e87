"""A unit as systemd loads it on a host: the fragment and drop-ins `systemctl show` names,
read over the Host, and the environment files they point at."""

from __future__ import annotations

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.flags import Catalog
from cockpit.systemd.status import UnitStatus
from cockpit.systemd.unit import Unit, is_glob, load_unit


async def load_remote_unit(host: Host, status: UnitStatus, catalog: Catalog | None = None) -> Unit:
    if not status.fragment_path:
        raise CockpitError(f"{status.unit} on {host.name} has no unit file (a transient or generated unit)")
    texts: dict[str, bytes] = {}
    for path in (status.fragment_path, *status.drop_in_paths):
        try:
            texts[path] = await host.read_file(path)
        except HostError as e:
            raise CockpitError(f"cannot read {path} on {host.name}: {e}") from None
    unit = load_unit(texts, status.fragment_path, name=status.unit, catalog=catalog)
    extra = {}
    for env_file in unit.environment_files():
        if is_glob(env_file.path):
            continue
        try:
            extra[env_file.path] = await host.read_file(env_file.path)
        except HostError:
            continue  # a missing optional file; `unresolved()` names it
    return unit.with_texts(extra) if extra else unit


async def site_packages(host: Host, python: str) -> str | None:
    """Where the service's Python installs packages: where its SGLang lives."""
    result = await host.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=30)
    return result.text.strip() or None if result.ok else None
