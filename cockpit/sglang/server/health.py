"""A health that tells the truth: one of `starting`, `ready`, `degraded`, `hung`, `down`, with
the reason, from every source that knows something, and `ready` only when they all agree.

What goes wrong while systemd still says `active (running)` (sgl-project/sglang):
- a scheduler rank hits an exception and the rest live on, or a rank's process is gone while
  the main process lives (it answers `/health`; nothing it is asked for completes);
- the detokenizer dies: `/health_generate` waits 20 s, logs `Health check failed. Server
  couldn't get a response from detokenizer ...` and answers 503 (#21471, #10856), and so does
  `/health`, the same handler from 0.5.2, unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is off
  (then it answers 200 without the model: cockpit.sglang.catalog.generation);
- a hang: the ranks stop in a collective; nothing is logged until each rank's watchdog fires
  (`Watchdog timeout (self.watchdog_timeout=300)`, 0.5.23 `Scheduler watchdog timeout (...)`),
  then `Received sigquit from a child process` ends the server (#3752, #9064, #9904);
- a child dies (a kill -9, a C++ abort): 0.5.23's SubprocessWatchdog says `Subprocess
  scheduler_0 (pid=N) crashed with exit code -9` within a second, its SIGQUIT handler `SIGQUIT
  received ... It usually means one child failed.`, sleeps 5 s and kills its own tree
  (`kill_process_tree called`); a rank whose peer died first raises (`Scheduler hit an exception`,
  gloo's `Connection reset by peer`) and SIGQUITs the parent itself, whose handler stops the
  watchdog before it names the dead one. From the first of those lines the server is ending, not
  degraded, whatever /health and the processes say meanwhile (docs/facts.md).

So the sources are systemd's state, the health endpoints (`/health_generate` where it can be
afforded: cockpit.systemd.readiness), the start's journal lines (`HealthScan`), and the unit's
processes by title (a title seen earlier in this start and gone now).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from cockpit.sglang.server.logparse import (
    ERRORS,
    READY_TEXT,
    ErrorMarker,
    Ready,
    crashed_child,
    ends_server,
    parse,
    rank_order,
)
from cockpit.sglang.server.per_start import PerStart
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.processes import UnitProcesses, rank_of
from cockpit.systemd.readiness import HEALTH, Probe
from cockpit.systemd.status import UnitStatus

STARTING, READY, DEGRADED, HUNG, DOWN = "starting", "ready", "degraded", "hung", "down"
STATES = (STARTING, READY, DEGRADED, HUNG, DOWN)
TITLES = "sglang::"  # SGLang's own processes: sglang::scheduler_TP3, sglang::detokenizer
SCHEDULER, DETOKENIZER = "sglang::scheduler", "sglang::detokenizer"
# Cheap first look at a line: only these messages (after the prefix's `] `) are read further.
WATCHED = (READY_TEXT, *(start for start, _ in ERRORS))  # the ready line and every error marker
WATCHED_PATTERN = "|".join(re.escape(start) for start in WATCHED)  # for journalctl --grep (PCRE2)
_KEPT = 8  # starts remembered
STACKS_HINT = "every rank's stack: s in the cockpit, or cockpit stacks"


@dataclass(frozen=True)
class Readiness:
    state: str
    reason: str = ""  # one sentence; empty for ready


@dataclass
class Signals:
    """What one start (invocation) of the server said about its health in its journal, and the
    processes seen in it."""

    ready_at: float | None = None  # epoch seconds of the ready line
    watchdog: dict[str, float] = field(default_factory=dict)  # rank -> when its watchdog fired
    exceptions: dict[str, float] = field(default_factory=dict)  # rank (or `PID n`) -> when
    health_failed_at: float | None = None  # the last `Health check failed ...`
    ending_at: float | None = None  # the first line that says the server is ending itself
    tree_killed_at: float | None = None  # `kill_process_tree called` on itself: its processes go now
    # The children that died and ended it: SGLang's name (`scheduler 0`, `detokenizer`) and exit
    # code from its watchdog's line, or a rank (`TP1`, exit None) a census taken while it ended lacks.
    crashed: dict[str, int | None] = field(default_factory=dict)
    init_failed_at: float | None = None
    last_line_at: float | None = None
    titles: dict[str, int] = field(default_factory=dict)  # every sglang:: title seen in it -> its PID


class HealthScan:
    """The health signals of each start, read from the unit's journal batch after batch (the
    journal feed's subscriber: a cheap look at each line, a parse only of the few it watches)."""

    def __init__(self) -> None:
        self.starts: PerStart[Signals] = PerStart(lambda _: Signals(), _KEPT)

    def of(self, invocation: str | None) -> Signals:
        """The start's signals (a blank, kept nowhere, for a status with no invocation)."""
        return Signals() if invocation is None else self.starts.of(invocation)

    def feed(self, entries: list[JournalEntry], quiet: str | None = None) -> None:
        """A start's last line is stamped once for each run of its lines, and a line's time read
        only for a line it watches (a flood's lines cost this scan more than their fold did).
        `quiet`: the batch's `quiet_run`, where the caller has it; then its last line is all."""
        if quiet is not None:
            self.of(quiet).last_line_at = entries[-1].logged_at()
            return
        last: Signals | None = None
        last_id: str | None = None
        newest: JournalEntry | None = None  # the last line of the run of `last`'s lines
        for entry in entries:
            if entry.invocation_id is None or entry.pid == 1:  # systemd's own lines about the unit
                continue
            if entry.invocation_id != last_id:
                if last is not None and newest is not None:
                    last.last_line_at = newest.logged_at()
                last, last_id = self.of(entry.invocation_id), entry.invocation_id
            assert last is not None
            newest = entry
            message = entry.message
            end = message.find("] ")
            if end < 0 or not message.startswith(WATCHED, end + 2):
                continue
            at = entry.logged_at()
            event = parse(message)
            if isinstance(event, Ready):
                last.ready_at = at
            elif isinstance(event, ErrorMarker):
                who = event.rank or f"PID {entry.pid}"
                if event.kind == "watchdog_timeout":
                    last.watchdog.setdefault(who, at)
                elif event.kind == "scheduler_exception":
                    last.exceptions.setdefault(who, at)
                elif event.kind == "health_check_failed":
                    last.health_failed_at = at
                elif event.kind == "initialization_failed":
                    last.init_failed_at = at
                elif ends_server(event):
                    _ending(last, event, at)
        if last is not None and newest is not None:
            last.last_line_at = newest.logged_at()

    def saw(self, invocation: str | None, processes: UnitProcesses, schedulers: int | None = None) -> None:
        """The unit's processes now: SGLang's titled ones are remembered for this start. A census
        taken while it ends, before it kills its tree, names the children it lacks that said
        nothing (a rank that raised has said why) as the crashed ones, where SGLang's watchdog
        named none: at tp 2 a killed TP1 is named only so. `schedulers`: how many the flags put on
        this node, for a census with no earlier one of this start to compare with."""
        if invocation is None:
            return
        signals = self.of(invocation)
        titled = processes.titled(TITLES)
        taken = processes.taken_at
        if (
            signals.ending_at is not None
            and not signals.crashed
            and taken is not None
            and taken >= signals.ending_at
            and (signals.tree_killed_at is None or taken < signals.tree_killed_at)
        ):
            for who, pid in _lacking(signals, set(titled.values()), schedulers):
                if who not in signals.exceptions and f"PID {pid}" not in signals.exceptions:
                    signals.crashed[who] = None
        for pid, title in titled.items():
            signals.titles.setdefault(title, pid)


def _ending(signals: Signals, event: ErrorMarker, at: float) -> None:
    """One of SGLang's lines of a server ending itself (logparse.ends_server), read into its
    start's signals."""
    child = crashed_child(event.message) if event.kind == "child_crashed" else None
    if child is not None:
        name, code = child
        signals.crashed.setdefault(name.replace("_", " "), code)
    if event.kind == "tree_killed" and signals.tree_killed_at is None:
        signals.tree_killed_at = at
    if signals.ending_at is None:
        signals.ending_at = at


def _name(title: str) -> str:
    """A titled process as the reason names it: a scheduler by its rank, another by its title."""
    return rank_of(title) or title.removeprefix(TITLES)


def _lacking(signals: Signals, now: set[str], schedulers: int | None) -> list[tuple[str, int | None]]:
    """The children of this start not in the census (`now`, its titles), each with its PID where
    known: those seen earlier in the start, else, with none seen, the ranks TP0.. of a plain
    tensor-parallel node's `schedulers` and its detokenizer."""
    if signals.titles:
        return [(_name(title), pid) for title, pid in signals.titles.items() if title not in now]
    ranks = {rank_of(title) for title in now if title.startswith(SCHEDULER)}
    if schedulers is None or not all(re.fullmatch(r"TP\d+", rank) for rank in ranks):
        return []
    lacking = [f"TP{k}" for k in range(schedulers) if f"TP{k}" not in ranks]
    if not any(title.startswith(DETOKENIZER) for title in now):
        lacking.append(_name(DETOKENIZER))
    return [(who, None) for who in lacking]


def ending_cause(signals: Signals) -> str:
    """What ended the start, as its journal and the census during its end say: `scheduler 0
    crashed, exit -9`, `TP1 crashed; TP0 hit an exception`; empty where nothing says."""
    said = [f"{who} crashed" + (f", exit {code}" if code is not None else "") for who, code in signals.crashed.items()]
    if signals.watchdog and not said:
        said.append(f"the watchdog fired on {_ranks(signals.watchdog)}")
    if signals.exceptions:
        said.append(f"{_ranks(signals.exceptions)} hit an exception")
    if signals.init_failed_at is not None:  # its warm-up request failed, and it kills its tree
        said.append("initialization failed")
    return "; ".join(said)


def assess(
    status: UnitStatus,
    signals: Signals,
    probe: Probe | None,
    processes: UnitProcesses | None,
    *,
    schedulers: int | None = None,
    journal: bool = True,
    worker_node: bool = False,
) -> Readiness:
    """The readiness of the unit's running start. `probe`: the last health answer of this
    start (None: not asked yet); `processes`: its cgroup now (None: not read); `schedulers`:
    how many scheduler ranks its flags put on this node (cockpit.sglang.server.ranks'
    `ranks_on_node`; None: unknown); `journal`: whether `signals` were read from its journal at
    all (the reason says so when they were not); `worker_node`: a node of rank > 0 of a launch
    over nodes, which serves no API: its /health is SGLang's dummy, 200 whatever its ranks do, and
    is never taken as readiness."""
    state = status.active_state
    # A start SGLang ended itself, said with what ended it while it ends and after (a stop's
    # children die too, of its SIGTERM: no cause of a start a stop job ended).
    ended = signals.ending_at is not None and status.stopped_by is None
    cause = ending_cause(signals) if ended else ""
    if state in ("failed", "inactive"):
        why = f", last exit {status.last_exit}" if status.last_exit else ""
        return Readiness(DOWN, f"the unit is {state} ({status.sub_state}{why})" + (f" after {cause}" if cause else ""))
    if state == "deactivating":
        return Readiness(DOWN, "systemd is stopping it")
    if state == "activating":
        if status.sub_state == "auto-restart":
            after = status.last_exit or "its exit"
            return Readiness(DOWN, f"waiting to restart after {after}" + (f" ({cause})" if cause else ""))
        return Readiness(STARTING, f"systemd is starting it ({status.sub_state})")
    if signals.ending_at is not None:  # SGLang kills its tree 5 s after the first of its lines
        return Readiness(DOWN, f"ending ({cause or 'one child failed'})" if ended else "systemd is stopping it")
    if signals.watchdog:
        ranks = _ranks(signals.watchdog)
        return Readiness(
            HUNG,
            f"the watchdog fired on {ranks} at {_clock(min(signals.watchdog.values()))}: no forward progress "
            f"for the whole --watchdog-timeout ({STACKS_HINT})",
        )
    gone = _gone(signals, processes, schedulers)
    if gone:
        return Readiness(DEGRADED, f"{gone} gone while the main process {status.main_pid} lives")
    if signals.exceptions:
        ranks = _ranks(signals.exceptions)
        return Readiness(
            DEGRADED,
            f"{ranks} hit an exception at {_clock(min(signals.exceptions.values()))} and the server still runs",
        )
    if signals.init_failed_at is not None:
        return Readiness(
            DEGRADED, f"initialization failed at {_clock(signals.init_failed_at)} and the server still runs"
        )
    if worker_node:
        return _worker_node(processes, schedulers)
    if probe is None and status.ready is not None:  # a status recorded with its readiness alone
        probe = Probe(HEALTH, 200 if status.ready else 503)
    if probe is None:
        return Readiness(STARTING, "health not asked yet")
    if probe.ok:  # an earlier `Health check failed` that answers again now: ready (the line stays in the journal)
        return Readiness(READY, probe.words() + ("" if journal else "; its journal was not read"))
    if probe.timed_out:
        return Readiness(HUNG, f"{probe.words()}{_silence(signals, probe)} ({STACKS_HINT})")
    if signals.ready_at is None:
        return Readiness(STARTING, f"{probe.words()}: it has not said it is ready yet")
    failed = (
        f"; `Health check failed` at {_clock(signals.health_failed_at)}" if signals.health_failed_at is not None else ""
    )
    return Readiness(DEGRADED, f"{probe.words()} after it was ready at {_clock(signals.ready_at)}{failed}")


def _silence(signals: Signals, probe: Probe) -> str:
    """`; not a journal line since it was asked, 42 s ago`: silence counted from the request
    that got no answer. The journal's last line dates nothing: an idle server logs nothing, so
    after a load run it was the run's end, however recent the hang."""
    if probe.asked_at is None or signals.last_line_at is None or signals.last_line_at >= probe.asked_at:
        return ""
    return f"; not a journal line since it was asked, {max(0.0, time.time() - probe.asked_at):.0f} s ago"


def _worker_node(processes: UnitProcesses | None, schedulers: int | None) -> Readiness:
    """What there is to see of a node that serves no API: its scheduler processes."""
    dummy = "a node of rank > 0 serves no API; its /health is SGLang's dummy and is not taken as readiness"
    if processes is None or schedulers is None:
        return Readiness(STARTING, f"its schedulers were not counted ({dummy})")
    live = sum(1 for t in set(processes.titled(TITLES).values()) if t.startswith(SCHEDULER))
    if live < schedulers:
        return Readiness(STARTING, f"{live} of its {schedulers} schedulers run ({dummy})")
    return Readiness(READY, f"its {schedulers} schedulers run ({dummy})")


def _gone(signals: Signals, processes: UnitProcesses | None, schedulers: int | None) -> str:
    """`sglang::detokenizer (PID 4242) is`: the titles seen in this start that are not there now,
    and, once it has said it is ready, what SGLang always runs beside its schedulers (one
    detokenizer, a scheduler per rank on this node) when the census shows fewer."""
    if processes is None:
        return ""
    titled = processes.titled(TITLES)
    now = set(titled.values())
    lost = [f"{title} (PID {pid})" for title, pid in signals.titles.items() if title not in now]
    ready = signals.ready_at
    # A release that titles its processes, past its start-up, in a census taken after the ready
    # line: an earlier one (the health check's, a poll before) saw the start before its
    # detokenizer came and would call it gone for a poll.
    if titled and ready is not None and (processes.taken_at is None or processes.taken_at >= ready):
        ranks = sum(1 for t in now if t.startswith(SCHEDULER))
        if schedulers is not None and ranks < schedulers and not any(SCHEDULER in item for item in lost):
            lost.append(f"{schedulers - ranks} of its {schedulers} scheduler processes")
        if not any(t.startswith(DETOKENIZER) for t in now) and not any(DETOKENIZER in item for item in lost):
            lost.append(DETOKENIZER)
    if not lost:
        return ""
    return ", ".join(lost) + (" are" if len(lost) > 1 or lost[0][0].isdigit() else " is")


def _ranks(by_rank: dict[str, float]) -> str:
    """`TP0..TP7` for a whole run of ranks, else `TP1, TP3`."""
    ranks = sorted(by_rank, key=rank_order)
    numbers = [rank_order(r)[1] for r in ranks]
    if (
        len(ranks) > 2
        and all(r.startswith("TP") for r in ranks)
        and numbers == list(range(numbers[0], numbers[-1] + 1))
    ):
        return f"{ranks[0]}..{ranks[-1]}"
    return ", ".join(ranks)


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))
