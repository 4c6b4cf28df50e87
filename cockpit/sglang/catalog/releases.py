"""The Python source of an SGLang release, from PyPI (`pip download --no-deps sglang==V`),
unpacked once into a cache: for the lab to show, for pre-flight and explain offline, and for
the tests, which check the cockpit against every release it claims to understand."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from cockpit.errors import CockpitError
from cockpit.localfs import build_once, is_complete


def cache_root() -> Path:
    """Shared with the lab's image cache when writable (root), else the user's cache."""
    explicit = os.environ.get("COCKPIT_LAB_CACHE")
    if explicit:
        return Path(explicit)
    shared = Path("/var/cache/cockpit-lab")
    if os.access(shared, os.W_OK) or (not shared.exists() and os.access(shared.parent, os.W_OK)):
        return shared
    return Path("~/.cache/cockpit").expanduser()


def wheel(project: str, version: str, progress=print, name: str | None = None) -> Path:
    """The wheel of `project==version` for this machine, downloaded once into the cache
    (`name`: the project as sentences say it)."""
    name = name or project
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = f"{project.replace('-', '_')}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if found:
        return found[-1]
    progress(f"downloading the {name} {version} wheel (pip download --no-deps {project}=={version})")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"{project}=={version}", "-d", str(wheels)],
        capture_output=True,
        text=True,
    )
    found = sorted(wheels.glob(pattern))
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no wheel came"])[-1].removeprefix("ERROR: ")
        if "no matching distribution" in last.lower() or "could not find a version" in last.lower():
            raise CockpitError(f"{name} {version} is not a release on PyPI (pip download found none)")
        raise CockpitError(f"could not download {name} {version}: {last}")
    return found[-1]


def sglang_source(version: str, progress=print) -> Path:
    """A directory holding `sglang/` and its dist-info for `version`: the real release's source."""
    target = cache_root() / "sglang" / version
    if is_complete(target):
        return target
    found = wheel("sglang", version, progress, name="SGLang")

    def unpack(work: Path) -> None:
        with zipfile.ZipFile(found) as archive:
            for member in archive.namelist():
                top = member.split("/", 1)[0]
                if member.endswith(".py") and top == "sglang" or top.endswith(".dist-info"):
                    archive.extract(member, work)

    return build_once(target, unpack, found.name)
