"""The fleet: every configured host and deployment at a glance, sorted by trouble.

A round asks each host one remote command over its one connection: the `sglang*` units
systemd knows (and the configured ones), their status with their ExecStart, the GPU table,
and `/health_generate` of each running unit that serves the API and is due to be asked, asked on the
host itself (bash's /dev/tcp, all at once, each bounded by HUNG_AFTER_S and timed there) at
the address its command line gave in the round before, where the round before saw the unit's
own cgroup listen there (the host's listeners are read in the same command; another unit's
server on SGLang's default port would answer for it). A unit seen serving for the first time,
or at a new address, or in a new start, is asked in a second command of that round. Each node
of rank > 0 has its processes counted instead (its `/health` is SGLang's dummy). Asking
`/health` over a channel of the connection per unit, as a first version did, cost the jump box
7 to 10 ms of CPU per host per round for eight units; nothing in a host's round depends on how
many other hosts there are, so a fleet of 32 costs 32 times one host (benchmarks/bench_fleet.py).

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
from cockpit.systemd.process_facts import SEP as FACTS_SEP
from cockpit.systemd.readiness import GENERATE, HUNG_AFTER_S, RECHECK_S, LastAnswer, Probe, port_check
from cockpit.systemd.status import PROPERTIES, UnitStatus, parse_show
from cockpit.targets import Target, all_targets

FAILED, STOPPED = "failed", "stopped"
# Worst first: what the fleet view sorts by. `down` splits into failed (it ended on its own, or
# waits to be restarted after it did) and stopped (someone stopped it).
TROUBLE = (FAILED, BROKEN, HUNG, DEGRADED, STARTING, READY, STOPPED)
SEP = "@@cockpit-fleet@@"
BUSY_MIB = 1024  # a GPU with more memory taken than this is in use

PROBE_FAILED = {124: f"no answer within {HUNG_AFTER_S:g} s", 127: "not asked: the host has no bash"}

# sh -c SCRIPT fleet MODE N UNIT... (UNIT ADDR PORT)...: MODE `all` lists and shows the units (the
# N configured ones too, even where the pattern does not match them), reads the GPU table and the
# listeners (ss's --cgroup names each one's cgroup at no more cost; an older ss is asked through
# listeners.SCRIPT, which reads each PID's; nothing where the host has no ss), and after the
# probes prints each unit's ExecStart; `probes` only asks each (UNIT ADDR PORT)'s /health_generate. A
# probe's line is one write (atomic on the pipe), so the probes run at once and print as they end:
# `UNIT RC BEGAN ENDED STATUS-LINE`, the times bash's $EPOCHREALTIME (`-` where bash has none).
#
# A unit's text cannot forge another unit or key. systemctl prints ExecStart's argv as it is, a
# newline included, and lists a Description's lines (a transient unit's may hold newlines) on
# lines of their own, indented: so the units are the listing's unindented names made of unit name
# characters only, `systemctl show` asks for no ExecStart, and each ExecStart is asked alone with
# `--value` and framed by NUL bytes, which no value holds (systemd's strings are C strings),
# after the last separator.
SCRIPT = f"""
set -f
mode=$1; n=$2; shift 2
wanted=""
while [ "$n" -gt 0 ]; do wanted="$wanted $1"; shift; n=$((n - 1)); done
if [ "$mode" = all ]; then
  units=$( {{ systemctl list-units --all --plain --no-legend --type=service 'sglang*'
    systemctl list-unit-files --no-legend --type=service 'sglang*'; }} 2>/dev/null |
    awk '/^[^ \\t]/ {{ for (i = 1; i <= NF; i++)
      if ($i ~ /^[A-Za-z0-9:_.@\\\\-]+\\.service$/ && $i !~ /@\\./) {{ print $i; break }} }}' | sort -u)
  if [ -n "$units$wanted" ]; then
    systemctl show --timestamp=unix -p {",".join(PROPERTIES)} -- $units $wanted 2>/dev/null ||
      systemctl show -p {",".join(PROPERTIES)} -- $units $wanted
  fi
  echo {SEP}
  nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null
  echo {SEP}
  {{ ss -Hltnp --cgroup && printf '\036\n'; }} 2>/dev/null || ( {listeners.SCRIPT} ) 2>/dev/null
  echo  # the facts' last record ends in a NUL: the separator below starts a line of its own
fi
echo {SEP}
probe() {{
  said=$(timeout {HUNG_AFTER_S:g} bash -c 'began=$EPOCHREALTIME; exec 3<>"/dev/tcp/$0/$1" &&
    printf "GET {GENERATE} HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n" "$0" >&3 && IFS= read -r line <&3 &&
    printf "%s %s %s\\n" "${{began:--}}" "${{EPOCHREALTIME:--}}" "$line"' "$2" "$3" 2>/dev/null)
  echo "$1 $? $said"
}}
while [ $# -ge 3 ]; do probe "$1" "$2" "$3" & shift 3; done
wait
if [ "$mode" = all ]; then
  echo {SEP}
  for unit in $units $wanted; do
    printf '%s\\0' "$unit"
    systemctl show --value -p ExecStart -- "$unit" 2>/dev/null
    printf '\\0'
  done
fi
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
    one came, else why none did."""
    found = {}
    for line in text.splitlines():
        unit, _, rest = line.partition(" ")
        rc, _, said = rest.partition(" ")
        if unit not in asked or not rc.isdigit():
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


class FleetReader:
    """Reads rounds; remembers, per host, where each unit serves (asked in the next round), each
    unit's last /health_generate answer (asked again only when due) and, per start, when each unit
    was ready: a 200 seen earlier in this start is what tells `degraded` from `starting`, and the
    start's ready line in its journal, looked for while it runs, is when a node of its launch
    that starts again later has left it (nodes_status; the time the fleet first saw the 200,
    later than that, where the line cannot be read)."""

    def __init__(self, host_of: Callable[[str], Host]) -> None:
        self.host_of = host_of
        self._ready: dict[tuple[str, str, str], float] = {}
        self._ready_lines: dict[tuple[str, str, str], tuple[float | None, float]] = {}  # (logged at, looked at)
        self._serving: dict[str, dict[str, tuple[str, int]]] = {}
        self._asked: dict[tuple[str, str], LastAnswer] = {}

    async def _ask(self, host: Host, mode: str, wanted: Sequence[str], serving: dict[str, tuple[str, int]]) -> str:
        probes = [str(word) for unit, (addr, port) in serving.items() for word in (unit, addr, port)]
        argv = ["sh", "-c", SCRIPT, "fleet", mode, str(len(wanted)), *wanted, *probes]
        return (await host.query(argv, timeout=10 + HUNG_AFTER_S)).text

    async def read_host(self, name: str, wanted: Sequence[str] = ()) -> HostRound:
        began = time.monotonic()
        try:
            host = self.host_of(name)
            known = {u: a for u, a in self._serving.get(name, {}).items() if self._due(name, u, began)}
            shown, gpus, listened, answers, execs = sections(await self._ask(host, "all", wanted, known), 4)
            statuses = {s.unit: s for s in parse_show(shown, name) if s.unit}
            commands = exec_starts(execs)
            flags = {u: exec_flags(commands.get(u, "")) for u in statuses}
            serving = {
                u: serving_address(flags[u].items())
                for u, s in statuses.items()
                if s.active_state == "active" and node_rank(flags[u]) == 0
            }
            # Asked only where the unit's own cgroup listens: another server's answer is not its.
            holders = listeners.parse(listened) if FACTS_SEP in listened else None  # None: no ss
            checks = {u: port_check(holders, u, *a) for u, a in serving.items()}
            own = {u: a for u, a in serving.items() if checks[u].ask}
            probes = parse_probes(answers, {u: a for u, a in known.items() if own.get(u) == a})
            last = {u: self._asked.get((name, u)) for u in own}
            kept = {
                u: asked.aged(began)
                for u, asked in last.items()
                if u not in probes
                and asked is not None
                and (asked.invocation, asked.address) == (statuses[u].invocation_id, own[u])
                and not asked.due(began)
            }
            new = {u: a for u, a in own.items() if u not in probes and u not in kept}
            if new:  # first seen serving, at a new address or in a new start: asked now rather than a round late
                probes.update(parse_probes(sections(await self._ask(host, "probes", (), new), 1)[1], new))
            self._serving[name] = own
            answered = {u: LastAnswer(statuses[u].invocation_id, own[u], p, began) for u, p in probes.items()}
            self._remember(name, answered, own)
            said = {u: check.said(probes.get(u) or kept.get(u)) for u, check in checks.items()}
            units = await asyncio.gather(*(self._unit(host, s, flags[u], said.get(u)) for u, s in statuses.items()))
        except (CockpitError, OSError, ValueError, IndexError) as e:
            return HostRound(name, error=str(e) or type(e).__name__, seconds=time.monotonic() - began)
        return HostRound(name, sorted(units, key=lambda u: u.unit), parse_gpus(gpus), seconds=time.monotonic() - began)

    def _due(self, host: str, unit: str, now: float) -> bool:
        asked = self._asked.get((host, unit))
        return asked is None or asked.due(now)

    def _remember(self, host: str, answers: dict[str, LastAnswer], serving: dict[str, tuple[str, int]]) -> None:
        """This round's answers kept, and those of units of `host` that no longer serve dropped."""
        self._asked = {k: a for k, a in self._asked.items() if k[0] != host or k[1] in serving}
        self._asked.update({(host, u): a for u, a in answers.items()})

    async def _unit(
        self, host: Host, status: UnitStatus, flags: dict[str, str | None], answer: Probe | None
    ) -> FleetUnit:
        if status.load_state == "not-found":
            return FleetUnit(status.host, status.unit, FAILED, f"{status.unit} is not on {status.host}", status)
        rank = node_rank(flags)
        members, schedulers = None, None
        if status.active_state == "active" and rank > 0:
            schedulers = ranks_on_node(flags)
            try:
                members = await processes.read(host, status.control_group, status.unit)
            except CockpitError:
                members = None
        key = (status.host, status.unit, status.invocation_id or "")
        if answer is not None and answer.ok:
            self._ready.setdefault(key, time.time())
        if status.active_state == "active" and rank == 0:
            await self._look_for_ready_line(host, status, key)
        ready_at = self._ready_lines.get(key, (None, 0.0))[0] or self._ready.get(key)
        signals = Signals(ready_at=ready_at)
        status = replace(status, ready_since=ready_at)
        told = assess(status, signals, answer, members, schedulers=schedulers, worker_node=rank > 0)
        trouble = told.state
        if trouble == DOWN:
            trouble = STOPPED if status.active_state == "inactive" and status.result == "success" else FAILED
        return FleetUnit(status.host, status.unit, trouble, told.reason, status, rank)

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
