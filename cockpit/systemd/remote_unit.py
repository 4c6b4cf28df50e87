"""A unit as systemd loads it on a host: the fragment and drop-ins `systemctl show` names,
read over the Host, and the environment files they point at."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.remote.source import SourceRoots
from cockpit.systemd.status import UnitStatus
from cockpit.systemd.unit import Unit, is_glob, load_unit
from cockpit.systemd.unit_args import FlagTable


async def load_remote_unit(host: Host, status: UnitStatus, catalog: FlagTable | None = None) -> Unit:
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


# The directories the service's interpreter imports from (with the unit's PYTHONPATH), each
# as given and with its symlinks resolved, and where it installs packages.
_PATHS = (
    "import json, os, sys, sysconfig\n"
    "dirs = [p for p in sys.path if p.startswith('/')]\n"
    "print(json.dumps([sysconfig.get_paths()['purelib'], dirs + [os.path.realpath(p) for p in dirs]]))"
)


@dataclass(frozen=True)
class ServicePython:
    python: str
    purelib: str | None  # where it installs packages: where its SGLang lives
    roots: SourceRoots  # where a traceback of the service may point


async def service_python(host: Host, python: str, unit: Unit | None = None) -> ServicePython:
    """What the service's Python imports from, as the service itself runs it: with the unit's
    PYTHONPATH, plus its WorkingDirectory (never `/`, which would hold every file)."""
    argv = [python, "-c", _PATHS]
    pythonpath = unit.environment().get("PYTHONPATH") if unit is not None else None
    if pythonpath:
        argv = ["env", f"PYTHONPATH={pythonpath}", *argv]
    result = await host.run(argv, timeout=30)
    purelib, dirs = None, []
    if result.ok:
        try:
            purelib, dirs = json.loads(result.text.strip().splitlines()[-1])
        except (ValueError, IndexError, TypeError, RecursionError):  # the host's Python prints what it likes
            purelib, dirs = None, []
    workdir = unit.working_directory() if unit is not None else None
    found = [*dirs, *([workdir] if workdir else [])]
    roots = tuple(dict.fromkeys(posixpath.normpath(d) for d in found if isinstance(d, str) and d.startswith("/")))
    return ServicePython(
        python, purelib if isinstance(purelib, str) else None, SourceRoots(tuple(d for d in roots if d != "/"))
    )
