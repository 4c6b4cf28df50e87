"""Pre-flight of a unit's own settings: what systemd will do to SGLang, beside its command line.

`kill-mode`: under systemd's default `KillMode=control-group` a stop (or the stop half of a
restart) sends SIGTERM to every process of the unit at once. SGLang's schedulers die of it
first; its main process watches them (0.5.23's `SubprocessWatchdog`), takes their death for a
crash, SIGQUITs itself, sleeps 5 s for crash diagnostics and SIGKILLs its process tree. The
stop then ends `failed`, `Result=signal`, main process 9/KILL: to systemd, to a restart watch and
to anyone reading the status, a crash (docs/facts.md, SGLang on a CPU). `KillMode=mixed` sends
SIGTERM to the main process alone, which shuts its children down, and SIGKILL to whatever is left
of the unit once it is gone.
"""

from __future__ import annotations

from cockpit.sglang.preflight.preflight import WARNING, Finding
from cockpit.systemd.unit import Unit

KILL_MODE_RULE = "kill-mode"
KILL_MODE_FIX = ("KillMode", "mixed")
SETTINGS = (KILL_MODE_FIX[0],)  # the [Service] settings these rules read, and the editor may set


def check_unit(unit: Unit) -> list[Finding]:
    """The findings on the unit's own [Service] settings (its files and drop-ins as given)."""
    mode = unit.setting("KillMode")
    if mode not in (None, "control-group"):
        return []
    said = "KillMode= is not set (control-group, systemd's default)" if mode is None else "KillMode=control-group"
    key, value = KILL_MODE_FIX
    return [
        Finding(
            WARNING,
            KILL_MODE_RULE,
            [],
            f"{said}: a stop sends SIGTERM to every process of {unit.name} at once, SGLang's main process takes "
            "its schedulers' death for a crash and kills itself, and the stop ends failed (Result=signal, "
            "9/KILL) like a crash (SGLang 0.5.23 in the lab: 10 of 10 stops).",
            None,
            f"{key}={value} in [Service]: SIGTERM to the main process alone, which shuts its children down "
            "(R shows the unit, k sets it).",
            setting=KILL_MODE_FIX,
        )
    ]
