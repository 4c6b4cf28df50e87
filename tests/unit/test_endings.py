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
