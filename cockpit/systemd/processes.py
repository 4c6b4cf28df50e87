"""Which processes a unit's cgroup holds now, each with its title (the first word of its command
line, which a process may set: SGLang titles its schedulers `sglang::scheduler_TP3` and its
detokenizer `sglang::detokenizer`) and, for a scheduler, its rank.

SGLang names in a scheduler's title only the parallel dimensions larger than 1
(`configure_scheduler_process`, managers/scheduler.py): at tp 1 the scheduler is
`sglang::scheduler`, with no `_TP0`, and its rank is TP0 all the same. Its cmdline is the title
alone and `comm` its first 15 bytes (`sglang::schedul`); the multiprocessing resource tracker
(`python -c from multiprocessing.resource_tracker import main;main(6)`) beside it is no rank
(tests/data/sglang-0.5.23/real-tp1-processes.txt).

One round trip: the cgroup's `cgroup.procs` (on a pure cgroup v2 host, in the unified hierarchy
of a hybrid one, or in v1's `name=systemd` one) and every member's first command-line word with
one `grep -z -m1` over all of them: a process per member cost a millisecond or more each.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any

from cockpit.remote.base import Host, HostError, RunResult

# Shell, with the cgroup as $1 (or, where $1 is empty, the unit $2's own, asked of systemd on the
# host): $procs, the file that lists its members (exit 3 when there is none).
MEMBERS = """
cg=${1:-$(systemctl show --value -p ControlGroup -- "$2")}
procs=
for root in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do
  [ -r "$root$cg/cgroup.procs" ] && procs=$root$cg/cgroup.procs && break
done
[ -n "$procs" ] || { echo "no cgroup.procs for $cg" >&2; exit 3; }
"""
SCRIPT = (
    MEMBERS
    + """
files=
printf 'taken %s\\0' "$(date +%s.%N)"
while read -r pid; do files="$files /proc/$pid/cmdline"; done < "$procs"
[ -z "$files" ] || grep -a -z -H -m1 '' $files 2>/dev/null || true
"""
)


_SCHEDULER_TITLE = re.compile(r"sglang::scheduler((?:_[A-Z_]+\d+)*)(?:\s|$)")


def rank_of(title: str) -> str:
    """`sglang::scheduler_DP1_TP3 ...` -> `DP1 TP3`; `sglang::scheduler` -> `TP0` (a title without
    a TP part is tp rank 0: SGLang leaves the part out at tp 1); "" for any other process."""
    m = _SCHEDULER_TITLE.match(title)
    if m is None:
        return ""
    parts = m.group(1).replace("_", " ").split()
    return " ".join(parts if any(p.startswith("TP") for p in parts) else [*parts, "TP0"])


NO_CGROUP = 3  # MEMBERS' exit status when the cgroup has no cgroup.procs: it holds no process


class NoCgroup(HostError):
    """The host answered that the cgroup is gone: the unit has no process. Unlike any other
    HostError, which says only that the host could not be read."""


@dataclass(frozen=True)
class UnitProcesses:
    """The members of a unit's cgroup at one moment: PID -> title."""

    titles: dict[int, str]
    # When, by the host's clock (its journal's): a census taken before a start's ready line cannot
    # say what that start has lost since (cockpit.sglang.server.health). None: not known.
    taken_at: float | None = None

    def titled(self, prefix: str) -> dict[int, str]:
        return {pid: title for pid, title in self.titles.items() if title.startswith(prefix)}

    def to_json(self) -> list[dict[str, Any]]:
        """`[{"pid", "title", "rank"}]`, rank None for a process that is no scheduler."""
        return [{"pid": pid, "title": title, "rank": rank_of(title) or None} for pid, title in self.titles.items()]


def parse(text: str) -> UnitProcesses:
    """`/proc/PID/cmdline:TITLE` records, NUL-ended, as grep -z -H prints them, after the
    script's `taken TIME` record."""
    titles, taken_at = {}, None
    for record in text.split("\0"):
        if record.startswith("taken "):
            with contextlib.suppress(ValueError):  # a `date` without %N prints `N`
                taken_at = float(record[6:].rstrip("N").rstrip("."))
            continue
        path, _, title = record.strip("\n").partition(":")
        pid = path.removeprefix("/proc/").removesuffix("/cmdline")
        if pid.isdigit():
            titles[int(pid)] = title.strip()
    return UnitProcesses(titles, taken_at)


async def read(host: Host, control_group: str | None, unit: str = "") -> UnitProcesses:
    """The members of `control_group`, or of `unit`'s cgroup as systemd names it on the host now
    (asked beside `systemctl show`, not after it). NoCgroup when the host says there is no such
    cgroup (the unit has no processes); HostError when the host cannot say."""
    result = await host.run(["sh", "-c", SCRIPT, "sh", control_group or "", unit], timeout=10)
    if not result.ok:
        error = unreadable(host, control_group or f"{unit}'s cgroup", result)
        raise NoCgroup(str(error)) if result.returncode == NO_CGROUP else error
    return parse(result.text)


def unreadable(host: Host, where: str, result: RunResult) -> HostError:
    """The sentence for a script over a cgroup's members (MEMBERS) that failed: the last line
    it said (`no cgroup.procs for /system.slice/x.service`)."""
    said = (result.error_text or result.text).strip().splitlines()
    return HostError(f"the processes of {where} on {host.name}: {said[-1] if said else result.returncode}")
