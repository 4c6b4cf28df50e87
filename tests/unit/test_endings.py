"""A stop told from a crash on real SGLang 0.5.23 journals (tests/data/sglang-0.5.23): a `systemctl
stop` and a `systemctl restart` that ended `failed` (Result=signal, 9/KILL) under the default
KillMode, and a kill -9 of a scheduler that ended the same way: systemd's state is the same, its
journal is not."""

from __future__ import annotations

from cockpit.systemd.endings import Endings
from cockpit.systemd.entry import JournalEntry, parse_json_line
from cockpit.systemd.status import STOP_JOB, UnitStatus
from cockpit.traceback.journal_rows import JournalRows
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "sglang-0.5.23"


def entries(name: str) -> list[JournalEntry]:
    return [parse_json_line(line) for line in (DATA / name).read_text().splitlines()]


def invocations(found: list[JournalEntry]) -> list[str]:
    return list(dict.fromkeys(e.invocation_id for e in found if e.invocation_id))


def failed(invocation: str, **more: object) -> UnitStatus:
    """The state systemd leaves after either: what `systemctl show` said in both recordings."""
    fields: dict = {"active_state": "failed", "sub_state": "failed", "result": "signal", **more}
    return UnitStatus(
        "sglang-real-tp1.service",
        "lab",
        exec_main_code="killed",
        exec_main_status=9,
        exec_main_exit=1796032480.0,
        invocation_id=invocation,
        **fields,
    )


def test_a_plain_stop_that_ended_failed_is_a_stop() -> None:
    journal = entries("real-tp1-stop.jsonl")
    [stopped] = invocations(journal)
    said = Endings().feed(journal).of(failed(stopped))
    assert said.stopped_by == STOP_JOB
    assert said.ended == "stopped by a stop job (killed 9/KILL)"


def test_a_kill_of_a_scheduler_that_ended_the_same_is_a_crash() -> None:
    journal = entries("real-tp1-kill9-scheduler.jsonl")
    [crashed] = invocations(journal)
    said = Endings().feed(journal).of(failed(crashed))
    assert said.stopped_by is None and said.ended == "killed 9/KILL"


def test_the_start_a_restart_stopped_is_said_as_the_cockpits_restart_when_it_asked() -> None:
    journal = entries("real-tp1-restart.jsonl")
    old, new = invocations(journal)
    running = UnitStatus(
        "sglang-real-tp1.service", "lab", active_state="active", invocation_id=new, previous_exit="killed 9/KILL"
    )
    endings = Endings()
    endings.asked(old, "the cockpit's restart")
    said = endings.feed(journal).of(running)
    assert said.stopped_by is None  # the new start runs
    assert said.previous_ended == "stopped by the cockpit's restart (killed 9/KILL)"
    assert Endings().feed(journal).of(running).previous_ended == "stopped by a stop job (killed 9/KILL)"


def test_the_journals_restart_separator_says_stopped_or_the_exit() -> None:
    """A start that a kill -9 of its scheduler ended, then one a restart stopped (both 9/KILL)."""
    rows = JournalRows()
    rows.add(entries("real-tp1-start.jsonl") + entries("real-tp1-kill9-scheduler.jsonl"))
    rows.add(entries("real-tp1-restart.jsonl"))
    assert [text.split(" · ", 2)[2] for text in rows.separators.values()] == [
        "previous exit: killed 9/KILL",
        "previous exit: stopped by a stop job (killed 9/KILL)",
    ]


def test_the_start_after_a_crash_knows_from_the_journal_how_the_one_before_ended() -> None:
    """systemd forgets how a start ended once the next begins (an automatic restart): `cockpit
    status`, which reads once with no memory of earlier polls, reads it from systemd's own line
    of that start, among the lines it asks journalctl's --grep for; a stop job said as one."""
    import re
    from dataclasses import replace

    from cockpit.sglang.deployments.status_read import SAID_PATTERN

    kill, restart = entries("real-tp1-kill9-scheduler.jsonl"), entries("real-tp1-restart.jsonl")
    stopped, started = invocations(restart)
    # A start after the kill -9 (the restart recording's next start stands for it), and the restart itself.
    after_crash = kill + [e for e in restart if e.invocation_id == started]
    grep = re.compile(SAID_PATTERN)
    running = UnitStatus("sglang-real-tp1.service", "lab", active_state="active", invocation_id=started)
    for journal, stop in ((after_crash, None), (restart, STOP_JOB)):
        [exited] = [e for e in journal if e.pid == 1 and "Main process exited" in e.message]
        said = Endings().feed(journal).of(running)
        assert (said.previous_exit, said.previous_exit_at) == ("killed 9/KILL", exited.realtime_us / 1e6)
        assert said.previous_stopped_by == stop and said.last_exit is None
        asked = Endings().feed([e for e in journal if grep.search(e.message)]).of(running)
        assert (asked.previous_exit, asked.previous_exit_at, asked.previous_stopped_by) == (
            said.previous_exit,
            said.previous_exit_at,
            stop,
        )
    # The poll's memory of an earlier failed state it saw gives way to the journal's line of the start before.
    remembered = replace(running, previous_exit="exited 1", previous_exit_at=1.0)
    assert Endings().feed(after_crash).of(remembered).previous_exit == "killed 9/KILL"


def test_the_lines_journalctl_greps_newest_first_are_read_oldest_first() -> None:
    """systemd 252's journalctl prints `--grep`'s last `-n` entries newest first (the lab's
    bookworm): read as they came, a start's ending would begin at its tree's kill and the start
    before a restart would be the one after it."""
    import asyncio
    import re

    from cockpit.remote.base import RunResult
    from cockpit.sglang.deployments.status_read import SAID_PATTERN
    from cockpit.systemd.journal import matching

    _, started = invocations(entries("real-tp1-restart.jsonl"))
    lines = [
        line
        for name in ("real-tp1-kill9-scheduler.jsonl", "real-tp1-restart.jsonl")
        for line in (DATA / name).read_text().splitlines()
        if re.search(SAID_PATTERN, parse_json_line(line).message)
        and (name.startswith("real-tp1-kill9") or parse_json_line(line).invocation_id == started)
    ]

    class Newest:
        name = "lab"

        async def run(self, argv, *, input=None, timeout=30.0):
            return RunResult(tuple(argv), 0, "\n".join(reversed(lines)).encode(), b"")

    read = asyncio.run(matching(Newest(), "sglang-real-tp1.service", SAID_PATTERN, 500, 5))  # type: ignore[arg-type]
    assert read is not None and [e.cursor for e in read] == [parse_json_line(line).cursor for line in lines]
    running = UnitStatus("sglang-real-tp1.service", "lab", active_state="active", invocation_id=started)
    assert Endings().feed(read).of(running).previous_exit == "killed 9/KILL"


def test_the_last_exit_is_said_alike_by_the_pane_and_cockpit_status() -> None:
    """The status pane's `last exit` and `cockpit status`'s are one wording; the JSON's last_exit
    is the unit's last, this start's or else the one before's, as the pane's is."""
    import time

    restarted = UnitStatus(
        "sglang-real-tp1.service", "lab", active_state="active", previous_exit="killed 9/KILL", previous_exit_at=1e9
    )
    clock = time.strftime("%H:%M:%S", time.localtime(1e9))
    assert restarted.exit_said == f"killed 9/KILL at {clock}"
    assert restarted.to_json()["last_exit"] == "killed 9/KILL" and restarted.last_exit is None
    died = failed("x" * 32)
    assert died.to_json()["last_exit"] == "killed 9/KILL" and died.exit_said.startswith("killed 9/KILL at ")
    assert UnitStatus("u", "h").exit_said == "-" and UnitStatus("u", "h").to_json()["last_exit"] is None


def test_an_attempt_whose_start_sglang_ended_itself_says_what_ended_it() -> None:
    """A child's death prints no traceback at tp 1: the attempt's detail names it, and the
    attempt timeline shows that detail for a crash without a traceback."""
    from cockpit.attempts import Attempt
    from cockpit.rollout.single import _ended_itself
    from cockpit.ui.panes.attempts import describe

    assert _ended_itself(entries("real-tp1-kill9-scheduler.jsonl")) == "scheduler 0 crashed, exit -9"
    assert _ended_itself(entries("real-tp1-start.jsonl")) == ""  # a start that ended nothing
    # A restart under the default KillMode: the stopped start's schedulers die of SIGTERM (SGLang
    # says `crashed with exit code -15`), but the start watched is the new one, which ended nothing.
    assert _ended_itself(entries("real-tp1-restart.jsonl")) == ""
    attempt = Attempt(1, "lab", "u", 0.0, {}, {}, {}, {}, outcome="crashed", detail="failed (killed 9/KILL)")
    attempt.detail += "; scheduler 0 crashed, exit -9"
    assert "· failed (killed 9/KILL); scheduler 0 crashed, exit -9" in describe(attempt).plain
    attempt.traceback = {"exception": "AssertionError"}  # the traceback says it: no detail repeated
    assert "scheduler 0 crashed" not in describe(attempt).plain
