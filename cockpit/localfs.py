"""Files on this machine, written so that a reader sees the old text or the new, never half.

Shared by the `LocalHost` transport and `cockpit unit set --in-place`; the cache directories
(lab images, release sources) are built aside and renamed into place the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

STALE_PREFIX = ".stale-"


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Temp file beside `path`, fsync, chmod (`mode`, else the old file's bits), rename, fsync
    the directory."""
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cockpit-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def is_complete(target: Path) -> bool:
    """Whether `build_once` finished `target`."""
    return (target / "complete").is_file()


def build_once(target: Path, make: Callable[[Path], None], stamp: str) -> Path:
    """`target`, made by `make(work_dir)` in a directory beside it and renamed into place only
    when complete: an interrupted build leaves no half-made cache behind.

    A running lab boots from (and bind-mounts) these directories, so one is never deleted:
    builds of a cache take a lock, and the one that finds the target complete after waiting
    returns it; an incomplete leftover is renamed aside (`.stale-*`, removed by
    `remove_stale` when nothing can be using it), never removed under a reader."""
    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:  # one per target: builds nest
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(target):  # another build finished it while this one waited
            return target
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            make(work)
            (work / "complete").write_text(stamp + "\n")
            if target.exists():
                target.rename(target.parent / f"{STALE_PREFIX}{target.name}-{secrets.token_hex(4)}")
            work.rename(target)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    return target


def remove_stale(directory: Path) -> list[Path]:
    """Delete the leftovers `build_once` renamed aside in `directory`; call it only when no lab
    runs (one may still have such a tree mounted)."""
    removed = []
    for stale in directory.glob(f"{STALE_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(stale)
    return removed
