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


def sglang_source(version: str, progress=print) -> Path:
    """A directory holding `sglang/` and its dist-info for `version`: the real release's source."""
    target = cache_root() / "sglang" / version
    if is_complete(target):
        return target
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        progress(f"downloading the SGLang {version} source (pip download --no-deps sglang=={version})")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"sglang=={version}", "-d", str(wheels)],
            capture_output=True,
            text=True,
        )
        found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
        if proc.returncode != 0 or not found:
            last = (proc.stderr.strip().splitlines() or ["no wheel came"])[-1].removeprefix("ERROR: ")
            if "no matching distribution" in last.lower() or "could not find a version" in last.lower():
                raise CockpitError(f"SGLang {version} is not a release on PyPI (pip download found none)")
            raise CockpitError(f"could not download SGLang {version}: {last}")

    def unpack(work: Path) -> None:
        with zipfile.ZipFile(found[-1]) as wheel:
            for name in wheel.namelist():
                top = name.split("/", 1)[0]
                if name.endswith(".py") and top == "sglang" or top.endswith(".dist-info"):
                    wheel.extract(name, work)

    return build_once(target, unpack, found[-1].name)
