"""The start-up timeline: each phase of each rank of one start of the server, from SGLang's own
start-up lines, the slowest rank, the memory left after each phase, and the phase a failed start
died in; compared with the last start that reached ready.

A trillion-parameter start takes minutes, and the operator's questions are which phase it is
in, which rank holds it up, and whether it is slower than last time. The lines (cockpit.sglang.
logparse milestones, every release's wording):

- distributed set-up: `Init torch distributed begin.` / `... ends.` (to 0.5.19), `Init
  parallel begin.` / `Init parallel ends.` (0.5.23);
- weights: `Load weight begin. avail mem=X GB` / `Load weight end. elapsed=…, avail mem=X GB, …`;
- memory pool: from the end of the weights to `Memory pool end. avail mem=X GB` (0.4.x: `KV
  Cache is allocated. …`); SGLang prints no line at its start;
- CUDA graphs: from the first `Capture … graph begin.` to the last `Capture … graph end.`
  (0.5.19 on, one capture per graph: decode, prefill, draft);
- ready: `The server is fired up and ready to roll!` (once, rank 0).

Times are journald's receipt stamps (microseconds), not the lines' own second-resolution stamps.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cockpit.localfs import write_atomic
from cockpit.sglang.logparse import (
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
from cockpit.sglang.per_start import PerStart
from cockpit.statedir import safe_name, state_dir
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.status import main_exit_of

PHASES = ("init", "load_weight", "memory_pool", "cuda_graph")
NAMES = {
    "init": "distributed init",
    "load_weight": "load weight",
    "memory_pool": "memory pool",
    "cuda_graph": "CUDA graphs",
}
_BEGINS = {"init_begin": "init", "load_weight_begin": "load_weight", "graph_capture_begin": "cuda_graph"}
_ENDS = {
    "init_end": "init",
    "load_weight_end": "load_weight",
    "memory_pool_end": "memory_pool",
    "kv_cache_allocated": "memory_pool",
    "graph_capture_end": "cuda_graph",
}
# Cheap first look at a line: only these messages (after the prefix's `] `) are parsed: logparse's
# own markers of the lines read here, so a release's new wording learnt there is read here too.
_WATCHED = (
    READY_TEXT,
    *(start for start, kind in ERRORS if kind == "scheduler_exception"),
    *(start for start, kind in MILESTONES if kind in _BEGINS or kind in _ENDS),
    CAPTURE_START,
)
_KEPT = 16  # starts remembered


@dataclass
class RankPhases:
    """One rank's phases: when each began and ended (epoch seconds), and the memory left after."""

    begun: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    avail_gb: dict[str, float] = field(default_factory=dict)

    def seconds(self, phase: str) -> float | None:
        begun, ended = self.begun.get(phase), self.ended.get(phase)
        return ended - begun if begun is not None and ended is not None else None

    def open_phase(self) -> str | None:
        """The phase this rank is in now (or died in): begun and not ended, else the one after
        the last it ended (the memory pool has no line of its own to begin)."""
        for phase in reversed(PHASES):
            if phase in self.begun and phase not in self.ended:
                return phase
        done = [p for p in PHASES if p in self.ended]
        if not done or done[-1] == PHASES[-1]:
            return None
        return PHASES[PHASES.index(done[-1]) + 1]


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

    def rank(self, name: str) -> RankPhases:
        return self.ranks.setdefault(name, RankPhases())

    def slowest(self, phase: str) -> tuple[str, float] | None:
        timed = [(r, s) for r, p in self.ranks.items() if (s := p.seconds(phase)) is not None]
        return max(timed, key=lambda x: x[1]) if timed else None

    def min_avail_gb(self, phase: str) -> float | None:
        values = [p.avail_gb[phase] for p in self.ranks.values() if phase in p.avail_gb]
        return min(values) if values else None

    def died_in(self) -> tuple[str, str] | None:
        """(phase, rank) a start that failed before ready died in."""
        if self.failed_at is None or self.ready_at is not None:
            return None
        rank = self.failed_rank if self.failed_rank in self.ranks else None
        order = [rank] if rank is not None else sorted(self.ranks)
        for name in order:
            phase = self.ranks[name].open_phase()
            if phase is not None:
                return phase, name
        return None

    def current(self) -> tuple[str, str, float] | None:
        """(phase, its slowest rank so far, seconds in it) of a start still under way."""
        if self.ready_at is not None or self.failed_at is not None:
            return None
        now, best = time.time(), None
        for name, phases in self.ranks.items():
            phase = phases.open_phase()
            if phase is None:
                continue
            since = phases.begun.get(phase) or phases.ended.get(PHASES[max(PHASES.index(phase) - 1, 0)])
            if since is not None and (best is None or now - since > best[2]):
                best = (phase, name, now - since)
        return best

    def durations(self) -> dict[str, float]:
        """phase -> seconds of its slowest rank, for the phases any rank has timed."""
        return {phase: slow[1] for phase in PHASES if (slow := self.slowest(phase)) is not None}


class StartupScan:
    """Timelines of each start, read from the unit's journal batch after batch."""

    def __init__(self) -> None:
        self.starts: PerStart[Timeline] = PerStart(Timeline, _KEPT)

    def feed(self, entries: list[JournalEntry]) -> None:
        for entry in entries:
            invocation = entry.invocation_id
            if invocation is None:
                continue
            at = entry.realtime_us / 1e6 if entry.realtime_us is not None else time.time()
            if entry.pid == 1:  # systemd's own line: how the main process ended
                how = main_exit_of(entry.message)
                line = self.starts.get(invocation)
                if how is not None and line is not None and line.ready_at is None and line.failed_at is None:
                    line.failed_at, line.failure = at, f"the main process {how}"
                continue
            message = entry.message
            end = message.find("] ")
            timeline = self.starts.of(invocation)
            if timeline.first_at is None:
                timeline.first_at = at
            if end < 0 or not message.startswith(_WATCHED, end + 2):
                continue
            self._read(timeline, parse(message), at)

    @staticmethod
    def _read(timeline: Timeline, event: object, at: float) -> None:
        if isinstance(event, Ready):
            timeline.ready_at = timeline.ready_at or at
        elif isinstance(event, ErrorMarker):
            if event.kind == "scheduler_exception" and timeline.ready_at is None and timeline.failed_at is None:
                timeline.failed_at, timeline.failed_rank = at, event.rank
                timeline.failure = f"{event.rank or 'the scheduler'} hit an exception"
        elif isinstance(event, Milestone):
            phases = timeline.rank(event.rank)
            if (begins := _BEGINS.get(event.kind)) is not None:
                phases.begun.setdefault(begins, at)  # several captures: the first begins the phase
            elif (ends := _ENDS.get(event.kind)) is not None:
                phases.ended[ends] = at  # several captures: the last ends it
                if ends == "load_weight":
                    phases.begun.setdefault("memory_pool", at)  # it has no line of its own
                if (gb := event.number("avail mem")) is not None:
                    phases.avail_gb[ends] = gb

    def paired(self, memory: StartupMemory | None = None) -> list[Startup]:
        """Each start that printed a start-up line, latest first, with the start before it that
        reached ready (in this scan, else the one `memory` kept)."""
        out = []
        for timeline in reversed(list(self.starts.values())):
            if not timeline.ranks and timeline.ready_at is None:
                continue
            before = self.last_ready(before=timeline.invocation)
            if before is not None and (before.ready_at or 0.0) < (timeline.first_at or 0.0):
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
    """phase -> `3.1x the last start (133 s)` where the last start timed it too."""
    if last is None or last.invocation == timeline.invocation:
        return {}
    out = {}
    for phase, seconds in timeline.durations().items():
        before = last.phases.get(phase)
        if before:
            out[phase] = f"{seconds / before:.1f}x the last start ({before:.1f} s)"
    return out


def _died(timeline: Timeline) -> str | None:
    """`died in load weight on TP3`, or `died before ready` where no phase is known; None for a
    start that did not fail before ready."""
    if timeline.failed_at is None or timeline.ready_at is not None:
        return None
    died = timeline.died_in()
    return f"died in {NAMES[died[0]]} on {died[1] or 'rank 0'}" if died is not None else "died before ready"


def death(timeline: Timeline) -> str | None:
    """`died in load weight on TP3: TP3 hit an exception`, for a start that failed before ready."""
    end = _died(timeline)
    return f"{end}: {timeline.failure}" if end is not None else None


def table(timeline: Timeline, last: Remembered | None = None, most_ranks: int = 8) -> list[list[str]]:
    """Header, then one row per phase: its slowest rank and time, the least memory free after it
    on any rank, the comparison with the last start, and each rank's seconds (up to `most_ranks`
    ranks; beyond, the median)."""
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
        timed = [timeline.ranks[r].seconds(phase) for r in ranks]
        if slow is None and (died is None or died[0] != phase):
            continue
        avail = timeline.min_avail_gb(phase)
        row = [
            NAMES[phase] + (" ✗" if died is not None and died[0] == phase else ""),
            f"{slow[0] or 'rank 0'} {slow[1]:.1f} s" if slow else "-",
            f"{avail:.2f} GB" if avail is not None else "-",
            versus.get(phase, "-"),
        ]
        if shown:
            row += [f"{s:.1f}" if s is not None else "-" for s in timed]
        elif ranks:
            known = sorted(s for s in timed if s is not None)
            row.append(f"{known[len(known) // 2]:.1f}" if known else "-")
        rows.append(row)
    return rows


def headline(unit: str, timeline: Timeline) -> str:
    """`sglang-demo.service, start 2d5fa9fd (12:00:01): ready 5.5 s after its first line`."""
    began = time.strftime("%H:%M:%S", time.localtime(timeline.first_at)) if timeline.first_at else "?"
    head = f"start-up of {unit}, start {timeline.invocation[:8]} ({began})"
    if timeline.ready_at is not None and timeline.first_at is not None:
        return f"{head}: ready {timeline.ready_at - timeline.first_at:.1f} s after its first line"
    end = _died(timeline)
    if end is not None:
        return f"{head}: {end} ({timeline.failure})"
    now = timeline.current()
    if now is not None:
        return f"{head}: in {NAMES[now[0]]} for {now[2]:.0f} s, {now[1] or 'rank 0'} slowest so far"
    return f"{head}: no start-up line yet"
