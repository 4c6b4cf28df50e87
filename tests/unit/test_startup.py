"""The start-up timeline on a journal the lab's stand-in printed (tests/data/journal-startup.jsonl,
SGLang 0.5.23's start-up lines of eight ranks): a start that reached ready, then one whose TP3 died
loading its weights; and the start kept on the jump box to compare the next with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.incident import Incident, render
from cockpit.sglang.health import HealthScan
from cockpit.sglang.logparse import parse
from cockpit.sglang.startup import PHASES, StartupMemory, StartupScan, death, table
from cockpit.systemd.entry import JournalEntry, parse_json_lines

DATA = Path(__file__).parents[1] / "data"
ENTRIES = parse_json_lines((DATA / "journal-startup.jsonl").read_text().splitlines())


@pytest.fixture
def scan() -> StartupScan:
    found = StartupScan()
    found.feed(ENTRIES)
    return found


def test_each_phase_of_each_rank_of_a_start_that_reached_ready(scan: StartupScan) -> None:
    ready, died = scan.starts.values()
    assert sorted(ready.ranks) == [f"TP{r}" for r in range(8)] and ready.ready_at is not None
    for phase in PHASES:
        times = [ready.ranks[f"TP{r}"].seconds(phase) for r in range(8)]
        assert all(t is not None and t > 0.5 for t in times), (phase, times)
        assert ready.slowest(phase)[0] == "TP7"  # type: ignore[index]  # the stand-in's last rank is slowest
    assert ready.min_avail_gb("load_weight") == 124.20 and ready.min_avail_gb("cuda_graph") == 20.70
    assert ready.died_in() is None and ready.current() is None


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
    scan.feed(
        [
            JournalEntry(message=m, realtime_us=(i + 1) * 1_000_000, pid=9, invocation_id="x")
            for i, m in enumerate(lines)
        ]
    )
    line = scan.starts["x"]
    assert {p: line.ranks["TP1"].seconds(p) for p in PHASES} == {
        "init": 1.0,
        "load_weight": 1.0,
        "memory_pool": 2.0,  # from the weights' end: SGLang prints no line at its start
        "cuda_graph": 1.0,
    }
    assert line.ranks["TP1"].avail_gb == {"load_weight": 63.10, "memory_pool": 9.87, "cuda_graph": 9.09}


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
    assert startups.starts["39"].ranks["TP0"].begun and health.of(None) is not health.of(None)
