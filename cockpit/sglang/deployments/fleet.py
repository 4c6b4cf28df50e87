"""The fleet: every configured host and deployment at a glance, sorted by trouble.

A round asks each host one remote command over its one connection, and runs there only what
may have changed since the round before: the host's CPU is what the fleet must spare, and in the
lab a process costs it about a millisecond, a `systemctl show` of eight units 28 ms (PID 1's
share included), `list-units` 8, `ss` 12, `nvidia-smi` 22 to 36. Every round the command's own
shell, with its builtins alone, globs the `sglang*` unit files of systemd's unit directories,
reads the first process of each `sglang*` unit's cgroup (and the configured units') and PID 1's
CPU time, and compares them with the round before's (SCRIPT). Then, in the same command:

- the units' status, one `systemctl show` of the loaded `sglang*` units, the unit files and the
  configured units: when a unit's first process changed (it started, ended, restarted), each
  round while a unit is not settled (not ready, not stopped or failed: it starts, stops, or is
  hung or degraded), every SETTLED_READ_S besides, and when PID 1 ran (systemd runs for every
  change of a unit's state, a reset-failed or a daemon-reload among them, and for nothing a
  quiet round does) and `systemctl list-units` then says another state: looked at again at
  most every STATES_S, as PID 1 also runs for what is none of the fleet's business (a timer, a
  login, the clock set: the VM of these measurements set its clock ten times a second for a
  while, which woke every lab's PID 1);
- the unit files (`systemctl list-unit-files`, which reads every unit file) when the `sglang*`
  files in the unit directories changed;
- the GPU table when a unit's first process changed, every GPUS_BUSY_S while a unit is not
  settled (its memory moves as it loads) and every GPUS_S once all are; the last table between;
- the host's listeners (whose cgroup listens on a unit's port) when a unit's first process
  changed, each round while a unit is not settled, and every OWNER_RECHECK_S once all are (the
  app's pace);
- and `/health_generate` of each running unit that serves the API and is due to be asked, asked
  on the host itself (bash's /dev/tcp, all at once in one bash, bounded by HUNG_AFTER_S and each
  timed there) at the address its command line gave in the round before, where its own cgroup
  listened there (another unit's server on SGLang's default port would answer for it).

A unit's ExecStart is read once a start (its InvocationID, ExecMainStartTimestamp and MainPID),
in a second command of the round that first sees the start: the flags its server was started
with (a daemon-reload after an edit of its file does not change what runs). A unit seen serving
for the first time, or at a new address, or in a new start, is asked in a command of its own in
that round. Each node of rank > 0 has its processes counted instead (its `/health` is SGLang's
dummy): each round until all its schedulers run, then in a new start, when a unit's first
process changed, and every RECHECK_S. A settled host's round is thus one shell and the health
checks that are due: 0.6% of one lab core for one ready unit at a round a second, 0.9% for
eight, where a systemctl, ss and nvidia-smi each round and an ExecStart read per unit took 23%
for eight (benchmarks/bench_fleet.py). Asking `/health` over a channel of the connection per
unit, as a first version did, cost the jump box 7 to 10 ms of CPU per host per round for eight
units; nothing in a host's round depends on how many other hosts there are.

The endpoint asked is `/health_generate`, as the app's: one that generates a token, the only kind
that tells a hung server (a `/health` that asks the model nothing answers 200 from one too; from
SGLang 0.5.2 `/health` is the same handler unless the unit's environment turns that off, which a
round does not read). Each ask is a second, a `Prefill batch` line and an access line, so a unit
is asked each round while it starts (refused, or 503 at once: nothing generated), and at most
once per RECHECK_S once it answered 200 in this start or did not answer in time (a hung server's
each ask waits 20 s on the host and logs `Health check failed`); meanwhile its row says the last
answer and how old it is.

What a round cannot see is said, not guessed: of the journal only each start's ready line is read
here (once found, it is not read again), so a unit is `hung` when its `/health_generate` does not
answer in time, `degraded` when it answered 200 earlier in this start and does not now, and
`starting` before its first 200. A server ending itself after a
child died (0.5.23 sleeps 5 s in its SIGQUIT handler, its HTTP loop with it, then kills its tree)
is its last answer, or `hung` where an ask falls in those seconds, until systemd says it failed.
Opening the unit gives the whole assessment (cockpit.sglang.server.health): `ending`, and the child.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from cockpit.config import Config
from cockpit.errors import CockpitError
from cockpit.remote.base import Host
from cockpit.sglang.deployments.nodes_status import BROKEN, group_readiness
from cockpit.sglang.server.endpoint import serving_address
from cockpit.sglang.server.health import DEGRADED, DOWN, HUNG, READY, STARTING, HealthScan, Signals, assess
from cockpit.sglang.server.logparse import READY_TEXT
from cockpit.sglang.server.ranks import node_rank, ranks_on_node
from cockpit.systemd import journal, listeners, processes
from cockpit.systemd.listeners import PortHolder
from cockpit.systemd.process_facts import SEP as FACTS_SEP
from cockpit.systemd.processes import UnitProcesses
from cockpit.systemd.readiness import GENERATE, HUNG_AFTER_S, RECHECK_S, LastAnswer, Probe, port_check
from cockpit.systemd.status import PROPERTIES, UnitStatus, parse_show
from cockpit.systemd.unit_paths import SYSTEM_UNIT_PATH
from cockpit.targets import Target, all_targets

FAILED, STOPPED = "failed", "stopped"
# Worst first: what the fleet view sorts by. `down` splits into failed (it ended on its own, or
# waits to be restarted after it did) and stopped (someone stopped it).
TROUBLE = (FAILED, BROKEN, HUNG, DEGRADED, STARTING, READY, STOPPED)
SEP = "@@cockpit-fleet@@"
BUSY_MIB = 1024  # a GPU with more memory taken than this is in use
# A settled host (each unit ready, or stopped or failed) has its units read every SETTLED_READ_S
# whatever MARKS and PID1 (SCRIPT) say, its GPU table every GPUS_S and its listeners every
# OWNER_RECHECK_S (the app's pace: cockpit.session.feeds); while a unit is not settled, its GPU
# table every GPUS_BUSY_S. PID 1 having run looks at the units' states at most every STATES_S.
SETTLED_READ_S = 60.0
GPUS_S = 30.0
GPUS_BUSY_S = 5.0
OWNER_RECHECK_S = 120.0
STATES_S = 10.0

PROBE_FAILED = {124: f"no answer within {HUNG_AFTER_S:g} s", 127: "not asked: the host has no bash"}

# sh -c SCRIPT fleet all UNITS LISTENERS GPUS CHECK FILES MARKS PID1 STATES N WANTED... M LISTED...
#   (UNIT ADDR PORT)...
# MODE `all` first finds, with the shell's builtins alone, FILES (the `sglang*` entries of
# systemd's unit search path, SYSTEM_UNIT_PATH, whose names are unit name characters only),
# MARKS (each `sglang*` or WANTED unit's cgroup, in a slice or a slice's slice, with the first
# PID of its cgroup.procs) and PID1 (PID 1's /proc/1/schedstat: systemd's CPU time, which grows
# whenever it runs), and compares them with the round before's. New MARKS read the units, the
# listeners and the GPU table whatever the 1s and 0s of UNITS, LISTENERS and GPUS asked; new
# FILES list the unit files in place of the LISTED ones the round before found, and read the
# units. A new PID1, or one that tells nothing (unreadable, or `0 0 0` from a kernel without
# it), where CHECK is 1 and the units are not read anyway, looks at `systemctl list-units` of the
# `sglang*` units and reads them where it is not STATES, the one looked at before. PID1 goes to
# the next round as read after the round's own systemctl, or as the round before's where none
# ran (what PID 1 did is still to be looked at). It prints what it read (five 1s or 0s: units,
# listeners, GPUs, unit files, states), FILES, MARKS and PID1, then the states it looked at,
# `systemctl show` of the loaded `sglang*` units, the unit files and the N WANTED (the configured
# ones, even where the pattern does not match them), the unit files it listed, the GPU table,
# and the listeners (ss's --cgroup names each one's cgroup at no more cost; an older ss is asked
# through listeners.SCRIPT, which reads each PID's; nothing where the host has no ss). MODE
# `probes` only asks each (UNIT ADDR PORT)'s /health_generate, as `all` does after the rest: all
# in one bash (one `timeout` bounds them all, as they run at once), each a subshell that prints
# its line as one write (atomic on the pipe) as it ends: `UNIT RC BEGAN ENDED STATUS-LINE`, the
# times bash's $EPOCHREALTIME (`-` where bash has none). Where the bash ends on the timeout or is
# missing, each unit then gets `UNIT 124` or `UNIT 127`, after the lines of those that answered
# (a unit's first line is its answer).
#
# A unit's text cannot forge another unit or key. systemctl prints ExecStart's argv as it is, a
# newline included, and lists a Description's lines (a transient unit's may hold newlines) on
# lines of their own, indented: so the units are those `systemctl show` names (its `Id=`, a
# Description's newline printed `[unprintable]`) and the listing's unindented names made of unit
# name characters only (the states, printed whole, are only compared, and no line of theirs is
# a separator), `systemctl show` asks for no ExecStart, and each ExecStart is asked alone with
# `--value` (EXEC_SCRIPT) and framed by NUL bytes, which no value holds (systemd's strings are C
# strings).
SCRIPT = f"""
set -f
mode=$1; shift
if [ "$mode" = all ]; then
  show=$1 listen=$2 gpus=$3 check=$4 files_before=$5 marks_before=$6 pid1_before=$7 states_before=$8 n=$9
  shift 9
  wanted=""
  while [ "$n" -gt 0 ]; do wanted="$wanted $1"; shift; n=$((n - 1)); done
  n=$1; shift; listed=""
  while [ "$n" -gt 0 ]; do listed="$listed $1"; shift; n=$((n - 1)); done
  set +f
  files=""
  for file in {" ".join(f"{d}/sglang*.service" for d in SYSTEM_UNIT_PATH)}; do
    case $file in *[!A-Za-z0-9:_.@/\\\\-]*) ;; *) files="$files $file" ;; esac
  done
  for base in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
    [ -r "$base/cgroup.procs" ] && break
  done
  marks=""
  for name in 'sglang*.service' $wanted; do
    for cg in "$base"/*.slice/$name "$base"/*.slice/*.slice/$name; do
      {{ read -r pid < "$cg/cgroup.procs"; }} 2>/dev/null && marks="$marks ${{cg#"$base"}}:$pid"
    done
  done
  set -f
  pid1=""
  {{ read -r pid1 < /proc/1/schedstat; }} 2>/dev/null
  [ "$marks" = "$marks_before" ] || show=1 listen=1 gpus=1
  listing=0
  [ "$files" = "$files_before" ] || show=1 listing=1
  moved=1  # PID 1 ran since the round before looked, or its time cannot be read here
  case $pid1 in ""|"0 0 0") ;; "$pid1_before") moved=0 ;; esac
  checked=0 states=$states_before
  if [ "$moved$check$show" = 110 ]; then
    checked=1
    states=$(systemctl list-units --all --plain --no-legend --type=service 'sglang*' 2>/dev/null)
    [ "$states" = "$states_before" ] || show=1
  fi
  if [ "$listing" = 1 ]; then
    listed=$(systemctl list-unit-files --no-legend --type=service 'sglang*' 2>/dev/null |
      awk '/^[^ \\t]/ {{ for (i = 1; i <= NF; i++)
        if ($i ~ /^[A-Za-z0-9:_.@\\\\-]+\\.service$/ && $i !~ /@\\./) {{ print $i; break }} }}')
  fi
  shown=""
  if [ "$show" = 1 ]; then
    units="sglang*.service $listed $wanted"  # set -f: the pattern goes to systemctl as it is
    shown=$(systemctl show --timestamp=unix -p {",".join(PROPERTIES)} -- $units 2>/dev/null ||
      systemctl show -p {",".join(PROPERTIES)} -- $units 2>/dev/null)
  fi
  if [ "$show$checked" = 00 ]; then
    pid1=$pid1_before  # what PID 1 did since is still to be looked at
  else
    {{ read -r pid1 < /proc/1/schedstat; }} 2>/dev/null
  fi
  printf '%s\\n' "$show $listen $gpus $listing $checked" "$files" "$marks" "$pid1"
  echo {SEP}
  [ "$checked" = 0 ] || printf '%s\\n' "$states"
  echo {SEP}
  printf '%s\\n' "$shown"
  echo {SEP}
  [ "$listing" = 0 ] || printf '%s\\n' $listed
  echo {SEP}
  [ "$gpus" = 0 ] || nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null
  echo {SEP}
  if [ "$listen" = 1 ]; then
    {{ ss -Hltnp --cgroup && printf '\\036\\n'; }} 2>/dev/null || ( {listeners.SCRIPT} ) 2>/dev/null
    echo  # the facts' last record ends in a NUL: the separator below starts a line of its own
  fi
fi
echo {SEP}
if [ $# -ge 3 ]; then
  timeout {HUNG_AFTER_S:g} bash -c 'probe() {{
      began=$EPOCHREALTIME
      if exec 3<>"/dev/tcp/$2/$3" && printf "GET {GENERATE} HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n" "$2" >&3 &&
        IFS= read -r line <&3; then
        printf "%s 0 %s %s %s\\n" "$1" "${{began:--}}" "${{EPOCHREALTIME:--}}" "$line"
      else
        echo "$1 1 "
      fi
    }}
    while [ $# -ge 3 ]; do probe "$1" "$2" "$3" & shift 3; done
    wait' fleet "$@" 2>/dev/null
  rc=$?
  if [ "$rc" != 0 ]; then
    while [ $# -ge 3 ]; do echo "$1 $rc "; shift 3; done
  fi
fi
"""
# sh -c EXEC_SCRIPT fleet UNIT...: each UNIT's ExecStart, `NAME\0VALUE\0` (SCRIPT's comment says why).
EXEC_SCRIPT = """
for unit; do
  printf '%s\\0' "$unit"
  systemctl show --value -p ExecStart -- "$unit" 2>/dev/null
  printf '\\0'
done
"""


@dataclass(frozen=True)
class HostGpus:
    count: int
    busy: int  # GPUs with more than BUSY_MIB taken
    used_mib: int
    total_mib: int

    def words(self) -> str:
        return f"{self.busy}/{self.count} GPUs busy, {self.used_mib / 1024:.0f}/{self.total_mib / 1024:.0f} GiB"


@dataclass(frozen=True)
class FleetUnit:
    """One unit as the fleet saw it this round."""

    host: str
    unit: str
    trouble: str  # one of TROUBLE
    reason: str
    status: UnitStatus
    node_rank: int = 0


@dataclass
class HostRound:
    """One host's answer to a round; `error` in place of its units where it could not be read."""

    host: str
    units: list[FleetUnit] = field(default_factory=list)
    gpus: HostGpus | None = None
    error: str | None = None
    seconds: float = 0.0  # the host's round, from asking to its last answer

    def unit(self, name: str) -> FleetUnit | None:
        return next((u for u in self.units if u.unit == name), None)


@dataclass(frozen=True)
class FleetRow:
    """A line of the fleet view: a deployment (its nodes follow it, `node` set), or a unit."""

    trouble: str
    host: str  # "" for a deployment's own line
    unit: str
    reason: str
    deployment: str = ""
    node: str = ""  # the [units] entry of a deployment's node
    gpus: str = ""  # the host's GPU use

    @property
    def target(self) -> tuple[str, str] | None:
        return (self.host, self.unit) if self.host else None


def exec_flags(exec_start: str) -> dict[str, str | None]:
    """The flags of `systemctl show -p ExecStart`'s `argv[]=...` (words as systemd prints them:
    separated by spaces, not quoted, which is enough for ports, hosts and ranks)."""
    argv = ""
    for part in exec_start.strip("{} ").split(" ; "):
        if part.startswith("argv[]="):
            argv = part[len("argv[]=") :]
            break
    words, flags = argv.split(), dict[str, str | None]()
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, eq, value = word.partition("=")
        if eq:
            flags[name] = value
        else:
            nxt = words[i + 1] if i + 1 < len(words) else None
            flags[name] = nxt if nxt is not None and not nxt.startswith("--") else None
    return flags


def sections(text: str, count: int) -> list[str]:
    """The script's output cut at its first `count` lines that are SEP, `count + 1` parts: no
    status, GPU or probe line can be one, and what the last part holds is never cut."""
    lines = text.split("\n")
    cuts = [i for i, line in enumerate(lines) if line == SEP][:count]
    bounds = [-1, *cuts, *[len(lines)] * (count + 1 - len(cuts))]
    return ["\n".join(lines[a + 1 : b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def exec_starts(text: str) -> dict[str, str]:
    """Each unit's ExecStart from `NAME\\0VALUE\\0` records (SCRIPT's last part): a value may hold
    newlines, never a NUL."""
    fields = text.split("\0")
    return {name: value.rstrip("\n") for name, value in zip(fields[0::2], fields[1::2], strict=False)}


def parse_probes(text: str, asked: dict[str, tuple[str, int]]) -> dict[str, Probe]:
    """`UNIT RC BEGAN ENDED STATUS-LINE` per probe: the HTTP status and how long it took where
    one came, else why none did. A unit's first line is its answer (SCRIPT: the `UNIT 124` of a
    timeout comes after the lines of those that answered)."""
    found: dict[str, Probe] = {}
    for line in text.splitlines():
        unit, _, rest = line.partition(" ")
        rc, _, said = rest.partition(" ")
        if unit not in asked or unit in found or not rc.isdigit():
            continue
        words = said.split()
        if rc == "0" and len(words) >= 4 and words[2].startswith("HTTP/") and words[3].isdigit():
            found[unit] = Probe(GENERATE, int(words[3]), seconds=_seconds(words[0], words[1]), generates=True)
        else:
            addr, port = asked[unit]
            found[unit] = Probe(
                GENERATE, None, PROBE_FAILED.get(int(rc), f"nothing answers on {addr}:{port}"), generates=True
            )
    return found


def _seconds(began: str, ended: str) -> float | None:
    """The time between two $EPOCHREALTIME values (a locale may print a comma); None unknown."""
    try:
        return max(0.0, float(ended.replace(",", ".")) - float(began.replace(",", ".")))
    except ValueError:
        return None


def parse_gpus(text: str) -> HostGpus | None:
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.count(",") == 2]
    rows = [r for r in rows if r[0].isdigit() and r[1].isdigit() and r[2].isdigit()]
    if not rows:
        return None
    used = [int(r[1]) for r in rows]
    return HostGpus(len(rows), sum(1 for u in used if u > BUSY_MIB), sum(used), sum(int(r[2]) for r in rows))


StartKey = tuple[str | None, float | None, int]


def start_key(status: UnitStatus) -> StartKey:
    """What tells a unit's starts apart (its InvocationID, ExecMainStartTimestamp and MainPID):
    its ExecStart is read once each."""
    return (status.invocation_id, status.exec_main_start, status.main_pid)


@dataclass(frozen=True)
class HostView:
    """What the rounds know of one host: each part as last read and when, and the shell's
    FILES, MARKS, PID1 and STATES (SCRIPT) to compare the next round's with. FILES, MARKS and PID1
    start as `-`, which no host prints, so a first round reads everything."""

    files: str = "-"
    marks: str = "-"
    pid1: str = "-"
    states: str = ""  # systemctl list-units of the `sglang*` units, as last looked at
    listed: tuple[str, ...] = ()  # the unit files, as list-unit-files named them
    wanted: tuple[str, ...] = ()
    statuses: dict[str, UnitStatus] = field(default_factory=dict)
    commands: dict[str, tuple[StartKey, str]] = field(default_factory=dict)  # unit -> (its start, ExecStart)
    holders: list[PortHolder] | None = None  # None: the host has no ss
    gpus: HostGpus | None = None
    shown_at: float = -math.inf
    checked_at: float = -math.inf  # the units shown, or their states looked at
    listened_at: float = -math.inf
    gpus_at: float = -math.inf
    settled: bool = False  # every unit ready or stopped in the round before (_settled)

    def asks(self, now: float, wanted: tuple[str, ...]) -> list[str]:
        """SCRIPT's words after `all`: which parts are due whatever the shell finds changed, and
        whether PID 1's running may look at the states; what the round before found; the
        wanted units and the unit files listed before."""
        units = not self.settled or wanted != self.wanted or now - self.shown_at >= SETTLED_READ_S
        owners = not self.settled or now - self.listened_at >= OWNER_RECHECK_S
        gpus = now - self.gpus_at >= (GPUS_S if self.settled else GPUS_BUSY_S)
        check = now - self.checked_at >= STATES_S
        due = ["1" if part else "0" for part in (units, owners, gpus, check)]
        found = [self.files, self.marks, self.pid1, self.states]
        return [*due, *found, str(len(wanted)), *wanted, str(len(self.listed)), *self.listed]

    def after(self, text: str, host: str, now: float, wanted: tuple[str, ...]) -> tuple[HostView, str]:
        """The view after SCRIPT's answer (mode `all`) read at `now`, and the probes' part of it."""
        head, states, shown, listed, gpus, listened, answers = sections(text, 6)
        said, files, marks, pid1 = head.split("\n")  # ValueError: the host answered something else
        units, owners, tables, listing, checked = (word == "1" for word in said.split())
        view = replace(self, files=files, marks=marks, pid1=pid1, wanted=wanted)
        if checked:
            view = replace(view, states=states, checked_at=now)
        if listing:
            view = replace(view, listed=tuple(listed.split()))
        if units:
            statuses = {s.unit: s for s in parse_show(shown, host) if s.unit}
            view = replace(view, statuses=statuses, shown_at=now, checked_at=now)
        if owners:
            holders = listeners.parse(listened) if FACTS_SEP in listened else None  # None: no ss
            view = replace(view, holders=holders, listened_at=now)
        if tables:
            view = replace(view, gpus=parse_gpus(gpus), gpus_at=now)
        return view, answers

    def unread_starts(self) -> list[str]:
        """The units in a start whose ExecStart is not read yet."""
        return [u for u, s in self.statuses.items() if u not in self.commands or self.commands[u][0] != start_key(s)]


def _settled(unit: FleetUnit) -> bool:
    """Ready, or stopped or failed for good: nothing changes it now but systemd (MARKS, PID1 in
    SCRIPT) or its /health_generate answer (asked when due)."""
    state = unit.status.active_state
    return state in ("inactive", "failed") or (state == "active" and unit.trouble == READY)


@dataclass(frozen=True)
class Census:
    """A node of rank > 0's processes as last counted: in which start, under which MARKS of its
    host (SCRIPT), when, and whether all its schedulers ran."""

    invocation: str | None
    marks: str
    at: float
    members: UnitProcesses | None
    complete: bool = False


class FleetReader:
    """Reads rounds; remembers, per host, what it read and when (HostView), where each unit serves
    (asked in the next round), each unit's last /health_generate answer (asked again only when
    due), each node of rank > 0's last census and, per start, when each unit was ready: a 200 seen
    earlier in this start is what tells `degraded` from `starting`, and the start's ready line in
    its journal, looked for while it runs, is when a node of its launch that starts again later
    has left it (nodes_status; the time the fleet first saw the 200, later than that, where the
    line cannot be read)."""

    def __init__(self, host_of: Callable[[str], Host]) -> None:
        self.host_of = host_of
        self._views: dict[str, HostView] = {}
        self._ready: dict[tuple[str, str, str], float] = {}
        self._ready_lines: dict[tuple[str, str, str], tuple[float | None, float]] = {}  # (logged at, looked at)
        self._serving: dict[str, dict[str, tuple[str, int]]] = {}
        self._asked: dict[tuple[str, str], LastAnswer] = {}
        self._counted: dict[tuple[str, str], Census] = {}

    async def _ask(self, host: Host, words: Sequence[str], serving: dict[str, tuple[str, int]]) -> str:
        probes = [str(word) for unit, (addr, port) in serving.items() for word in (unit, addr, port)]
        argv = ["sh", "-c", SCRIPT, "fleet", *words, *probes]
        return (await host.query(argv, timeout=10 + HUNG_AFTER_S)).text

    async def _read_commands(self, host: Host, view: HostView) -> HostView:
        """The view with each unit's ExecStart, read for the units in a start not read yet."""
        unread = view.unread_starts()
        said = exec_starts((await host.query(["sh", "-c", EXEC_SCRIPT, "fleet", *unread])).text) if unread else {}
        commands = {
            u: (start_key(s), said.get(u, "")) if u in unread else view.commands[u] for u, s in view.statuses.items()
        }
        return replace(view, commands=commands)

    async def read_host(self, name: str, wanted: Sequence[str] = ()) -> HostRound:
        began = time.monotonic()
        try:
            host = self.host_of(name)
            last = self._views.get(name, HostView())
            known = {u: a for u, a in self._serving.get(name, {}).items() if self._due(name, u, began)}
            text = await self._ask(host, ["all", *last.asks(began, tuple(wanted))], known)
            view, answers = last.after(text, name, began, tuple(wanted))
            view = await self._read_commands(host, view)
            statuses = view.statuses
            flags = {u: exec_flags(view.commands[u][1]) for u in statuses}
            serving = {
                u: serving_address(flags[u].items())
                for u, s in statuses.items()
                if s.active_state == "active" and node_rank(flags[u]) == 0
            }
            # Asked only where the unit's own cgroup listens: another server's answer is not its.
            checks = {u: port_check(view.holders, u, *a) for u, a in serving.items()}
            own = {u: a for u, a in serving.items() if checks[u].ask}
            probes = parse_probes(answers, {u: a for u, a in known.items() if own.get(u) == a})
            last_asked = {u: self._asked.get((name, u)) for u in own}
            kept = {
                u: asked.aged(began)
                for u, asked in last_asked.items()
                if u not in probes
                and asked is not None
                and (asked.invocation, asked.address) == (statuses[u].invocation_id, own[u])
                and not asked.due(began)
            }
            new = {u: a for u, a in own.items() if u not in probes and u not in kept}
            if new:  # first seen serving, at a new address or in a new start: asked now rather than a round late
                probes.update(parse_probes(sections(await self._ask(host, ["probes"], new), 1)[1], new))
            self._serving[name] = own
            answered = {u: LastAnswer(statuses[u].invocation_id, own[u], p, began) for u, p in probes.items()}
            self._remember(name, answered, own)
            said = {u: check.said(probes.get(u) or kept.get(u)) for u, check in checks.items()}
            units = await asyncio.gather(
                *(self._unit(host, s, flags[u], said.get(u), view.marks, began) for u, s in statuses.items())
            )
            self._counted = {k: c for k, c in self._counted.items() if k[0] != name or k[1] in statuses}
            self._views[name] = replace(view, settled=all(_settled(u) for u in units))
        except (CockpitError, OSError, ValueError, IndexError) as e:
            return HostRound(name, error=str(e) or type(e).__name__, seconds=time.monotonic() - began)
        return HostRound(name, sorted(units, key=lambda u: u.unit), view.gpus, seconds=time.monotonic() - began)

    def _due(self, host: str, unit: str, now: float) -> bool:
        asked = self._asked.get((host, unit))
        return asked is None or asked.due(now)

    def _remember(self, host: str, answers: dict[str, LastAnswer], serving: dict[str, tuple[str, int]]) -> None:
        """This round's answers kept, and those of units of `host` that no longer serve dropped."""
        self._asked = {k: a for k, a in self._asked.items() if k[0] != host or k[1] in serving}
        self._asked.update({(host, u): a for u, a in answers.items()})

    async def _unit(
        self,
        host: Host,
        status: UnitStatus,
        flags: dict[str, str | None],
        answer: Probe | None,
        marks: str,
        now: float,
    ) -> FleetUnit:
        if status.load_state == "not-found":
            return FleetUnit(status.host, status.unit, FAILED, f"{status.unit} is not on {status.host}", status)
        rank = node_rank(flags)
        members, schedulers, census = None, None, None
        if status.active_state == "active" and rank > 0:
            schedulers = ranks_on_node(flags)
            census = await self._census(host, status, marks, now)
            members = census.members
        key = (status.host, status.unit, status.invocation_id or "")
        if answer is not None and answer.ok:
            self._ready.setdefault(key, time.time())
        if status.active_state == "active" and rank == 0:
            await self._look_for_ready_line(host, status, key)
        ready_at = self._ready_lines.get(key, (None, 0.0))[0] or self._ready.get(key)
        signals = Signals(ready_at=ready_at)
        status = replace(status, ready_since=ready_at)
        told = assess(status, signals, answer, members, schedulers=schedulers, worker_node=rank > 0)
        if census is not None:
            self._counted[(status.host, status.unit)] = replace(census, complete=told.state == READY)
        trouble = told.state
        if trouble == DOWN:
            trouble = STOPPED if status.active_state == "inactive" and status.result == "success" else FAILED
        return FleetUnit(status.host, status.unit, trouble, told.reason, status, rank)

    async def _census(self, host: Host, status: UnitStatus, marks: str, now: float) -> Census:
        """A node of rank > 0's processes: counted each round until all its schedulers run, then
        again in a new start, when the host's MARKS changed (a scheduler's end ends its node's
        main process), and every RECHECK_S."""
        last = self._counted.get((status.host, status.unit))
        if (
            last is not None
            and last.complete
            and (last.invocation, last.marks) == (status.invocation_id, marks)
            and now - last.at < RECHECK_S
        ):
            return last
        try:
            members = await processes.read(host, status.control_group, status.unit)
        except CockpitError:
            members = None
        return Census(status.invocation_id, marks, now, members)

    async def _look_for_ready_line(self, host: Host, status: UnitStatus, key: tuple[str, str, str]) -> None:
        """This start's ready line, looked for at most every RECHECK_S until found (it may not be
        ready yet, or the journal may not say): one journalctl a serving unit's start, a few while
        it starts."""
        logged, looked = self._ready_lines.get(key, (None, -RECHECK_S))
        now = time.monotonic()
        if logged is not None or now - looked < RECHECK_S:
            return
        said = await journal.matching(host, status.unit, re.escape(READY_TEXT), 1, timeout=5)
        scan = HealthScan()
        scan.feed(said or [])
        self._ready_lines[key] = (scan.of(status.invocation_id).ready_at, now)

    async def round(self, hosts: dict[str, list[str]]) -> list[HostRound]:
        """Every host at once, each with the units the config names on it."""
        return list(await asyncio.gather(*(self.read_host(h, units) for h, units in hosts.items())))


def hosts_of(config: Config, extra: Sequence[Target] = ()) -> dict[str, list[str]]:
    """Every configured host, with the units the config (and `extra`) name on it."""
    hosts: dict[str, list[str]] = {name: [] for name in config.hosts}
    for t in [*all_targets(config), *extra]:
        if t.unit not in hosts.setdefault(t.host, []):
            hosts[t.host].append(t.unit)
    return hosts


def rows(config: Config, rounds: Sequence[HostRound]) -> list[FleetRow]:
    """The fleet view's lines, worst first: each deployment as one line (its group readiness)
    with its nodes under it, then every other unit, then each host that could not be read."""
    by_host = {r.host: r for r in rounds}
    gpus = {r.host: r.gpus.words() if r.gpus else "" for r in rounds}
    in_deployments: set[tuple[str, str]] = set()
    groups: list[list[FleetRow]] = []
    for name, deployment in config.deployments.items():
        nodes: list[tuple[str, Target, FleetUnit | None]] = []
        for node in deployment.nodes:
            target = Target.of(config.units[node])
            in_deployments.add((target.host, target.unit))
            found = by_host.get(target.host)
            nodes.append((node, target, found.unit(target.unit) if found else None))
        seen = [(node, _assessed(u)) for node, _, u in nodes if u]
        if len(seen) == len(nodes):
            group = group_readiness(seen)
            trouble, reason = (FAILED if group.state == DOWN else group.state), group.reason
        else:
            missing, target = next((node, target) for node, target, u in nodes if u is None)
            trouble, reason = FAILED, f"{missing}: {_unread(by_host.get(target.host), target.unit)}"
        lines = [FleetRow(trouble, "", name, reason, deployment=name)]
        for node, target, u in nodes:
            lines.append(
                FleetRow(
                    u.trouble if u else FAILED,
                    target.host,
                    target.unit,
                    u.reason if u else _unread(by_host.get(target.host), target.unit),
                    deployment=name,
                    node=node,
                    gpus=gpus.get(target.host, ""),
                )
            )
        groups.append(lines)
    for r in rounds:
        if r.error is not None:
            groups.append([FleetRow(FAILED, r.host, "", f"could not be read: {r.error}")])
            continue
        for u in r.units:
            if (u.host, u.unit) not in in_deployments:
                groups.append([FleetRow(u.trouble, u.host, u.unit, u.reason, gpus=gpus[r.host])])
    groups.sort(key=lambda g: (TROUBLE.index(g[0].trouble), g[0].deployment or g[0].host, g[0].unit))
    return [line for g in groups for line in g]


def _assessed(unit: FleetUnit) -> UnitStatus:
    """The unit's status with the fleet's readiness, as group_readiness reads a node's."""
    state = DOWN if unit.trouble in (FAILED, STOPPED) else unit.trouble
    return replace(unit.status, readiness=state, readiness_reason=unit.reason)


def _unread(found: HostRound | None, unit: str) -> str:
    if found is None:
        return "its host was not asked"
    return f"could not be read: {found.error}" if found.error else f"{unit} is not on {found.host}"
