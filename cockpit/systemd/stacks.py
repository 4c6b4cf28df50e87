"""Where each process of a unit is, now: `py-spy dump` of every member of its cgroup.

When a server hangs, the evidence of where each rank was stuck is gone once its watchdog ends
it (SGLang's own py-spy dump at that moment fails where py-spy is missing, sglang #7553). Taken
while it hangs, one stack per rank says which collective each waits in. One round trip: the
cgroup's members (cockpit.systemd.processes.MEMBERS), each one's title, then `py-spy dump
--json` of each (with `sudo -n` on a host that manages units through sudo).

Through sudo that is root's ptrace of every process of the unit (py-spy pauses each while it
reads it), so on a read-only host it runs only when the user said yes to it (`root_ptrace`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cockpit.remote.base import Host, HostError, ReadOnlyError
from cockpit.remote.sudo import privileged
from cockpit.systemd.process_facts import NO_TOOL, PID_MARK, SEP
from cockpit.systemd.processes import MEMBERS, unreadable

INSTALL = "pip install py-spy"  # one static binary in a wheel, for any Python on the host
SCRIPT = (
    f"""
spy=$(command -v py-spy) || exit {NO_TOOL}
"""
    + MEMBERS
    + """
while read -r pid; do
  printf '\\037%s\\n' "$pid"
  head -c 256 "/proc/$pid/cmdline" 2>/dev/null | tr '\\0' ' '; echo
  printf '\\036\\n'
  # py-spy now and then misses the interpreter of a process it reads while it runs (seen on
  # the real 0.5.23 scheduler under load): asked again, it finds it
  for try in 1 2 3; do
    said=$($3 "$spy" dump --pid "$pid" --json 2>&1)
    case $said in *"Failed to find a python interpreter"*) sleep 0.3 ;; *) break ;; esac
  done
  printf '%s\n' "$said"
done < "$procs"
"""
)


class RootPtraceRefused(ReadOnlyError):
    """py-spy would run as root on a read-only host: a question for the user, not a failure."""


@dataclass(frozen=True)
class StackFrame:
    function: str
    file: str
    line: int


@dataclass(frozen=True)
class ThreadStack:
    name: str
    active: bool  # running on a CPU when sampled (idle: waiting)
    frames: list[StackFrame]  # innermost first, as py-spy prints them


@dataclass(frozen=True)
class ProcessStack:
    pid: int
    title: str  # its command line's first words (`sglang::scheduler_TP3 ...`)
    threads: list[ThreadStack] = field(default_factory=list)
    error: str | None = None  # py-spy could not read it (not Python, gone, not allowed)

    @property
    def named(self) -> str:
        """`sglang::scheduler_TP3 (PID 4242)`: its title's first word, and its PID."""
        return f"{self.title.split(' ', 1)[0]} (PID {self.pid})"

    @property
    def main(self) -> ThreadStack | None:
        """The thread a scheduler runs its loop in."""
        return next((t for t in self.threads if t.name == "MainThread"), self.threads[0] if self.threads else None)


@dataclass(frozen=True)
class StackCapture:
    """One dump of a unit's processes, and when it was taken."""

    at: float  # epoch seconds
    processes: list[ProcessStack]


def parse(text: str) -> list[ProcessStack]:
    """What SCRIPT printed (after the cgroup's members were found)."""
    out = []
    for block in text.split(PID_MARK)[1:]:
        head, _, dump = block.partition(f"\n{SEP}\n")
        pid_text, _, title = head.partition("\n")
        if not pid_text.strip().isdigit():
            continue
        pid, title = int(pid_text), title.strip()
        try:
            threads = [_thread(t) for t in json.loads(dump)]
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            said = dump.strip().splitlines()
            out.append(ProcessStack(pid, title, error=said[-1] if said else "py-spy printed nothing"))
            continue
        out.append(ProcessStack(pid, title, threads))
    return out


def _thread(raw: dict) -> ThreadStack:
    frames = [StackFrame(str(f["name"]), str(f["filename"]), int(f["line"])) for f in raw["frames"]]
    return ThreadStack(_thread_name(raw), bool(raw.get("active")), frames)


def _thread_name(raw: dict) -> str:
    """py-spy's name of the thread; where it has none (a process whose main thread Python's
    threading never named, as the detokenizer's: `thread_name: null`), `MainThread` for the
    thread whose OS id is the process's own, else `thread TID` (the OS id, not the pthread
    address py-spy calls thread_id: 140193838092992 on the detokenizer's row)."""
    if raw.get("thread_name"):
        return str(raw["thread_name"])
    tid = raw.get("os_thread_id")
    if tid is not None and tid == raw.get("pid"):
        return "MainThread"
    return f"thread {tid if tid is not None else raw.get('thread_id')}"


async def read(host: Host, control_group: str, *, sudo: bool = False, root_ptrace: bool = False) -> list[ProcessStack]:
    """Every member's stack; HostError with one sentence when py-spy is missing or cannot run,
    RootPtraceRefused when it would run through sudo on a read-only host and `root_ptrace` was
    not given."""
    if sudo and host.read_only and not root_ptrace:
        raise RootPtraceRefused(
            f"{host.name} is read-only here, and py-spy would run there as root through sudo (a ptrace that "
            "pauses each process of the unit while it reads it): nothing was run"
        )
    spy_prefix = " ".join(privileged(sudo, []))
    result = await host.run(["sh", "-c", SCRIPT, "sh", control_group, "", spy_prefix], timeout=60)
    if result.returncode == NO_TOOL:
        raise HostError(f"py-spy is not installed on {host.name}: `{INSTALL}` there (any Python will do)")
    if not result.ok:
        raise unreadable(host, control_group, result)
    stacks = parse(result.text)
    refused = [s for s in stacks if s.error and ("Permission denied" in s.error or "sudo" in s.error)]
    if refused and len(refused) == len(stacks):
        how = (
            "allow `sudo -n py-spy` for this user with NOPASSWD"
            if sudo
            else "run the cockpit as root there, or set `sudo = true` for this host and allow `sudo -n py-spy`"
        )
        raise HostError(f"py-spy may not read the processes of {control_group} on {host.name}: {how}")
    return stacks
