"""What one unit deploys, found once and the same way for every caller: its status, its unit
files, the Python that runs it (where that Python imports from and installs to), and the
SGLang release there with its flag catalog.

The app, the incident note and `cockpit preflight` all need this sequence; each wrote it once
with its own error handling, so a host that answered one differently from the others showed
different facts. The one contract: the status must be read (a CockpitError otherwise, as the
unit is then not there to talk about); every later step that fails leaves its fact None and
adds one sentence, naming what could not be found, to `problems`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.remote.source import PACKAGE_DIRS, SourceRoots
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.server.endpoint import serving_address
from cockpit.systemd.remote_unit import ServicePython, load_remote_unit, service_python
from cockpit.systemd.status import UnitStatus, fetch
from cockpit.systemd.unit import Unit
from cockpit.targets import DEFAULT_URL, Target


def off_gpus(device: str | None) -> str | None:
    """Why a server uses none of the host's GPUs (None: it does): a `--device` other than CUDA.
    The lab's real SGLang on `--device cpu` was told that every GPU process was its own concern."""
    if device is None or device.startswith("cuda"):
        return None
    return f"the server runs on --device {device}, not on the GPUs"


@dataclass
class Deployment:
    target: Target
    status: UnitStatus
    unit: Unit | None = None  # with `catalog` attached, so its flags read as the release reads them
    python: ServicePython | None = None
    catalog: Catalog | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def command(self) -> list[str]:
        return self.unit.exec() if self.unit is not None else []

    @property
    def interpreter(self) -> str | None:
        """The service's Python: the config's `python`, else the program its ExecStart runs."""
        return self.target.python or next(iter(self.command), None)

    @property
    def package_root(self) -> str | None:
        """Where the service's Python installs packages: where its SGLang lives."""
        return self.python.purelib if self.python is not None else None

    @property
    def roots(self) -> SourceRoots:
        """Where a traceback of the service may point (any package directory until known)."""
        return self.python.roots if self.python is not None else PACKAGE_DIRS

    @property
    def off_gpus(self) -> str | None:
        return off_gpus(self.unit.flag_values().get("--device")) if self.unit is not None else None

    @property
    def address(self) -> tuple[str, int]:
        """Where the server listens, as the host reaches it: the config's url when it names
        one, else the unit's own --host and --port."""
        if self.target.url != DEFAULT_URL or self.unit is None:
            return self.target.url_host_port
        return serving_address((i.name, i.value) for i in self.unit.flags())


async def read_deployment(
    host: Host,
    target: Target,
    *,
    catalogs: CatalogCache,
    status: UnitStatus | None = None,
    python: bool = True,
) -> Deployment:
    """`python=False`: stop after the unit's files (enough for its address: `cockpit status`)."""
    found = Deployment(target, status if status is not None else await fetch(host, target.unit))
    try:
        unit = await load_remote_unit(host, found.status)
    except CockpitError as e:
        found.problems.append(f"the unit's files: {e}")
        return found
    found.unit = unit
    if not python:
        return found
    interpreter = found.interpreter
    if interpreter is None:
        found.problems.append("the service's Python: the unit has no ExecStart")
        return found
    try:
        found.python = await service_python(host, interpreter, unit)
    except (HostError, CockpitError) as e:
        found.problems.append(f"where the service's Python keeps SGLang: {e}")
        return found
    root = found.package_root
    if root is None:
        found.problems.append(f"where the service's Python keeps SGLang: {interpreter} on {host.name} did not say")
        return found
    try:
        found.catalog = await catalogs.get(host, root)
    except CockpitError as e:
        found.problems.append(f"SGLang's flag list: {e}")
        return found
    found.unit = replace(unit, catalog=found.catalog)
    return found
