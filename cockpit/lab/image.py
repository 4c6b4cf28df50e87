"""The lab's root filesystem and the SGLang source it shows, built once and cached.

The image is keyed by a hash of its recipe (suite, mirror, packages, the setup script), so a
changed recipe builds a new image and an unchanged one is never rebuilt; each boot runs on a
throw-away overlay of it. The SGLang source it shows comes from cockpit.sglang.catalog.releases.

The real-SGLang flavour adds, on top of that image, a service Python where one SGLang release
really imports and serves on the CPU (its wheel and the pinned CPU-runnable part of what it
imports, torch included): there the pre-flight's dry run gives SGLang's own verdict instead of
"not run", and the lab's real units (guest/real-sglang/, installed at boot) serve a tiny model.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from cockpit.errors import CockpitError, UsageError
from cockpit.localfs import build_once, is_complete
from cockpit.sglang.catalog.releases import cache_root, wheel

HERE = Path(__file__).parent
SETUP_SCRIPT = HERE / "image-setup.sh"
PY_SPY = "0.4.3"  # real py-spy in /usr/local/bin: `cockpit stacks` reads real stacks of the stand-in
# How the real-SGLang layer is made, in the image's key: a changed way builds a new image.
REAL_SGLANG_INSTALL = "pip --no-deps --target, then compiled by the image's own Python"


@dataclass(frozen=True)
class Release:
    """A Debian release a lab can run: GPU hosts run several (Ubuntu 22.04 and 24.04, Debian
    12 and 13), with systemd 252 to 257, Python 3.11 to 3.13 and OpenSSH 9.2 to 10."""

    suite: str
    python: str  # the interpreter it ships, whose site-packages the lab's SGLang sits in

    @property
    def site_packages(self) -> str:
        return f"/opt/sglang/venv/lib/{self.python}/site-packages"


RELEASES = {"bookworm": Release("bookworm", "python3.11"), "trixie": Release("trixie", "python3.13")}
DEFAULT_RELEASE = "bookworm"  # the fixture tracebacks name its Python's site-packages


def release(name: str) -> Release:
    if name not in RELEASES:
        raise UsageError(f"release {name!r}: the lab runs {' or '.join(RELEASES)}")
    return RELEASES[name]


@dataclass(frozen=True)
class Recipe:
    suite: str = DEFAULT_RELEASE
    mirror: str = "http://deb.debian.org/debian"
    packages: tuple[str, ...] = (
        "systemd",
        "systemd-sysv",
        "dbus",
        "openssh-server",
        "python3",
        "python3-venv",
        "sudo",
        "iproute2",
        "procps",
    )

    def base_key(self) -> str:
        """The debootstrap stage: the slow part, kept when only the setup script changes."""
        h = hashlib.sha256()
        for part in (self.suite, self.mirror, ",".join(sorted(self.packages))):
            h.update(part.encode() + b"\0")
        return h.hexdigest()[:16]

    py_spy: str = PY_SPY
    real_sglang: str | None = None  # the SGLang release the service Python really imports

    def key(self) -> str:
        h = hashlib.sha256(self.base_key().encode())
        h.update(SETUP_SCRIPT.read_bytes())
        h.update(f"py-spy {self.py_spy}".encode())
        if self.real_sglang is not None:
            h.update(f"real sglang {self.real_sglang}; {REAL_SGLANG_INSTALL}".encode())
            h.update(real_sglang_lock(self.real_sglang).read_bytes())
        return h.hexdigest()[:16]

    def plain(self) -> Recipe:
        """The image this one is built on: the same without a real SGLang."""
        return replace(self, real_sglang=None)


REAL_SGLANG = ("0.5.23",)  # releases with a lock of what their resolution and their server import


def real_sglang_lock(version: str) -> Path:
    """The pinned packages the service Python needs besides SGLang to resolve its arguments and
    to serve on a CPU."""
    if version not in REAL_SGLANG:
        raise UsageError(
            f"the real-SGLang lab has SGLang {' or '.join(REAL_SGLANG)}, not {version}: "
            "a release needs its own lock of what its argument resolution and its server import"
        )
    return HERE / f"real-sglang-{version}.txt"


def images_root() -> Path:
    return cache_root() / "images"


def image_dir(recipe: Recipe = Recipe()) -> Path:
    return images_root() / recipe.key()


def rootfs(recipe: Recipe = Recipe()) -> Path:
    return image_dir(recipe) / "rootfs"


def is_built(recipe: Recipe = Recipe()) -> bool:
    return is_complete(image_dir(recipe))


def _run(argv: list[str], log) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise CockpitError(
            f"building the lab image failed at `{' '.join(argv[:3])} ...` (exit {proc.returncode}); see {log.name}"
        )


def _in_chroot(root: Path, command: str) -> list[str]:
    """The argv that runs a shell command chrooted into `root`, in a private mount namespace:
    the /proc and /dev it mounts for the chroot vanish with it."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount -t proc proc "{root}/proc" && mount --bind /dev "{root}/dev" && chroot "{root}" {command}',
    ]


def _install_py_spy(version: str, target: Path, log) -> None:
    """py-spy's one static binary, from its PyPI wheel for this machine (the lab has no pip)."""
    found = wheel("py-spy", version, progress=lambda m: log.write(m + "\n"))
    with zipfile.ZipFile(found) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".data/scripts/py-spy"))
        target.write_bytes(archive.read(member))
    target.chmod(0o755)


def _base(recipe: Recipe, log) -> Path:
    """The debootstrapped tree, before the setup script (cached on its own key)."""
    base = images_root() / f"base-{recipe.base_key()}"

    def debootstrap(work: Path) -> None:
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(recipe.packages)}",
                recipe.suite,
                str(work / "rootfs"),
                recipe.mirror,
            ],
            log,
        )

    return build_once(base, debootstrap, recipe.base_key()) / "rootfs"


def _install_real_sglang(recipe: Recipe, root: Path, log) -> None:
    """SGLang's wheel and its lock into the service venv, by this machine's pip (the image has
    none; the wheels are CPython 3.11 manylinux, as the image's own Python is), then compiled."""
    assert recipe.real_sglang is not None
    found = wheel("sglang", recipe.real_sglang, progress=lambda m: log.write(m + "\n"))
    site = root / RELEASES[recipe.suite].site_packages.lstrip("/")
    (site / "sglang").rmdir()  # the bind-mount point of the plain image: pip installs it here instead
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site)]
    _run([*pip, "-r", str(real_sglang_lock(recipe.real_sglang)), str(found)], log)
    # Byte-compiled by the image's own Python (this machine's may be another release): each boot
    # runs on a fresh overlay, so an uncompiled tree is compiled again by every first import, about
    # 7 s of a CPU for SGLang's argument resolution alone, more than the whole import takes compiled
    # (measured 13.8 s against 6.4 s). A file in a newer Python's syntax (torch has one) is skipped,
    # named in the build's log.
    inside = RELEASES[recipe.suite].site_packages
    compile_all = f"import compileall; compileall.compile_dir({inside!r}, quiet=1, workers=0)"
    _run(_in_chroot(root, f"/usr/bin/python3 -c {shlex.quote(compile_all)}"), log)


def build(recipe: Recipe = Recipe(), progress=print) -> Path:
    """Build the image unless it exists; returns its rootfs. Needs root and debootstrap."""
    final = image_dir(recipe)
    if is_built(recipe):
        return final / "rootfs"
    if recipe.real_sglang is not None:
        if recipe.suite != DEFAULT_RELEASE:
            raise UsageError(f"the real-SGLang lab runs on {DEFAULT_RELEASE}: SGLang's wheels are for its Python 3.11")
        plain = build(recipe.plain(), progress)
        final.parent.mkdir(parents=True, exist_ok=True)
        log_path = final.parent / f"build-{recipe.key()}.log"
        progress(
            f"building the real-SGLang {recipe.real_sglang} lab image {recipe.key()} "
            f"(once; about 2 min where pip has torch cached, 6.3 GB), log in {log_path}"
        )

        def make_real(work: Path) -> None:
            with open(log_path, "w") as log:
                _run(["cp", "-a", str(plain), str(work / "rootfs")], log)
                _install_real_sglang(recipe, work / "rootfs", log)

        return build_once(final, make_real, recipe.key()) / "rootfs"
    if shutil.which("debootstrap") is None:
        raise CockpitError(
            "debootstrap is not installed: run `apt-get install debootstrap systemd-container` (make deps does it)"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    log_path = final.parent / f"build-{recipe.key()}.log"
    progress(f"building the lab image {recipe.key()} (once; about 90 s), log in {log_path}")

    def make(work: Path) -> None:
        with open(log_path, "w") as log:
            base = _base(recipe, log)
            root = work / "rootfs"
            _run(["cp", "-a", str(base), str(root)], log)
            shutil.copy(SETUP_SCRIPT, root / "tmp" / "image-setup.sh")
            _run(_in_chroot(root, "/bin/sh /tmp/image-setup.sh"), log)
            (root / "tmp" / "image-setup.sh").unlink()
            _install_py_spy(recipe.py_spy, root / "usr" / "local" / "bin" / "py-spy", log)

    return build_once(final, make, recipe.key()) / "rootfs"
