"""Readiness from every source (cockpit.sglang.server.health), on journals and process lists the lab's
stand-in produced (tests/data): a hang that its watchdog ended, a detokenizer that died under a
server that still answers /health."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from cockpit.sglang.server.health import DEGRADED, DOWN, HUNG, READY, STARTING, HealthScan, Signals, assess
from cockpit.sglang.server.logparse import parse
from cockpit.sglang.server.ranks import ranks_on_node
from cockpit.systemd import processes
from cockpit.systemd.entry import JournalEntry, parse_json_lines
from cockpit.systemd.readiness import GENERATE, HEALTH, Probe
from cockpit.systemd.status import parse_show
from tests.conftest import FIXTURES

DATA = Path(__file__).parents[1] / "data"
TITLES = processes.parse((DATA / "cgroup-titles-lab.txt").read_text())
DEAD = processes.parse((DATA / "cgroup-titles-dead-detokenizer-lab.txt").read_text())
OK = Probe(GENERATE, 200)


def journal(name: str) -> list[JournalEntry]:
    return parse_json_lines((DATA / name).read_text().splitlines())


def running(**changes):
    [status] = parse_show((DATA / "show-sglang-demo.txt").read_text(), "cockpit-lab")
    return replace(status, **changes)


def scanned(name: str) -> tuple[HealthScan, str]:
    entries = journal(name)
    scan = HealthScan()
    scan.feed(entries)
    invocation = next(e.invocation_id for e in entries if e.invocation_id and e.pid != 1)
    return scan, invocation


def test_the_census_reads_each_member_with_its_title() -> None:
    titles = TITLES.titles
    assert len(titles) == 10 and titles[min(titles)] == "/opt/sglang/venv/bin/python"
    assert sorted(TITLES.titled("sglang::scheduler").values()) == [f"sglang::scheduler_TP{r}" for r in range(8)]
    assert list(TITLES.titled("sglang::detokenizer").values()) == ["sglang::detokenizer"]
    assert "sglang::detokenizer" not in DEAD.titles.values() and len(DEAD.titles) == 9


def test_a_hang_ended_by_its_watchdog_reads_every_rank_and_the_sigquit() -> None:
    scan, invocation = scanned("journal-hang.jsonl")
    signals = scan.of(invocation)
    assert signals.ready_at is not None
    assert sorted(signals.watchdog) == [f"TP{r}" for r in range(8)]
    assert signals.ending_at is not None and signals.ending_at >= max(signals.watchdog.values())
    status = running(invocation_id=invocation)
    # While the ranks wait for their watchdog's SIGQUIT: hung, every rank named.
    before = Signals(ready_at=signals.ready_at, watchdog=signals.watchdog, titles=dict(signals.titles))
    told = assess(status, before, OK, TITLES)
    assert told.state == HUNG and told.reason.startswith("the watchdog fired on TP0..TP7 at ")
    assert "cockpit stacks" in told.reason
    # Once the parent has its SIGQUIT, the server is ending, of the hang.
    told = assess(status, signals, OK, TITLES)
    assert (told.state, told.reason) == (DOWN, "ending (the watchdog fired on TP0..TP7)")


def test_a_dead_detokenizer_under_a_200_health_is_degraded() -> None:
    scan, invocation = scanned("journal-dead-detokenizer.jsonl")
    signals = scan.of(invocation)
    assert signals.health_failed_at is not None and signals.ready_at is not None
    status = running(invocation_id=invocation, main_pid=min(DEAD.titles))
    # The app saw the detokenizer earlier in this start: it names it with its PID.
    scan.saw(invocation, TITLES)
    told = assess(status, signals, Probe(HEALTH, 200), DEAD)
    assert told.state == DEGRADED
    assert told.reason == (
        f"sglang::detokenizer (PID {max(TITLES.titles)}) is gone while the main process {min(DEAD.titles)} lives"
    )
    # `cockpit status` saw only this moment: the detokenizer SGLang always runs is missing.
    fresh = Signals(ready_at=signals.ready_at)
    told = assess(status, fresh, Probe(HEALTH, 200), DEAD, schedulers=8)
    assert told.state == DEGRADED and told.reason.startswith("sglang::detokenizer is gone")


def test_a_census_taken_before_the_ready_line_does_not_call_the_detokenizer_gone() -> None:
    """The start as the lab showed it to the app: the health check's census came before the
    detokenizer, the journal's ready line after it; that census says nothing of what was lost."""
    scan, invocation = scanned("journal-dead-detokenizer.jsonl")
    ready = scan.of(invocation).ready_at
    assert ready is not None
    status = running(invocation_id=invocation, main_pid=min(DEAD.titles))
    early = processes.parse(
        f"taken {ready - 0.4:.9f}\0" + (DATA / "cgroup-titles-dead-detokenizer-lab.txt").read_text()
    )
    assert early.taken_at == pytest.approx(ready - 0.4) and early.titles == DEAD.titles
    told = assess(status, Signals(ready_at=ready), Probe(HEALTH, 200), early, schedulers=8)
    assert told.state == READY
    late = replace(early, taken_at=ready + 0.4)
    told = assess(status, Signals(ready_at=ready), Probe(HEALTH, 200), late, schedulers=8)
    assert told.state == DEGRADED and told.reason.startswith("sglang::detokenizer is gone")
    assert processes.parse("taken 1764000000.N\0").taken_at == 1764000000.0  # a `date` without %N


def test_a_missing_rank_is_counted_against_the_flags() -> None:
    fewer = processes.UnitProcesses({p: t for p, t in TITLES.titles.items() if t != "sglang::scheduler_TP5"})
    told = assess(running(), Signals(ready_at=1.0), OK, fewer, schedulers=8)
    assert told.state == DEGRADED and told.reason.startswith("1 of its 8 scheduler processes are gone")
    assert assess(running(), Signals(ready_at=1.0), OK, TITLES, schedulers=8).state == READY


@pytest.mark.parametrize(
    ("changes", "probe", "signals", "state", "says"),
    [
        ({"active_state": "failed", "sub_state": "failed"}, None, Signals(), DOWN, "the unit is failed (failed"),
        ({"active_state": "activating", "sub_state": "auto-restart"}, None, Signals(), DOWN, "waiting to restart"),
        ({"active_state": "activating", "sub_state": "start"}, None, Signals(), STARTING, "systemd is starting"),
        ({}, Probe(GENERATE, 503), Signals(), STARTING, "/health_generate answered 503: it has not said"),
        ({}, Probe(GENERATE, None, "no answer within 10 s"), Signals(), HUNG, "/health_generate: no answer"),
        ({}, Probe(GENERATE, 503), Signals(ready_at=1.0), DEGRADED, "/health_generate answered 503 after it"),
        ({}, OK, Signals(exceptions={"TP3": 1.0}), DEGRADED, "TP3 hit an exception at"),
        ({}, OK, Signals(ready_at=1.0), READY, "/health_generate answered 200"),
    ],
)
def test_each_source_moves_the_verdict(changes, probe, signals, state, says) -> None:
    status = running(**changes)
    told = assess(status, signals, probe, TITLES)
    assert told.state == state and says in told.reason


def test_a_hang_is_dated_by_the_request_that_got_no_answer_not_by_the_last_line() -> None:
    """Issue 26, item 5: after a load run the journal's last line is the run's end; the hint
    counted the silence from there (an idle server logs nothing), however recent the hang."""
    now = time.time()
    asked = Probe(GENERATE, None, "no answer within 10 s", asked_at=now - 12)
    after_a_run = assess(running(), Signals(ready_at=now - 3600, last_line_at=now - 900), asked, TITLES)
    assert after_a_run.state == HUNG and "900" not in after_a_run.reason, after_a_run.reason
    assert "; not a journal line since it was asked, 12 s ago (" in after_a_run.reason, after_a_run.reason
    spoke = assess(running(), Signals(ready_at=now - 3600, last_line_at=now - 5), asked, TITLES)
    assert spoke.state == HUNG and "journal" not in spoke.reason.partition("(")[0], spoke.reason


def test_ready_only_when_the_journal_was_read_says_so() -> None:
    told = assess(running(), Signals(), Probe(HEALTH, 200), TITLES, journal=False)
    assert told.state == READY and told.reason == "/health answered 200; its journal was not read"


def test_the_error_lines_of_every_release_are_read() -> None:
    """The watchdog's line as 0.5.19 and 0.5.23 print it, and the fixture's error lines."""
    old = parse("[2026-11-30 06:24:06 TP2] Watchdog timeout (self.watchdog_timeout=300)")
    new = parse("[2026-11-30 06:24:06 TP2] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    assert [(e.kind, e.rank) for e in (old, new)] == [("watchdog_timeout", "TP2")] * 2  # type: ignore[union-attr]
    lines = (FIXTURES / "sglang" / "logs" / "startup-and-error-lines.template.log").read_text().splitlines()
    scan = HealthScan()
    scan.feed(
        [
            JournalEntry(message=line, realtime_us=1_000_000 * (i + 1), pid=7, invocation_id="x")
            for i, line in enumerate(lines)
        ]
    )
    signals = scan.of("x")
    assert signals.ready_at and signals.health_failed_at and signals.ending_at and signals.exceptions == {"TP0": 9.0}
    told = assess(running(invocation_id="x"), signals, OK, None)
    assert (told.state, told.reason) == (DOWN, "ending (TP0 hit an exception; initialization failed)")


def test_a_node_of_rank_above_0_is_ready_by_its_schedulers_not_its_dummy_health() -> None:
    fewer = processes.UnitProcesses({p: t for p, t in TITLES.titles.items() if t != "sglang::scheduler_TP5"})
    told = assess(running(), Signals(), OK, fewer, schedulers=8, worker_node=True)
    assert told.state == STARTING and told.reason.startswith("7 of its 8 schedulers run")  # the 200 is not read
    told = assess(running(), Signals(), None, TITLES, schedulers=8, worker_node=True)
    assert told.state == READY and "its /health is SGLang's dummy" in told.reason
    assert assess(running(), Signals(watchdog={"TP9": 1.0}), OK, TITLES, schedulers=8, worker_node=True).state == HUNG


def test_the_group_is_broken_when_a_node_is_down_and_another_runs() -> None:
    from cockpit.sglang.deployments.nodes_status import BROKEN, group_readiness

    ready = running(readiness=READY, readiness_reason="/health answered 200")
    down = running(active_state="failed", sub_state="failed", readiness=DOWN, readiness_reason="the unit is failed")
    assert group_readiness([("n0", ready), ("n1", ready)]).state == READY
    broken = group_readiness([("n0", ready), ("n1", down)])
    assert broken.state == BROKEN and broken.reason.startswith("n1 (sglang-demo.service on cockpit-lab) is down")
    assert group_readiness([("n0", down), ("n1", down)]).state == DOWN  # nothing runs: down, not broken
    # Node 1 restarted alone by systemd after node 0 was ready: it read ready, node 0 hung on it.
    head = replace(ready, exec_main_start=1000.0, ready_since=1040.0)
    joined = replace(ready, exec_main_start=1001.0)
    assert group_readiness([("n0", head), ("n1", joined)]).state == READY
    alone = group_readiness([("n0", head), ("n1", replace(joined, exec_main_start=1300.0))])
    assert alone.state == BROKEN and alone.reason.startswith("n1 (sglang-demo.service on cockpit-lab) started again")
    assert "has left the launch" in alone.reason and "restart the group" in alone.reason
    # Both found ended: the first to end is named, not node 0 because it is listed first.
    first, later = replace(down, exec_main_exit=100.0), replace(down, exec_main_exit=112.0)
    assert group_readiness([("n0", later), ("n1", first)]).reason.startswith("n1: ")
    assert group_readiness([("n0", first), ("n1", later)]).reason.startswith("n0: ")


def census(name: str, taken_at: float | None = None) -> processes.UnitProcesses:
    """A recorded `ps -o pid,ppid,rss,comm,args` of a real 0.5.23 unit's cgroup
    (tests/data/sglang-0.5.23) as the census reads it: each member's cmdline's first word (a
    titled process's cmdline is its title alone)."""
    rows = [line.split(None, 4) for line in (DATA / "sglang-0.5.23" / name).read_text().splitlines()[3:]]
    text = "".join(f"/proc/{pid}/cmdline:{args.split()[0]}\0" for pid, _, _, _, args in rows)
    return processes.parse((f"taken {taken_at}\0" if taken_at is not None else "") + text)


def test_the_real_tp1_scheduler_is_rank_0_and_its_resource_tracker_no_rank() -> None:
    tp1 = census("real-tp1-processes.txt")
    assert tp1.to_json() == [
        {"pid": 448, "title": "/opt/sglang/venv/bin/python", "rank": None},
        {"pid": 488, "title": "/opt/sglang/venv/bin/python", "rank": None},  # multiprocessing's resource tracker
        {"pid": 489, "title": "sglang::scheduler", "rank": "TP0"},
        {"pid": 490, "title": "sglang::detokenizer", "rank": None},
    ]
    assert processes.rank_of("sglang::schedul") == ""  # its comm, never its title
    tp2 = census("real-tp2-processes.txt")
    assert [m["rank"] for m in tp2.to_json()] == [None, None, "TP0", "TP1", None]


def test_the_real_tp1_census_is_ready_and_its_scheduler_gone_is_degraded() -> None:
    """tp 1 runs one scheduler (`sglang::scheduler`) beside the detokenizer and the resource
    tracker; that scheduler gone while the main process lives is a degraded server, whether
    this start's census saw it (named with its PID) or only the flags say it should run."""
    tp1 = census("real-tp1-processes.txt", taken_at=2.0)
    status = running(main_pid=448)
    schedulers = ranks_on_node({})
    assert assess(status, Signals(ready_at=1.0), OK, tp1, schedulers=schedulers).state == READY
    scan = HealthScan()
    scan.saw(status.invocation_id, tp1)
    gone = replace(tp1, titles={p: t for p, t in tp1.titles.items() if t != "sglang::scheduler"})
    signals = replace(scan.of(status.invocation_id), ready_at=1.0)
    told = assess(status, signals, OK, gone, schedulers=schedulers)
    assert (told.state, told.reason) == (
        DEGRADED,
        "sglang::scheduler (PID 489) is gone while the main process 448 lives",
    )
    told = assess(status, Signals(ready_at=1.0), OK, gone, schedulers=schedulers)
    assert told.state == DEGRADED and told.reason.startswith("1 of its 1 scheduler processes are gone")


# -- a child that dies ends the whole server (issue 25, item 4) -------------------------------------


def real(name: str) -> list[JournalEntry]:
    return journal(f"sglang-0.5.23/{name}")


def ended(status, **more):
    """The state systemd leaves once SGLang killed its own tree: failed, 9/KILL."""
    fields = {"active_state": "failed", "sub_state": "failed", "result": "signal", **more}
    return replace(status, exec_main_code="killed", exec_main_status=9, exec_main_exit=1796233438.39, **fields)


def test_a_killed_tp1_scheduler_is_the_server_ending_from_its_first_line_on() -> None:
    """0.5.23's watchdog names the dead child and its exit within a second; for the 5 s SGLang
    sleeps before it kills its tree the server still answers /health's last 200 and its census
    lacks the scheduler: never degraded, each line on (tests/data/sglang-0.5.23)."""
    kill = real("real-tp1-kill9-scheduler.jsonl")
    invocation = kill[0].invocation_id
    status = running(main_pid=448, invocation_id=invocation)
    seen = census("real-tp1-processes.txt", taken_at=1796233400.0)
    scan = HealthScan()
    scan.feed(real("real-tp1-start.jsonl"))
    scan.saw(invocation, seen)
    assert assess(status, scan.of(invocation), OK, seen, schedulers=1).state == READY
    gone = replace(seen, titles={p: t for p, t in seen.titles.items() if p != 489}, taken_at=1796233434.0)
    said = []
    for entry in (e for e in kill if e.pid != 1):
        scan.feed([entry])
        scan.saw(invocation, gone, 1)
        told = assess(status, scan.of(invocation), OK, gone, schedulers=1)
        said.append((told.state, told.reason))
    assert said == [(DOWN, "ending (scheduler 0 crashed, exit -9)")] * 5
    told = assess(ended(status), scan.of(invocation), None, None)
    assert told.reason == "the unit is failed (failed, last exit killed 9/KILL) after scheduler 0 crashed, exit -9"
    waiting = ended(status, active_state="activating", sub_state="auto-restart")
    told = assess(waiting, scan.of(invocation), None, None)
    assert (told.state, told.reason) == (DOWN, "waiting to restart after killed 9/KILL (scheduler 0 crashed, exit -9)")


def test_a_killed_tp2_rank_is_named_by_the_census_taken_while_the_server_ends() -> None:
    """At tp 2 the rank whose peer died raises first and SIGQUITs the parent, whose handler stops
    the watchdog before it names the dead one: only the processes say TP1 is gone (TP0 raised,
    so said why), in the app's census at the ending and in `cockpit status`'s one census."""
    start, kill = real("real-tp2-start.jsonl"), real("real-tp2-kill9-scheduler-tp1.jsonl")
    invocation = kill[0].invocation_id
    status = running(main_pid=739, invocation_id=invocation)
    seen = census("real-tp2-processes.txt", taken_at=1796233600.0)
    before_tree_kill = [e for e in kill if "kill_process_tree" not in e.message and e.pid != 1]
    scan = HealthScan()
    scan.feed(start)
    scan.saw(invocation, seen)
    scan.feed(before_tree_kill)
    signals = scan.of(invocation)
    assert signals.ending_at is not None and signals.exceptions.keys() == {"TP0"}
    told = assess(status, signals, OK, seen, schedulers=2)
    assert (told.state, told.reason) == (DOWN, "ending (TP0 hit an exception)")  # before any census of its end

    def without(*ranks: str, taken_at: float) -> processes.UnitProcesses:
        titles = {p: t for p, t in seen.titles.items() if t not in {f"sglang::scheduler_{r}" for r in ranks}}
        return processes.UnitProcesses(titles, taken_at)

    early = without("TP1", taken_at=signals.ending_at - 0.5)  # taken before the ending: says nothing of it
    scan.saw(invocation, early, 2)
    assert signals.crashed == {}
    later = without("TP0", "TP1", taken_at=signals.ending_at + 0.3)  # TP0 exits after its exception
    scan.saw(invocation, later, 2)
    told = assess(status, signals, OK, later, schedulers=2)
    assert (told.state, told.reason) == (DOWN, "ending (TP1 crashed; TP0 hit an exception)")
    fresh = HealthScan()  # `cockpit status`: its one census, and the flags' two ranks
    fresh.feed(before_tree_kill)
    fresh.saw(invocation, later, 2)
    assert assess(status, fresh.of(invocation), OK, later, schedulers=2).reason == told.reason
    late = HealthScan()  # a census after SGLang killed its tree names nothing
    late.feed(kill)
    tree_killed = late.of(invocation).tree_killed_at
    assert tree_killed is not None
    late.saw(invocation, processes.UnitProcesses({739: seen.titles[739]}, tree_killed + 0.01), 2)
    assert late.of(invocation).crashed == {}
    assert assess(status, late.of(invocation), OK, None).reason == "ending (TP0 hit an exception)"


def test_the_children_a_stop_kills_are_no_crash() -> None:
    """Under the default KillMode a stop's SIGTERM kills the scheduler first and 0.5.23 says
    `crashed with exit code -15` as for a crash; the stop job's line of the same start makes it
    a stop. A graceful stop kills only its children (`include_parent=False`): no ending at all."""
    from cockpit.systemd.endings import Endings

    stop = real("real-tp1-stop.jsonl")
    invocation = stop[0].invocation_id
    scan = HealthScan()
    scan.feed(stop)
    assert scan.of(invocation).crashed == {"scheduler 0": -15}
    endings = Endings().feed(stop)
    still = endings.of(running(invocation_id=invocation))  # the poll's last status, from before the stop
    told = assess(still, scan.of(invocation), OK, None)
    assert (told.state, told.reason) == (DOWN, "systemd is stopping it")
    told = assess(endings.of(ended(still)), scan.of(invocation), None, None)
    assert told.reason == "the unit is failed (failed, last exit killed 9/KILL)"
    graceful = real("real-tp2-stop.jsonl")
    scan.feed(graceful)
    assert scan.of(graceful[0].invocation_id).ending_at is None
