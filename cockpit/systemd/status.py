"""`systemctl show` -> UnitStatus, for one unit or many in one call (the picker's refresh)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cockpit.errors import CockpitError
from cockpit.remote.base import FileMissing, Host

if TYPE_CHECKING:  # annotations only: `cockpit status` imports this before it forks its ssh, asyncio after
    from cockpit.systemd.processes import UnitProcesses
    from cockpit.systemd.readiness import Probe

PROPERTIES = (
    "Id",
    "Description",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "MainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "ExecMainStartTimestamp",
    "ExecMainExitTimestamp",
    "ActiveEnterTimestamp",
    "InactiveEnterTimestamp",
    "NRestarts",
    "InvocationID",
    "NeedDaemonReload",
    "FragmentPath",
    "DropInPaths",
    "MemoryCurrent",
    "CPUUsageNSec",
    "UnitFileState",
    "ControlGroup",
)
_CLD = {1: "exited", 2: "killed", 3: "dumped"}  # ExecMainCode: the waitid() si_code
_SIGNALS = {1: "HUP", 2: "INT", 3: "QUIT", 6: "ABRT", 9: "KILL", 11: "SEGV", 13: "PIPE", 15: "TERM"}


class UnitNotFound(CockpitError):
    pass


_EXIT_RE = re.compile(r"Main process exited, code=(\w+), status=(\S+)")


def main_exit_of(message: str) -> str | None:
    """`exited 1/FAILURE`, `killed 9/KILL`: systemd's own journal line about how a unit's main
    process ended (`Main process exited, code=exited, status=1/FAILURE`), or None."""
    m = _EXIT_RE.search(message)
    return f"{m.group(1)} {m.group(2)}" if m else None


STOP_JOB = "a stop job"  # who stopped a start, where only systemd's journal says one did


def stop_job_began(pid: int | None, message: str) -> bool:
    """Whether a journal line is systemd's own word that a stop job began on the unit (`Stopping
    UNIT - DESCRIPTION...`, also the stop half of a restart). A stop leaves the same Result= and
    ExecMainStatus= as a crash (SGLang under KillMode=control-group ends `signal`, 9/KILL, as
    after a kill -9 of a rank: docs/facts.md), and systemd keeps no record of the job once
    done: this line, logged before the end of the start it stops, is what tells them apart. No
    crash has one (an automatic restart stops a unit that is already dead, which logs none)."""
    return pid == 1 and message.startswith("Stopping ") and message.endswith("...")


def exit_words(how: str | None, stopped_by: str | None) -> str | None:
    """How a start ended, in words: `stopped by a stop job (killed 9/KILL)` where a stop ended
    it, else systemd's exit alone (`killed 9/KILL`); None when neither is known."""
    if stopped_by is None:
        return how
    return f"stopped by {stopped_by}" + (f" ({how})" if how else "")


@dataclass(frozen=True)
class UnitStatus:
    unit: str
    host: str
    description: str = ""
    load_state: str = ""
    active_state: str = ""
    sub_state: str = ""
    result: str = ""
    main_pid: int = 0
    exec_main_code: str | None = None  # "exited", "killed", "dumped"
    exec_main_status: int | None = None
    exec_main_start: float | None = None  # epoch seconds
    exec_main_exit: float | None = None
    active_enter: float | None = None
    inactive_enter: float | None = None
    n_restarts: int = 0
    invocation_id: str | None = None
    need_daemon_reload: bool = False
    fragment_path: str | None = None
    drop_in_paths: tuple[str, ...] = ()
    memory_bytes: int | None = None
    cpu_ns: int | None = None
    unit_file_state: str | None = None
    control_group: str | None = None  # /system.slice/NAME.service: where its processes are
    ready: bool | None = None  # the health endpoint answered 200 (None: not checked)
    health: Probe | None = None  # that answer (the status poll's last for this start)
    processes: UnitProcesses | None = None  # the unit's cgroup with each member's title, read with it
    # What the session made of every source (cockpit.sglang.server.health): starting, ready, degraded,
    # hung or down, and why; None where nobody assessed it (a bare `systemctl show`).
    readiness: str | None = None
    readiness_reason: str = ""
    ready_since: float | None = None  # this start's ready line (its journal stamp), where it was read
    fragment_deleted: bool = False  # the unit file is gone from disk while the unit is still loaded
    # How the previous invocation's main process ended: systemd forgets it at the next start
    # (an automatic restart), the status poll and the journal remember it.
    previous_exit: str | None = None
    previous_exit_at: float | None = None
    # Who stopped the start `last_exit` is about, and the previous one: STOP_JOB where systemd's
    # journal says a stop job ended it, "the cockpit's stop" (or restart) where the cockpit asked;
    # None where no stop job did (a crash, or the server's own exit). The session fills them in.
    stopped_by: str | None = None
    previous_stopped_by: str | None = None
    checked_at: float = field(default_factory=time.time)

    @property
    def running_invocation(self) -> str | None:
        """The invocation whose processes run now: active, reloading, or starting; not one
        waiting to restart (`activating (auto-restart)`), whose invocation is the one that ended."""
        starting = self.active_state == "activating" and self.sub_state != "auto-restart"
        return self.invocation_id if self.active_state in ("active", "reloading") or starting else None

    @property
    def last_exit(self) -> str | None:
        """`exited 1`, `killed 9/KILL`: how the main process last ended, if it has."""
        if not self.exec_main_code or self.exec_main_exit is None:
            return None
        status = self.exec_main_status
        if self.exec_main_code in ("killed", "dumped") and status in _SIGNALS:
            return f"{self.exec_main_code} {status}/{_SIGNALS[status]}"
        return f"{self.exec_main_code} {status}"

    @property
    def ended(self) -> str | None:
        """How this start ended, in words: a stop told from a crash (exit_words)."""
        return exit_words(self.last_exit, self.stopped_by) if self.last_exit else None

    @property
    def previous_ended(self) -> str | None:
        """How the start before this one ended, in words (exit_words)."""
        return exit_words(self.previous_exit, self.previous_stopped_by)

    @property
    def exit_said(self) -> str:
        """The unit's last exit as the status pane and `cockpit status` say it: this start's,
        else the previous one's with its time (systemd forgets it at an automatic restart), a
        stop said as one, not as the signal it died of; `-` when none is known."""
        if self.last_exit:
            how, when = self.ended, self.exec_main_exit
        else:
            how, when = self.previous_ended, self.previous_exit_at
        if how is None:
            return "-"
        return how + (f" at {time.strftime('%H:%M:%S', time.localtime(when))}" if when else "")

    def uptime(self, now: float | None = None) -> float | None:
        if self.active_state not in ("active", "reloading") or self.active_enter is None:
            return None
        return max(0.0, (now or time.time()) - self.active_enter)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["drop_in_paths"] = list(self.drop_in_paths)
        d["last_exit"] = self.last_exit or self.previous_exit  # the unit's last: this start's, else the one before
        d["uptime_s"] = self.uptime()
        d["processes"] = self.processes.to_json() if self.processes else None
        return d


def _timestamp(value: str) -> float | None:
    value = value.strip()
    if not value or value == "n/a":
        return None
    if value.startswith("@"):
        try:
            return float(value[1:])
        except ValueError:
            return None
    for fmt in ("%a %Y-%m-%d %H:%M:%S %Z", "%a %Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(value, fmt).timestamp()
        except ValueError:
            continue
    return None


def _int(value: str) -> int | None:
    if not value or value == "[not set]" or value == "18446744073709551615":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def parse_show(text: str, host: str) -> list[UnitStatus]:
    """Blocks of `Key=Value` separated by blank lines, one per unit, in the order asked. Lines
    end at "\n" only: str.splitlines() would also break at the \x1c-\x1e and \x85 a unit's
    Description may hold."""
    out = []
    for block in text.strip("\n").split("\n\n"):
        props: dict[str, str] = {}
        for line in block.split("\n"):
            key, sep, value = line.partition("=")
            if sep:
                props[key] = value
        if not props:
            continue
        code = _int(props.get("ExecMainCode", ""))
        out.append(
            UnitStatus(
                unit=props.get("Id", ""),
                host=host,
                description=props.get("Description", ""),
                load_state=props.get("LoadState", ""),
                active_state=props.get("ActiveState", ""),
                sub_state=props.get("SubState", ""),
                result=props.get("Result", ""),
                main_pid=_int(props.get("MainPID", "")) or 0,
                exec_main_code=_CLD.get(code or 0),
                exec_main_status=_int(props.get("ExecMainStatus", "")),
                exec_main_start=_timestamp(props.get("ExecMainStartTimestamp", "")),
                exec_main_exit=_timestamp(props.get("ExecMainExitTimestamp", "")),
                active_enter=_timestamp(props.get("ActiveEnterTimestamp", "")),
                inactive_enter=_timestamp(props.get("InactiveEnterTimestamp", "")),
                n_restarts=_int(props.get("NRestarts", "")) or 0,
                invocation_id=props.get("InvocationID") or None,
                need_daemon_reload=props.get("NeedDaemonReload") == "yes",
                fragment_path=props.get("FragmentPath") or None,
                drop_in_paths=tuple(props.get("DropInPaths", "").split()),
                memory_bytes=_int(props.get("MemoryCurrent", "")),
                cpu_ns=_int(props.get("CPUUsageNSec", "")),
                unit_file_state=props.get("UnitFileState") or None,
                control_group=props.get("ControlGroup") or None,
            )
        )
    return out


def show_argv(units: Sequence[str]) -> list[str]:
    """The command `show` runs first (an early OpenSSH master runs it as it logs in)."""
    return ["systemctl", "show", "--timestamp=unix", "-p", ",".join(PROPERTIES), "--", *units]


async def show(host: Host, units: Sequence[str]) -> list[UnitStatus]:
    """The status of each unit (one remote call). A unit systemd does not know has
    load_state "not-found"; `fetch` turns that into an error for single-unit callers."""
    argv = show_argv(units)
    result = await host.query(argv)
    if not result.ok and b"timestamp" in result.stdout:  # systemd < 248: no --timestamp=unix
        argv.remove("--timestamp=unix")
        result = await host.query(argv)
    if not result.ok:
        raise CockpitError(f"systemctl show on {host.name} failed: {result.text.strip() or result.returncode}")
    try:
        statuses = parse_show(result.text, host.name)
    except (ValueError, IndexError) as e:  # a parse fault is a sentence, never a crash
        raise CockpitError(f"could not read `systemctl show` from {host.name}: {e}") from None
    if len(statuses) != len(units):
        raise CockpitError(f"`systemctl show` on {host.name} answered for {len(statuses)} of {len(units)} units")
    return [
        status if status.unit else replace(status, unit=asked) for asked, status in zip(units, statuses, strict=True)
    ]


_RUNNING = ("active", "activating", "deactivating", "reloading")


async def fetch(host: Host, unit: str) -> UnitStatus:
    """One unit's status. A unit systemd does not know is an error, unless it still runs
    (its file was deleted and daemon-reloaded under it): that one is a status that says so."""
    [status] = await show(host, [unit])
    if status.load_state == "not-found" and status.active_state not in _RUNNING:
        raise UnitNotFound(f"unit {unit} not found on {host.name}")
    if status.load_state == "not-found":
        return replace(status, fragment_deleted=True)
    return status


async def with_file_check(host: Host, status: UnitStatus) -> UnitStatus:
    """`status`, marked when systemd wants a reload because its unit file was deleted (asked only
    then: a stat per poll costs nothing when the file is as loaded)."""
    if not status.need_daemon_reload or not status.fragment_path or status.fragment_deleted:
        return status
    try:
        await host.stat(status.fragment_path)
    except FileMissing:
        return replace(status, fragment_deleted=True)
    return status


_SERVICE_NAME = re.compile(r"[A-Za-z0-9:_.@\\-]+\.service")


def listed_units(text: str) -> set[str]:
    """The service names of a `systemctl list-units` or `list-unit-files` listing: the first
    word made of unit name characters on each line that starts unindented. systemctl puts each
    further line of a Description (a transient unit's may hold newlines) on an indented line of
    its own, so no Description can list a unit; lines end at "\\n" only (docs/facts.md)."""
    names = set()
    for line in text.split("\n"):
        if line[:1] in ("", " ", "\t"):
            continue
        name = next((word for word in line.split() if _SERVICE_NAME.fullmatch(word)), None)
        if name is not None and "@." not in name:
            names.add(name)
    return names


async def list_units(host: Host, pattern: str = "sglang*") -> list[str]:
    """Units matching `pattern`, loaded or only installed (for the host/unit picker)."""
    result = await host.query(["systemctl", "list-units", "--all", "--plain", "--no-legend", "--type=service", pattern])
    files = await host.query(["systemctl", "list-unit-files", "--no-legend", "--type=service", pattern])
    return sorted(listed_units(result.text) | listed_units(files.text))
