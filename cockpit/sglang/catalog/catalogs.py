"""Flag catalogs of the releases installed on hosts, and what each says of its health endpoints,
read over the host's files (never an import), cached per host, package root and release."""

from __future__ import annotations

import posixpath

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.flags import VERSION_MODULES, Catalog, catalog_from_sources, version_from
from cockpit.sglang.catalog.generation import ENVIRON, HTTP_SERVER, HealthRoutes, routes_from_sources


def package_root_of(path: str) -> str | None:
    """`/opt/x/lib/python3.11/site-packages/sglang/srt/a.py` -> `/opt/x/lib/python3.11/site-packages`."""
    marker = "/sglang/"
    i = path.rfind(marker)
    return path[:i] if i > 0 else None


async def remote_version(host: Host, root: str) -> str | None:
    found = await host.run(["find", root, "-maxdepth", "1", "-name", "sglang-*.dist-info"], timeout=30)
    for dist in sorted(found.text.split()):
        try:
            version = version_from(metadata=(await host.read_file(f"{dist}/METADATA")).decode("utf-8", "replace"))
        except HostError:
            continue
        if version:
            return version
    for module in VERSION_MODULES:
        try:
            version = version_from(module=(await host.read_file(f"{root}/{module}")).decode("utf-8", "replace"))
        except HostError:
            continue
        if version:
            return version
    return None


class CatalogCache:
    def __init__(self) -> None:
        self._catalogs: dict[tuple[str, str, str | None], Catalog] = {}
        self._routes: dict[tuple[str, str, str | None], HealthRoutes] = {}

    async def get(self, host: Host, root: str) -> Catalog:
        version = await remote_version(host, root)
        key = (host.name, root, version)
        if key not in self._catalogs:
            self._catalogs[key] = await self._load(host, root, version)
        return self._catalogs[key]

    async def _load(self, host: Host, root: str, version: str | None) -> Catalog:
        srt = posixpath.join(root, "sglang", "srt")
        listed = await host.run(["find", posixpath.join(srt, "arg_groups"), "-name", "*.py"], timeout=30)
        paths = [posixpath.join(srt, "server_args.py"), *sorted(listed.text.split() if listed.ok else [])]
        sources = {}
        for path in paths:
            try:
                sources[path] = (await host.read_file(path)).decode("utf-8", "replace")
            except HostError as e:
                if path.endswith("server_args.py"):
                    raise CockpitError(f"no SGLang flag list on {host.name}: {e}") from None
        return catalog_from_sources(sources, version)

    async def health_routes(self, host: Host, root: str) -> HealthRoutes:
        """What the release under `root` does on `/health` (cockpit.sglang.catalog.generation): its
        http_server.py's routes and its environ.py's switches. A release with no environ.py
        (before 0.5.9) has no switch; one whose http_server.py cannot be read says not known."""
        version = await remote_version(host, root)
        key = (host.name, root, version)
        if key not in self._routes:
            srt = posixpath.join(root, "sglang", "srt")
            texts: dict[str, str | None] = {}
            for name in (ENVIRON, HTTP_SERVER):
                try:
                    texts[name] = (await host.read_file(posixpath.join(srt, name))).decode("utf-8", "replace")
                except HostError:
                    texts[name] = None
            self._routes[key] = routes_from_sources(version, texts[ENVIRON], texts[HTTP_SERVER])
        return self._routes[key]
