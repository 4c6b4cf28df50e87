"""Ending processes by what they were when listed, never by a bare PID.

A PID names a process only while it lives: once it ends, the kernel may give the number to any
new process, and a kill by the number read when the write modal opened ended an innocent
`sleep`. So a process is named by its identity as it was listed: its PID, its start (clock
ticks after boot, /proc/PID/stat's 22nd field) and its cgroup. Each signal goes out in one
remote command that, for each process in turn, reads both again and signals it only where they
are unchanged, the read and the kill one after the other in the same shell. Where the login is
not root the kill is `sudo -n kill`: the sudoers file then allows signals, not a root shell.
Waiting for the processes to end reads /proc, which needs no root.

What remains is the moment between that read and the kill: a fork, or sudo's start (some
10 ms). For the PID to name another process there, the listed one must end and the kernel hand
its number to a new one within it, after going round pid_max numbers. A pidfd would close that
too (pidfd_open, the same check, pidfd_send_signal), but needs Python on the host, and where
the login is not root `sudo python3`: a root shell in the sudoers file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host
from cockpit.remote.sudo import explain_failure, privileged
from cockpit.systemd.process_facts import Owned, Viewpoint

END_GRACE_S = 10.0  # SIGTERM, then SIGKILL this long after for a process still there
KILL_WAIT_S = 1.0  # after SIGKILL: what is still there then is said to have survived

# Shell: `state PID START CGROUP` sets $verdict to `same` (the process listed is there),
# `changed` (the PID is another process's now) or `gone` (none, or a zombie: it has ended). The
# stat file is read whole: a process name may hold a newline (and ") ").
STATE = """
set -f
state() {
  stat=
  { while IFS= read -r line || [ -n "$line" ]; do stat="$stat $line"; done < "/proc/$1/stat"; } 2>/dev/null
  [ -n "$stat" ] || { verdict=gone; return; }
  cg=
  { while read -r line; do case $line in 0::*) cg=${line#0::};; esac; done < "/proc/$1/cgroup"; } 2>/dev/null
  want_start=$2 want_cgroup=$3
  set -- ${stat##*) }
  if [ $# -lt 20 ]; then verdict=changed; return; fi
  run=$1; shift 19
  if [ "$1" != "$want_start" ] || [ "$cg" != "$want_cgroup" ]; then verdict=changed
  elif [ "$run" = Z ] || [ "$run" = X ]; then verdict=gone
  else verdict=same; fi
}
"""
# sh -c SIGNAL sh SIG HOW (PID START CGROUP)...: for each process, `sent|gone|changed PID`; at a
# kill that fails on a process still there, `failed PID`, kill's words on stderr, exit 1. HOW
# `sudo`: through `sudo -n kill`.
SIGNAL = (
    STATE
    + """
sig=$1; kill=kill; [ "$2" = sudo ] && kill="sudo -n kill"; shift 2
while [ $# -ge 3 ]; do
  pid=$1 start=$2 cgroup=$3; shift 3
  state "$pid" "$start" "$cgroup"
  if [ "$verdict" != same ]; then echo "$verdict $pid"; continue; fi
  if said=$($kill -"$sig" "$pid" 2>&1); then echo "sent $pid"; continue; fi
  state "$pid" "$start" "$cgroup"
  if [ "$verdict" != same ]; then echo "gone $pid"; continue; fi
  echo "failed $pid"; printf '%s\\n' "$said" >&2; exit 1
done
"""
)
# sh -c WAIT sh TENTHS (PID START CGROUP)...: polls every 0.1 s until none is there, at most
# TENTHS times; prints the PIDs still there.
WAIT = (
    STATE
    + """
tenths=$1; shift
left_of() {
  left=
  while [ $# -ge 3 ]; do state "$1" "$2" "$3"; [ "$verdict" = same ] && left="$left $1"; shift 3; done
}
i=0
while left_of "$@"; [ -n "$left" ] && [ "$i" -lt "$tenths" ]; do sleep 0.1; i=$((i + 1)); done
echo $left
"""
)


class EndError(CockpitError):
    pass


@dataclass(frozen=True)
class Identity:
    """A process as it was listed: a PID alone may be another process's by the time it is
    signalled."""

    pid: int
    start_ticks: int  # /proc/PID/stat's starttime
    cgroup: str

    def words(self) -> list[str]:
        return [str(self.pid), str(self.start_ticks), self.cgroup]


@dataclass
class Ending:
    """What ending a list of processes did, by PID."""

    ended: list[int] = field(default_factory=list)  # gone now (signalled, or gone before)
    changed: list[int] = field(default_factory=list)  # not signalled: the PID is another process's now
    survived: list[int] = field(default_factory=list)  # the process listed is still there after SIGKILL


async def _signal(host: Host, config: HostConfig, sig: str, identities: Sequence[Identity]) -> dict[int, str]:
    """`sent`, `gone` or `changed`, by PID; EndError at a kill refused (sudo's sentence)."""
    how = "sudo" if config.sudo else ""
    words = [w for i in identities for w in i.words()]
    result = await host.run(["sh", "-c", SIGNAL, "sh", sig, how, *words], timeout=30)
    outcome = {}
    for line in result.text.splitlines():
        verdict, _, pid = line.partition(" ")
        if pid.isdigit():
            outcome[int(pid)] = verdict
    if not result.ok:
        failed = next((pid for pid, verdict in outcome.items() if verdict == "failed"), None)
        argv = privileged(config.sudo, ["kill", f"-{sig}", str(failed) if failed is not None else "PID"])
        raise EndError(explain_failure(config.name, config.user, argv, result))
    return outcome


async def _still_there(host: Host, config: HostConfig, identities: Sequence[Identity], wait_s: float) -> list[int]:
    """The PIDs of those still there after at most `wait_s` (read by the login itself)."""
    if not identities:
        return []
    argv = ["sh", "-c", WAIT, "sh", str(int(wait_s * 10)), *[w for i in identities for w in i.words()]]
    result = await host.run(argv, timeout=wait_s + 30)
    if not result.ok:
        said = (result.error_text or result.text).strip().splitlines()
        why = said[-1] if said else f"exit status {result.returncode}"
        raise EndError(f"could not watch PIDs {' '.join(argv[5::3])} end on {config.name}: {why}")
    return [int(p) for p in result.text.split() if p.isdigit()]


async def end(host: Host, config: HostConfig, identities: Sequence[Identity], grace_s: float = END_GRACE_S) -> Ending:
    """SIGTERM to each process that is still the one listed, SIGKILL `grace_s` later to those
    of them still there, each signal after the same check; never a pattern, never a group."""
    first = await _signal(host, config, "TERM", identities)
    changed = [pid for pid, verdict in first.items() if verdict == "changed"]
    left = await _still_there(host, config, [i for i in identities if first.get(i.pid) == "sent"], grace_s)
    if left:
        stubborn = [i for i in identities if i.pid in left]
        second = await _signal(host, config, "KILL", stubborn)  # `changed` now: it ended, its PID reused
        left = await _still_there(host, config, [i for i in stubborn if second.get(i.pid) == "sent"], KILL_WAIT_S)
    ended = [i.pid for i in identities if i.pid not in changed and i.pid not in left]
    return Ending(ended, changed, left)


@dataclass(frozen=True)
class Holder:
    """A process that holds what a unit's start needs, as the write modal lists it and offers to
    end it: who it is, what it holds, and whose it is."""

    pid: int
    name: str
    holds: str  # `70000 MiB on each of GPUs 0,1`, `127.0.0.1:30000`
    owner: str  # whose it is, from the unit's side (process_facts.Owned.owner)
    identity: Identity | None  # None: its start or cgroup could not be read here: not offered
    other_unit: str | None = None  # another running unit it is part of: ending it takes that unit down


def holder(pid: int, name: str, holds: str, facts: Owned, view: Viewpoint) -> Holder:
    """A process of the GPU table or the listeners, as a Holder seen from `view`'s unit."""
    known = facts.start_ticks is not None and facts.cgroup is not None
    identity = Identity(pid, facts.start_ticks or 0, facts.cgroup or "") if known else None
    return Holder(pid, name, holds, facts.owner(view), identity, facts.other_unit(view))
