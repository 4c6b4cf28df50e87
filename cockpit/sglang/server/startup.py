"""The start-up timeline: each phase of each rank of one start of the server, measured from the
unit's start, the slowest rank, the memory left after each phase, and the phase a failed start
died in; compared with the last start that reached ready.

A trillion-parameter start takes minutes, and the operator's questions are which phase it is
in, which rank holds it up, and whether it is slower than last time. The phases follow each
other with no gap, so they add up to the time from the unit's start to ready; each ends at one
of SGLang's own lines (cockpit.sglang.server.logparse milestones, every release's wording), and the next
begins there:

- imports: from the unit's start (systemd's `ExecMainStartTimestamp`) to the rank's `Init
  parallel begin.` (`Init torch distributed begin.` to 0.5.19): the main process imports and
  resolves its arguments (its `server_args=` line), then each scheduler imports on its own. A
  real 0.5.23 prints its first line 4 to 7 s after systemd's `Started`, and its schedulers
  spend 12 to 25 s importing (tests/data/sglang-0.5.23/);
- distributed init: to `Init parallel ends.` (`Init torch distributed ends.`);
- model set-up: to `Load weight begin.`: the memory baseline, and the release's model classes
  imported (about a second on a CPU);
- load weight: to `Load weight end. elapsed=…, avail mem=X GB, …`;
- memory pool: to `Memory pool end. avail mem=X GB` (0.4.x: `KV Cache is allocated. …`);
- CUDA graphs: to the last `Capture … graph end.` (0.5.19 on, one capture per graph: decode,
  prefill, draft), where a rank captures any: without graphs its part ends with the pool;
- warm-up: from the last rank's end to `The server is fired up and ready to roll!`: the main
  process's HTTP server comes up and serves its warm-up request.

Times are journald's receipt stamps (microseconds), not the lines' own second-resolution stamps.
The unit's start is systemd's own `Started` line of that invocation, to the microsecond (Type=
simple: a few hundred microseconds after the main process's fork), where the journal holds it
within the second `systemctl show --timestamp=unix` gives for `ExecMainStartTimestamp`; else
that second. Facts the start-up lines carry beside the phases (the KV cache's tokens, SGLang's
own timings, the arguments it resolved) are kept with the timeline (`facts`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cockpit.localfs import write_atomic
from cockpit.sglang.server.logparse import (
    CAPTURE_START,
    ERRORS,
    MILESTONES,
    READY_TEXT,
    ErrorMarker,
    Milestone,
    Ready,
    parse,
    rank_order,
)
from cockpit.sglang.server.per_start import PerStart
from cockpit.statedir import safe_name, state_dir
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.status import main_exit_of

PHASES = ("imports", "init", "model_setup", "load_weight", "memory_pool", "cuda_graph", "warm_up")
RANK_PHASES = PHASES[:-1]  # each rank's; the warm-up is the main process's
NAMES = {
    "imports": "imports",
    "init": "distributed init",
    "model_setup": "model set-up",
    "load_weight": "load weight",
    "memory_pool": "memory pool",
    "cuda_graph": "CUDA graphs",
    "warm_up": "warm-up",
}
# The line that ends each phase of a rank (the next begins there). Several captures: the last ends it.
_ENDS = {
    "init_begin": "imports",
    "init_end": "init",
    "load_weight_begin": "model_setup",
    "load_weight_end": "load_weight",
    "kv_cache_allocated": "memory_pool",
    "memory_pool_end": "memory_pool",
    "graph_capture_end": "cuda_graph",
}
_FACTS = ("kv_cache_allocated", "engine_timings", "server_args")
# Cheap first look at a line: only these messages (after the prefix's `] `) are parsed: logparse's
# own markers of the lines read here, so a release's new wording learnt there is read here too.
WATCHED = (
    READY_TEXT,
    *(start for start, kind in ERRORS if kind == "scheduler_exception"),
    *(start for start, kind in MILESTONES if kind in _ENDS or kind in _FACTS),
    CAPTURE_START,
)
_STARTED = "Started "  # systemd's line when a Type=simple unit's main process has been forked
_SHOWN_TO_THE_SECOND = 1.5  # ExecMainStartTimestamp, rounded down to the second, to its Started line
_KEPT = 16  # starts remembered
_COMPARED_S = 0.1  # the least time a phase of the last start took to be compared with


@dataclass
class RankPhases:
    """One rank's phases: when each ended (epoch seconds; each began where the one before it
    ended, the first at the unit's start), the memory left after, and its KV cache."""

    started: float | None = None  # the unit's start: where its imports began
    ended: dict[str, float] = field(default_factory=dict)
    capturing: bool = False  # between a `Capture … graph begin.` and its end
    avail_gb: dict[str, float] = field(default_factory=dict)
    kv: dict[str, str] = field(default_factory=dict)  # `KV Cache is allocated.`: dtype, #tokens, K size, ...

    def begun(self, phase: str) -> float | None:
        """Where the last phase before `phase` that this rank ended, ended (the unit's start for
        the first): a phase whose line never came is counted in the next, and none is lost."""
        for earlier in reversed(RANK_PHASES[: RANK_PHASES.index(phase)]):
            if earlier in self.ended:
                return self.ended[earlier]
        return self.started

    def seconds(self, phase: str) -> float | None:
        begun, ended = self.begun(phase), self.ended.get(phase)
        return ended - begun if begun is not None and ended is not None else None

    def open_phase(self) -> str | None:
        """The phase this rank is in now (or died in); None once its part is done: after the
        memory pool, unless a capture has begun."""
        if self.capturing:
            return "cuda_graph"
        done = [p for p in RANK_PHASES if p in self.ended]
        if not done:
            return RANK_PHASES[0]
        if done[-1] in ("memory_pool", "cuda_graph"):
            return None
        return RANK_PHASES[RANK_PHASES.index(done[-1]) + 1]

    def done_at(self) -> float | None:
        """When its part ended (its last phase's end), once it has."""
        return max(self.ended.values()) if self.ended and self.open_phase() is None else None


@dataclass
class Timeline:
    """One start (invocation) of the server."""

    invocation: str
    first_at: float | None = None  # its first line
    ranks: dict[str, RankPhases] = field(default_factory=dict)  # "TP3" ("" for a single rank)
    ready_at: float | None = None
    failed_at: float | None = None  # a rank's exception, or the main process's end, before ready
    failed_rank: str | None = None
    failure: str = ""  # what ended it: `TP3 hit an exception`, `the main process exited 1/FAILURE`
    started_line: float | None = None  # systemd's `Started` line of this invocation
    exec_main_start: float | None = None  # systemctl show's ExecMainStartTimestamp, to the second
    args_at: float | None = None  # the main process's server_args line: its arguments resolved
    mem_fraction: str | None = None  # the --mem-fraction-static that line says SGLang resolved
    timings: dict[str, float] = field(default_factory=dict)  # `Engine startup timings (s): ...`

    @property
    def started_at(self) -> float | None:
        """The unit's start: its Started line where that falls within ExecMainStartTimestamp's
        second (a unit whose Started line comes later, at its READY=1, is not timed by it)."""
        line, shown = self.started_line, self.exec_main_start
        if line is not None and (shown is None or shown <= line < shown + _SHOWN_TO_THE_SECOND):
            return line
        return shown if shown is not None else line

    def unit_started(self, *, line: float | None = None, shown: float | None = None) -> None:
        """What systemd said of this start: its `Started` line's stamp, or ExecMainStartTimestamp."""
        if line is not None and self.started_line is None:
            self.started_line = line
        if shown is not None:
            self.exec_main_start = shown
        for phases in self.ranks.values():
            phases.started = self.started_at

    def rank(self, name: str) -> RankPhases:
        found = self.ranks.get(name)
        if found is None:
            found = self.ranks[name] = RankPhases(started=self.started_at)
        return found

    def seconds(self, rank: str, phase: str) -> float | None:
        """A rank's seconds in a phase; the warm-up's, for any rank."""
        if phase == "warm_up":
            done = self.ranks_done_at()
            return self.ready_at - done if self.ready_at is not None and done is not None else None
        phases = self.ranks.get(rank)
        return phases.seconds(phase) if phases is not None else None

    def ranks_done_at(self) -> float | None:
        """When the last rank seen ended its part, where each has."""
        done = [p.done_at() for p in self.ranks.values()]
        known = [d for d in done if d is not None]
        return max(known) if known and len(known) == len(done) else None

    def slowest(self, phase: str) -> tuple[str, float] | None:
        if phase == "warm_up":
            seconds = self.seconds("", phase)
            return ("", seconds) if seconds is not None else None
        timed = [(r, s) for r, p in self.ranks.items() if (s := p.seconds(phase)) is not None]
        return max(timed, key=lambda x: x[1]) if timed else None

    def min_avail_gb(self, phase: str) -> float | None:
        values = [p.avail_gb[phase] for p in self.ranks.values() if phase in p.avail_gb]
        return min(values) if values else None

    def _open(self) -> list[tuple[str, str, float | None]]:
        """(phase, rank, since when) of each rank under way, or the main process's when none is:
        its imports before any rank has printed, its warm-up once every rank is done."""
        found = []
        for name, phases in self.ranks.items():
            phase = phases.open_phase()
            if phase is not None:
                found.append((phase, name, phases.begun(phase)))
        if found:
            return found
        if not self.ranks:
            return [("imports", "", self.started_at)]
        return [("warm_up", "", self.ranks_done_at())]

    def died_in(self) -> tuple[str, str] | None:
        """(phase, rank) a start that failed before ready died in: the failed rank's, else the
        first rank's under way, else the main process's (rank "")."""
        if self.failed_at is None or self.ready_at is not None:
            return None
        under_way = sorted(self._open(), key=lambda o: rank_order(o[1]))
        phase, rank, _ = next((o for o in under_way if o[1] == self.failed_rank), under_way[0])
        return phase, rank

    def current(self) -> tuple[str, str, float] | None:
        """(phase, its slowest rank so far, seconds in it) of a start still under way."""
        if self.ready_at is not None or self.failed_at is not None:
            return None
        now = time.time()
        timed = [(phase, rank, now - since) for phase, rank, since in self._open() if since is not None]
        return max(timed, key=lambda x: x[2]) if timed else None

    def durations(self) -> dict[str, float]:
        """phase -> seconds of its slowest rank, for the phases any rank has timed."""
        return {phase: slow[1] for phase in PHASES if (slow := self.slowest(phase)) is not None}

    def total(self) -> float | None:
        """Seconds from the unit's start to ready."""
        return self.ready_at - self.started_at if self.ready_at is not None and self.started_at is not None else None


class StartupScan:
    """Timelines of each start, read from the unit's journal batch after batch."""

    def __init__(self) -> None:
        self.starts: PerStart[Timeline] = PerStart(Timeline, _KEPT)

    def unit_started(self, invocation: str | None, exec_main_start: float | None) -> None:
        """systemctl show's word on when a start the journal brought started (the status poll's).
        A start the journal has not brought is not made here: the starts are kept in the
        journal's order, oldest first."""
        timeline = self.starts.get(invocation or "")
        if timeline is not None and exec_main_start is not None:
            timeline.unit_started(shown=exec_main_start)

    def feed(self, entries: list[JournalEntry], quiet: str | None = None) -> None:
        """A line is looked at only as far as it can matter: its start's timeline is found once
        for a run of lines of that start, and its time read only for a line that is kept (a
        flood's lines cost this scan more than their fold did). `quiet`: the batch's
        `quiet_run`, where the caller has it; then its first line is all."""
        if quiet is not None:
            timeline = self.starts.of(quiet)
            if timeline.first_at is None:
                timeline.first_at = entries[0].logged_at()
            return
        last: Timeline | None = None
        last_id: str | None = None
        for entry in entries:
            invocation = entry.invocation_id
            if invocation is None:
                continue
            if entry.pid == 1:  # systemd's own lines: when the main process started, how it ended
                last_id = None  # a new start may begin here
                at = entry.logged_at()
                if entry.message.startswith(_STARTED):
                    self.starts.of(invocation).unit_started(line=at)
                    continue
                how = main_exit_of(entry.message)
                line = self.starts.get(invocation)
                if how is not None and line is not None and line.ready_at is None and line.failed_at is None:
                    line.failed_at, line.failure = at, f"the main process {how}"
                continue
            if invocation != last_id:
                last, last_id = self.starts.of(invocation), invocation
                if last.first_at is None:
                    last.first_at = entry.logged_at()
            assert last is not None
            message = entry.message
            end = message.find("] ")
            if end < 0 or not message.startswith(WATCHED, end + 2):
                continue
            self._read(last, parse(message), entry.logged_at())

    @staticmethod
    def _read(timeline: Timeline, event: object, at: float) -> None:
        if isinstance(event, Ready):
            timeline.ready_at = timeline.ready_at or at
        elif isinstance(event, ErrorMarker):
            if event.kind == "scheduler_exception" and timeline.ready_at is None and timeline.failed_at is None:
                timeline.failed_at, timeline.failed_rank = at, event.rank
                timeline.failure = f"{event.rank or 'the scheduler'} hit an exception"
        elif isinstance(event, Milestone):
            if event.kind == "server_args":
                timeline.args_at = timeline.args_at or at
                timeline.mem_fraction = event.values.get("mem_fraction_static")
                return
            if event.kind == "engine_timings":
                timeline.timings = {k: n for k in event.values if (n := event.number(k)) is not None}
                return
            phases = timeline.rank(event.rank)
            if event.kind in ("graph_capture_begin", "graph_capture_end"):
                phases.capturing = event.kind == "graph_capture_begin"
            if (ends := _ENDS.get(event.kind)) is not None:
                phases.ended[ends] = at
                if (gb := event.number("avail mem")) is not None:
                    phases.avail_gb[ends] = gb
            if event.kind == "kv_cache_allocated":
                phases.kv = event.values

    def paired(self, memory: StartupMemory | None = None) -> list[Startup]:
        """Each start that printed a start-up line, and the latest start whatever it printed
        (still in its imports, or dead in them), latest first, with the start before it that
        reached ready (in this scan, else the one `memory` kept)."""
        out = []
        latest = next(reversed(self.starts), None)
        for timeline in reversed(list(self.starts.values())):
            if not timeline.ranks and timeline.ready_at is None and timeline.invocation != latest:
                continue
            if timeline.started_at is None and timeline.first_at is None:
                continue
            before = self.last_ready(before=timeline.invocation)
            began = timeline.started_at or timeline.first_at or 0.0
            if before is not None and (before.ready_at or 0.0) < began:
                out.append(Startup(timeline, Remembered.of(before)))
            else:
                out.append(Startup(timeline, memory.load(before=timeline.invocation) if memory else None))
        return out

    def last_ready(self, before: str | None = None) -> Timeline | None:
        """The latest start that reached ready (other than `before`)."""
        ready = [t for k, t in self.starts.items() if t.ready_at is not None and k != before]
        return max(ready, key=lambda t: t.ready_at or 0.0) if ready else None


@dataclass(frozen=True)
class Remembered:
    """A start that reached ready, kept on the jump box: what the next start is compared with."""

    invocation: str
    ready_at: float
    phases: dict[str, float]  # phase -> seconds of its slowest rank

    @classmethod
    def of(cls, timeline: Timeline) -> Remembered:
        assert timeline.ready_at is not None
        return cls(timeline.invocation, timeline.ready_at, timeline.durations())


@dataclass(frozen=True)
class Startup:
    """One start's timeline, and the start before it that reached ready (None: none known)."""

    timeline: Timeline
    last: Remembered | None


class StartupMemory:
    """The last few starts of a unit that reached ready, in the state directory (one small JSON)."""

    KEPT = 5

    def __init__(self, host: str, unit: str, root: Path | None = None) -> None:
        self.path = (root or state_dir("startups")) / safe_name(host) / f"{safe_name(unit)}.json"

    def _all(self) -> list[Remembered]:
        try:
            data = json.loads(self.path.read_text())
            return [Remembered(str(d["invocation"]), float(d["ready_at"]), dict(d["phases"])) for d in data]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def load(self, before: str | None = None) -> Remembered | None:
        """The latest kept start other than `before`."""
        kept = [r for r in self._all() if r.invocation != before]
        return max(kept, key=lambda r: r.ready_at) if kept else None

    def keep(self, timeline: Timeline) -> None:
        if timeline.ready_at is None:
            return
        kept = [r for r in self._all() if r.invocation != timeline.invocation]
        kept = sorted([*kept, Remembered.of(timeline)], key=lambda r: r.ready_at)[-self.KEPT :]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps([asdict(r) for r in kept]).encode())


def compared(timeline: Timeline, last: Remembered | None) -> dict[str, str]:
    """phase -> `3.1x the last start (133 s)` where the last start timed it too, for at least a
    tenth of a second (a ratio of two stamps a millisecond apart says nothing)."""
    if last is None or last.invocation == timeline.invocation:
        return {}
    out = {}
    for phase, seconds in timeline.durations().items():
        before = last.phases.get(phase)
        if before is not None and before >= _COMPARED_S:
            out[phase] = f"{seconds / before:.1f}x the last start ({before:.1f} s)"
    return out


def _on(timeline: Timeline, phase: str, rank: str) -> str:
    """` on TP3` (` on rank 0` for a single rank); nothing where the phase is the main process's
    (the warm-up, or imports before any rank has printed)."""
    return "" if phase == "warm_up" or rank not in timeline.ranks else f" on {rank or 'rank 0'}"


def _died(timeline: Timeline) -> str | None:
    """`died in load weight on TP3`, `died in imports`; None for a start that did not fail
    before ready."""
    died = timeline.died_in()
    return f"died in {NAMES[died[0]]}{_on(timeline, *died)}" if died is not None else None


def death(timeline: Timeline) -> str | None:
    """`died in load weight on TP3: TP3 hit an exception`, for a start that failed before ready."""
    end = _died(timeline)
    return f"{end}: {timeline.failure}" if end is not None else None


def under_way(timeline: Timeline) -> str | None:
    """`in load weight for 412 s (TP3 slowest so far)`, `in imports for 12 s`: where a start
    still under way is."""
    now = timeline.current()
    if now is None:
        return None
    phase, rank, seconds = now
    slowest = f" ({rank or 'rank 0'} slowest so far)" if _on(timeline, phase, rank) else ""
    return f"in {NAMES[phase]} for {seconds:.0f} s{slowest}"


def table(timeline: Timeline, last: Remembered | None = None, most_ranks: int = 8) -> list[list[str]]:
    """Header, then one row per phase: its slowest rank and time, the least memory free after it
    on any rank, the comparison with the last start, and each rank's seconds (up to `most_ranks`
    ranks; beyond, the median). The warm-up is the main process's: no rank's."""
    ranks = sorted(timeline.ranks, key=rank_order)
    shown = ranks if len(ranks) <= most_ranks else []
    header = ["phase", "slowest", "free after", "vs the last start", *(r or "rank 0" for r in shown)]
    if not shown and ranks:
        header.append(f"median of {len(ranks)} ranks")
    versus = compared(timeline, last)
    died = timeline.died_in()
    rows = [header]
    for phase in PHASES:
        slow = timeline.slowest(phase)
        if slow is None and (died is None or died[0] != phase):
            continue
        avail = timeline.min_avail_gb(phase)
        row = [
            NAMES[phase] + (" ✗" if died is not None and died[0] == phase else ""),
            f"{'main process' if phase == 'warm_up' else slow[0] or 'rank 0'} {slow[1]:.1f} s" if slow else "-",
            f"{avail:.2f} GB" if avail is not None else "-",
            versus.get(phase, "-"),
        ]
        timed = [None if phase == "warm_up" else timeline.ranks[r].seconds(phase) for r in ranks]
        if shown:
            row += [f"{s:.1f}" if s is not None else "-" for s in timed]
        elif ranks:
            known = sorted(s for s in timed if s is not None)
            row.append(f"{known[len(known) // 2]:.1f}" if known else "-")
        rows.append(row)
    return rows


def facts(timeline: Timeline) -> list[str]:
    """What the start-up lines say beside the phases: how the imports split between the main
    process and the schedulers, the KV cache each rank allocated (with the memory fraction SGLang
    resolved), and SGLang's own timings of the start."""
    out = []
    started = timeline.started_at
    if started is not None and timeline.args_at is not None:
        said = f"imports: the main process {timeline.args_at - started:.1f} s (to its server_args line)"
        began = [p.ended["imports"] for p in timeline.ranks.values() if "imports" in p.ended]
        if began:
            said += f", then the schedulers {max(began) - timeline.args_at:.1f} s (to the last rank's distributed init)"
        out.append(said)
    kv = [p.kv for _, p in sorted(timeline.ranks.items(), key=lambda r: rank_order(r[0])) if p.kv]
    if kv:
        tokens = sorted({int(t) for k in kv if (t := k.get("#tokens", "")).isdigit()})
        count = f"{tokens[0]:,}" if len(tokens) == 1 else f"{tokens[0]:,} to {tokens[-1]:,}" if tokens else "?"
        sizes = ", ".join(f"{key} {kv[0][key]}" for key in ("dtype", "K size", "V size", "KV size") if key in kv[0])
        said = f"KV cache: {count} tokens" + (f" on each of {len(kv)} ranks" if len(kv) > 1 else "")
        said += f" ({sizes})" if sizes else ""
        if timeline.mem_fraction not in (None, "None"):
            said += f"; --mem-fraction-static resolved to {timeline.mem_fraction}"
        out.append(said)
    if timeline.timings:  # in SGLang's own names, as its line and /metrics' startup_time_seconds say them
        timed = [f"{key.replace(' ', '.')} {seconds:.2f} s" for key, seconds in timeline.timings.items() if seconds > 0]
        out.append("SGLang's own timings: " + ", ".join(timed or ["all 0.00 s"]))
    return out


def headline(unit: str, timeline: Timeline) -> str:
    """`start-up of sglang-demo.service, start 2d5fa9fd (12:00:01): ready 17.2 s after the unit's start`."""
    began = timeline.started_at or timeline.first_at
    clock = time.strftime("%H:%M:%S", time.localtime(began)) if began else "?"
    head = f"start-up of {unit}, start {timeline.invocation[:8]} ({clock})"
    total = timeline.total()
    if total is not None:
        return f"{head}: ready {total:.1f} s after the unit's start"
    if timeline.ready_at is not None and timeline.first_at is not None:
        return f"{head}: ready {timeline.ready_at - timeline.first_at:.1f} s after its first line"
    end = _died(timeline)
    if end is not None:
        return f"{head}: {end} ({timeline.failure})"
    now = under_way(timeline)
    return f"{head}: {now}" if now is not None else f"{head}: no start-up line yet"
