"""The start-up timeline on a journal the lab's stand-in printed (tests/data/journal-startup.jsonl,
SGLang 0.5.23's start-up lines of eight ranks): a start that reached ready, then one whose TP3 died
loading its weights; and the start kept on the jump box to compare the next with. Then on real
SGLang 0.5.23 starts (tests/data/sglang-0.5.23/real-tp1-start.jsonl, real-tp2-start.jsonl): the
phases from the unit's start, imports first, against the journal's own stamps."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from cockpit.incident import Incident, render
from cockpit.sglang.server.health import HealthScan
from cockpit.sglang.server.logparse import Milestone, parse
from cockpit.sglang.server.startup import (
    PHASES,
    RANK_PHASES,
    StartupMemory,
    StartupScan,
    Timeline,
    death,
    facts,
    headline,
    table,
    under_way,
)
from cockpit.systemd.entry import JournalEntry, parse_json_lines

DATA = Path(__file__).parents[1] / "data"
ENTRIES = parse_json_lines((DATA / "journal-startup.jsonl").read_text().splitlines())
REAL = DATA / "sglang-0.5.23"


@pytest.fixture
def scan() -> StartupScan:
    found = StartupScan()
    found.feed(ENTRIES)
    return found


def test_each_phase_of_each_rank_of_a_start_that_reached_ready(scan: StartupScan) -> None:
    ready, died = scan.starts.values()
    assert sorted(ready.ranks) == [f"TP{r}" for r in range(8)] and ready.ready_at is not None
    for phase in ("init", "load_weight", "memory_pool", "cuda_graph"):  # the stand-in's 8 s, over four phases
        times = [ready.ranks[f"TP{r}"].seconds(phase) for r in range(8)]
        assert all(t is not None and t > 0.5 for t in times), (phase, times)
        assert ready.slowest(phase)[0] == "TP7"  # type: ignore[index]  # the stand-in's last rank is slowest
    for rank, phases in ready.ranks.items():  # no gap: a rank's phases add up to its part of the start
        assert phases.started == ready.started_at and phases.done_at() is not None
        assert math.isclose(sum(phases.seconds(p) or 0 for p in RANK_PHASES), phases.done_at() - ready.started_at), rank
    assert ready.min_avail_gb("load_weight") == 124.20 and ready.min_avail_gb("cuda_graph") == 20.70
    assert ready.died_in() is None and ready.current() is None
    assert ready.ranks["TP0"].kv == {
        "dtype": "torch.bfloat16",
        "#tokens": "412345",
        "K size": "51.35 GB",
        "V size": "51.35 GB",
    }


def test_a_start_that_dies_names_its_phase_and_rank(scan: StartupScan) -> None:
    ready, died = scan.starts.values()
    assert died.ready_at is None and died.died_in() == ("load_weight", "TP3")
    assert died.failure == "TP3 hit an exception"
    [latest, first] = scan.paired()
    assert latest.timeline is died and latest.last is not None and latest.last.invocation == ready.invocation
    assert death(died) == "died in load weight on TP3: TP3 hit an exception" and death(ready) is None
    rows = table(died, latest.last)
    assert rows[0][:4] == ["phase", "slowest", "free after", "vs the last start"] and rows[0][4:] == [
        f"TP{r}" for r in range(8)
    ]
    load = next(r for r in rows if r[0].startswith("load weight"))
    assert load[0] == "load weight ✗" and load[4 + 3] == "-"  # TP3 never ended it
    assert re.fullmatch(r"\d+\.\dx the last start \(\d+\.\d s\)", load[3]), load


def test_every_releases_wording_of_the_phases() -> None:
    lines = [
        "[2026-01-01 00:00:00 TP1] Init torch distributed begin.",
        "[2026-01-01 00:00:02 TP1] Init torch distributed ends. mem usage=0.55 GB",
        "[2026-01-01 00:00:02 TP1] Load weight begin. avail mem=78.52 GB",
        "[2026-01-01 00:00:05 TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.10 GB",
        "[2026-01-01 00:00:06 TP1] KV Cache is allocated. #tokens: 412345, K size: 24.00 GB, V size: 24.00 GB",
        "[2026-01-01 00:00:06 TP1] Memory pool end. avail mem=9.87 GB",
        "[2026-01-01 00:00:07 TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=9.80 GB",
        "[2026-01-01 00:00:09 TP1] Capture cuda graph end. Time elapsed: 2.00 s. mem usage=0.71 GB. avail mem=9.09 GB.",
        "[2026-01-01 00:00:10] The server is fired up and ready to roll!",
    ]
    assert [parse(line).kind for line in lines[:-1]] == [  # type: ignore[union-attr]
        "init_begin",
        "init_end",
        "load_weight_begin",
        "load_weight_end",
        "kv_cache_allocated",
        "memory_pool_end",
        "graph_capture_begin",
        "graph_capture_end",
    ]
    scan = StartupScan()
    started = JournalEntry(message="Started sglang-x.service - X.", realtime_us=500_000, pid=1, invocation_id="x")
    scan.feed(
        [started]
        + [
            JournalEntry(message=m, realtime_us=(i + 1) * 1_000_000, pid=9, invocation_id="x")
            for i, m in enumerate(lines)
        ]
    )
    line = scan.starts["x"]
    assert line.started_at == 0.5
    assert {p: line.seconds("TP1", p) for p in PHASES} == {
        "imports": 0.5,  # from the unit's start to the rank's first start-up line
        "init": 1.0,
        "model_setup": 1.0,
        "load_weight": 1.0,
        "memory_pool": 2.0,  # from the weights' end: SGLang prints no line at its start
        "cuda_graph": 2.0,  # from the pool's end to the capture's
        "warm_up": 1.0,  # from the last rank's end to the ready line
    }
    assert sum(line.durations().values()) == line.total() == 8.5
    assert line.ranks["TP1"].avail_gb == {
        "model_setup": 78.52,
        "load_weight": 63.10,
        "memory_pool": 9.87,
        "cuda_graph": 9.09,
    }
    assert line.ranks["TP1"].kv == {"#tokens": "412345", "K size": "24.00 GB", "V size": "24.00 GB"}  # 0.4.x: no dtype


def test_the_last_ready_start_is_kept_on_the_jump_box(scan: StartupScan, tmp_path: Path) -> None:
    ready, died = scan.starts.values()
    memory = StartupMemory("lab", "sglang-start.service", root=tmp_path)
    memory.keep(died)  # never ready: not kept
    assert memory.load() is None
    memory.keep(ready)
    kept = memory.load(before=died.invocation)
    assert kept is not None and kept.invocation == ready.invocation and set(kept.phases) == set(PHASES)
    assert memory.load(before=ready.invocation) is None  # nothing before the only start kept
    (tmp_path / "lab" / "sglang-start.service.json").write_text("{torn")
    assert memory.load() is None  # a torn file is no comparison, never an error


def test_the_incident_note_carries_each_start(scan: StartupScan) -> None:
    note = render(Incident(host="lab", unit="sglang-start.service", startups=scan.paired()))
    section = note[note.index("## Start-up") :]
    assert section.index("died in load weight on TP3") < section.index("ready ")  # latest first
    assert "| load weight ✗ |" in section and section.count("| phase | slowest |") == 2


def test_a_crash_loop_keeps_only_the_latest_starts_in_both_scans() -> None:
    """Hundreds of starts in a long session: each scan keeps its last few, the newest kept."""
    lines = [
        JournalEntry(
            message="[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=78.52 GB", pid=9, invocation_id=str(i)
        )
        for i in range(40)
    ]
    startups, health = StartupScan(), HealthScan()
    startups.feed(lines)
    health.feed(lines)
    assert list(startups.starts) == [str(i) for i in range(24, 40)]
    assert list(health.starts) == [str(i) for i in range(32, 40)]
    assert startups.starts["39"].ranks["TP0"].ended and health.of(None) is not health.of(None)


def _recorded(name: str) -> tuple[list[dict], list[JournalEntry]]:
    lines = (REAL / name).read_text().splitlines()
    return [json.loads(line) for line in lines], parse_json_lines(lines)


def _stamp(raw: list[dict], text: str, rank: str = "") -> float:
    """journald's own stamp of the first line holding `text` (of `rank`, `TP1`), read from the JSON."""
    return next(
        int(e["__REALTIME_TIMESTAMP"]) / 1e6
        for e in raw
        if isinstance(e["MESSAGE"], str) and text in e["MESSAGE"] and (not rank or f" {rank}] " in e["MESSAGE"])
    )


def test_a_real_tp1_start_is_timed_from_the_units_start() -> None:
    """SGLang 0.5.23 printed its first line 3.8 s after systemd's Started and its scheduler's
    `Init parallel begin.` 14 s after: that time is the imports phase, and the phases add up to
    the start."""
    raw, entries = _recorded("real-tp1-start.jsonl")
    started = _stamp(raw, "Started sglang-real-tp1.service")
    scan = StartupScan()
    scan.feed(entries)
    [startup] = scan.paired()
    timeline = startup.timeline
    assert timeline.started_at == started
    imports = timeline.seconds("", "imports")
    assert imports is not None and math.isclose(imports, _stamp(raw, "Init parallel begin.") - started)
    assert imports > 10  # 14.0 s: most of the start
    ready = _stamp(raw, "The server is fired up and ready to roll!")
    assert math.isclose(sum(timeline.durations().values()), ready - started)  # 17.16 s, no second lost
    assert timeline.total() == ready - started
    assert headline("sglang-real-tp1.service", timeline).endswith(": ready 17.2 s after the unit's start")
    rows = table(timeline)
    assert [row[0] for row in rows[1:]] == [
        "imports",
        "distributed init",
        "model set-up",
        "load weight",
        "memory pool",
        "warm-up",
    ]  # no CUDA graph on a CPU
    assert rows[1][1] == "rank 0 14.0 s" and rows[-1][1] == "main process 1.5 s"
    assert facts(timeline) == [
        "imports: the main process 6.3 s (to its server_args line), then the schedulers 7.7 s (to the last rank's "
        "distributed init)",
        "KV cache: 16,384 tokens (dtype torch.bfloat16, K size 0.00 GB, V size 0.00 GB); "
        "--mem-fraction-static resolved to 0.719",
        "SGLang's own timings: load_weight 0.04 s, kv_cache_allocation 0.61 s, scheduler_e2e 1.72 s, "
        "tokenizer_e2e 9.40 s",
    ]


def test_a_real_tp2_start_times_each_ranks_imports() -> None:
    raw, entries = _recorded("real-tp2-start.jsonl")
    started = _stamp(raw, "Started sglang-real-tp2.service")
    ready = _stamp(raw, "The server is fired up and ready to roll!")
    scan = StartupScan()
    scan.feed(entries)
    [startup] = scan.paired()
    timeline = startup.timeline
    assert sorted(timeline.ranks) == ["TP0", "TP1"]
    for rank in ("TP0", "TP1"):
        imports = timeline.seconds(rank, "imports")
        assert imports is not None and math.isclose(imports, _stamp(raw, "Init parallel begin.", rank) - started)
    slowest = timeline.slowest("imports")
    assert slowest is not None and slowest[0] == "TP1" and 32 < slowest[1] < 33  # the last rank to begin
    last = max(timeline.ranks.values(), key=lambda p: p.done_at() or 0.0)  # the rank the warm-up waited for
    chain = sum(last.seconds(p) or 0.0 for p in RANK_PHASES) + (timeline.seconds("", "warm_up") or 0.0)
    assert math.isclose(chain, ready - started)  # 37.06 s
    assert abs(sum(timeline.durations().values()) - (ready - started)) < 1  # each phase's slowest rank: 37.6 s
    assert facts(timeline)[1].startswith("KV cache: 16,384 tokens on each of 2 ranks")


def test_the_units_start_is_systemds_exec_main_start() -> None:
    """Without systemd's Started line in the journal read, the status's ExecMainStartTimestamp
    (`--timestamp=unix`: the second, rounded down) is the start; with it, the line's microseconds
    within that second; a Started line far after it (Type=notify: at READY=1) is not the start."""
    raw, entries = _recorded("real-tp1-start.jsonl")
    started = _stamp(raw, "Started sglang-real-tp1.service")
    invocation = entries[0].invocation_id
    scan = StartupScan()
    scan.feed([e for e in entries if e.pid != 1])
    timeline = scan.starts[invocation or ""]
    assert timeline.started_at is None and "after its first line" in headline("u", timeline)
    scan.unit_started(invocation, float(math.floor(started)))
    assert timeline.started_at == math.floor(started) and timeline.ranks[""].started == math.floor(started)
    scan.feed([entries[0]])  # the Started line
    assert timeline.started_at == started and timeline.ranks[""].started == started
    scan.unit_started(invocation, float(math.floor(started)) - 3)
    assert timeline.started_at == math.floor(started) - 3


def test_a_start_under_way_says_its_phase_from_the_units_start() -> None:
    _, entries = _recorded("real-tp1-start.jsonl")
    begins = next(i for i, e in enumerate(entries) if "Init parallel begin." in e.message)
    scan = StartupScan()
    scan.feed(entries[:begins])  # the schedulers still importing
    [startup] = scan.paired()  # the latest start is shown before its first start-up line
    timeline = startup.timeline
    assert timeline.current() is not None and timeline.current()[0] == "imports"  # type: ignore[index]
    assert re.fullmatch(r"in imports for \d+ s", under_way(timeline) or "")
    loads = next(i for i, e in enumerate(entries) if "Load weight begin." in e.message)
    scan.feed(entries[begins : loads + 1])
    assert re.fullmatch(r"in load weight for \d+ s \(rank 0 slowest so far\)", under_way(timeline) or "")
    memory = next(i for i, e in enumerate(entries) if "Memory pool end." in e.message)
    scan.feed(entries[loads + 1 : memory + 1])
    assert re.fullmatch(r"in warm-up for \d+ s", under_way(timeline) or "")  # no capture: the rank is done


def test_a_start_that_dies_in_its_imports() -> None:
    """The seed incident's flags: SGLang's own assertion 2 s after the start, before any start-up line."""
    lines = [
        (1, "Started sglang-seed.service - SGLang."),
        (9, "Traceback (most recent call last):"),
        (9, "AssertionError"),
        (1, "sglang-seed.service: Main process exited, code=exited, status=1/FAILURE"),
    ]
    entries = [
        JournalEntry(message=m, realtime_us=1_000_000 * (100 + i), pid=pid, invocation_id="s")
        for i, (pid, m) in enumerate(lines)
    ]
    scan = StartupScan()
    scan.feed(entries)
    [startup] = scan.paired()
    assert startup.timeline.died_in() == ("imports", "")
    assert death(startup.timeline) == "died in imports: the main process exited 1/FAILURE"
    assert [row[0] for row in table(startup.timeline)[1:]] == ["imports ✗"]


def test_every_start_but_the_latest_needs_a_start_up_line() -> None:
    """A crash loop dead in its imports: the latest start is shown, not each of the loop's."""
    entries = [
        JournalEntry(
            message="Started sglang-seed.service - SGLang.", realtime_us=1_000_000 * i, pid=1, invocation_id=str(i)
        )
        for i in range(5)
    ]
    scan = StartupScan()
    scan.feed(entries)
    assert [s.timeline.invocation for s in scan.paired()] == ["4"]
    assert isinstance(scan.starts["0"], Timeline) and scan.starts["0"].started_at == 0.0


def test_the_standin_prints_the_start_up_facts_of_a_real_0_5_23(standin) -> None:
    """Where the stand-in imitates the real server's start-up lines, they read as the real ones
    do: its arguments as a dict, each rank's KV cache, SGLang's own timings with the same keys."""

    def facts_of(lines: list[str]) -> dict[str, dict[str, str]]:
        return {
            e.kind: e.values
            for line in lines
            if isinstance(e := parse(line), Milestone)
            and e.kind in ("server_args", "kv_cache_allocated", "engine_timings")
        }

    real = facts_of([e.message for e in _recorded("real-tp1-start.jsonl")[1]])
    log = standin("--tp-size", "2").log()
    said = facts_of(log.splitlines())
    assert "] server_args={'" in log and said["server_args"]["tp_size"] == "2"  # a dict, as 0.5.23 prints it
    assert set(said["kv_cache_allocated"]) == set(real["kv_cache_allocated"])
    assert set(said["engine_timings"]) == set(real["engine_timings"])
    assert log.count("KV Cache is allocated.") == 2  # one per rank
