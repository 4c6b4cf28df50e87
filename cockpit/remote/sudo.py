"""Commands that need root on a host where the account has it only through `sudo -n`.

`sudo -n` fails at once instead of asking for a password (there is no terminal to ask on
anyway), so a missing sudoers rule becomes one sentence, never a hang.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from cockpit.remote.base import RunResult


def privileged(sudo: bool, argv: Sequence[str]) -> list[str]:
    return ["sudo", "-n", *argv] if sudo else list(argv)


def disk_trouble(text: str) -> str | None:
    """The two write failures a person must hear by name: a full or a read-only file system."""
    low = text.lower()
    if "no space left on device" in low or "disk quota exceeded" in low:
        return "no space left on device"
    if "read-only file system" in low:
        return "read-only file system"
    return None


def explain_failure(host: str, user: str | None, argv: Sequence[str], result: RunResult) -> str:
    """One sentence for a failed (possibly privileged) command."""
    err = (result.error_text or result.text).strip()
    low = err.lower()
    tool = argv[2] if list(argv[:2]) == ["sudo", "-n"] and len(argv) > 2 else argv[0]
    who = user or "this user"
    if "a password is required" in low or "a terminal is required" in low:
        return f"sudo on {host} needs a password: allow `{tool}` for {who} with NOPASSWD"
    if "not in the sudoers" in low or "not allowed to execute" in low or "may not run sudo" in low:
        return f"{who} may not run `sudo {tool}` on {host}: add a sudoers rule with NOPASSWD for it"
    if "interactive authentication required" in low or "access denied" in low:
        return (
            f"{who} on {host} may not manage units without sudo: set `sudo = true` for this host "
            "and allow `sudo -n systemctl` with NOPASSWD"
        )
    if "not found" in low and "unit" in low:
        return f"unit {argv[-1]} not found on {host}"
    trouble = disk_trouble(err)
    if trouble is not None:
        where = posixpath.dirname(argv[-1]) if argv and argv[-1].startswith("/") else "the target"
        return f"`{tool}` failed on {host}: {trouble} ({where})"
    first = err.splitlines()[0] if err else f"exit status {result.returncode}"
    return f"`{' '.join(argv)}` failed on {host}: {first}"
