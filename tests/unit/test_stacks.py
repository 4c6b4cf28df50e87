"""py-spy dumps as the lab printed them (tests/data/py-spy-*-lab.txt: cockpit.systemd.stacks'
script on the stand-in hung in a collective, and on a process that is not Python), read and
folded one record per rank."""

from __future__ import annotations

from pathlib import Path

from cockpit.incident import Incident, render
from cockpit.systemd import stacks
from cockpit.systemd.processes import rank_of
from cockpit.systemd.stacks import ProcessStack, StackCapture, StackFrame, ThreadStack
from cockpit.traceback.stack_dump import DUMP, folded, stack_entries

DATA = Path(__file__).parents[1] / "data"
HUNG = stacks.parse((DATA / "py-spy-dump-lab.txt").read_text())


def test_every_member_is_read_with_its_threads() -> None:
    assert [rank_of(s.title) for s in HUNG] == ["", *(f"TP{r}" for r in range(8)), ""]
    assert HUNG[-1].title.startswith("sglang::detokenizer")
    for rank in HUNG[1:9]:
        main = rank.main
        assert main is not None and main.name == "MainThread" and not rank.error
        assert [f.function for f in main.frames[:5]] == [
            "Condition.wait",
            "Event.wait",
            "_wait_for_peers",
            "all_reduce",
            "forward_hung",
        ]
        assert main.frames[2].file == "/opt/cockpit/cockpit/lab/standin/worker.py"
        assert {t.name for t in rank.threads} == {"MainThread", "Thread-1 (fire)"}  # and its watchdog
    # py-spy gives the detokenizer's main thread no name (null): its row showed the pthread id.
    [detokenizer_main] = HUNG[-1].threads
    assert detokenizer_main.name == "MainThread" and HUNG[-1].main is detokenizer_main
    assert "140193838092992" not in stack_entries([HUNG[-1]], 0)[0].message


def test_a_process_that_is_not_python_is_said() -> None:
    [sleeper] = stacks.parse((DATA / "py-spy-not-python-lab.txt").read_text())
    assert sleeper.title == "/usr/bin/sleep 600" and sleeper.threads == []
    assert sleeper.error == "Error: Failed to find python version from target process"
    assert "no stack: Error: Failed to find python version" in stack_entries([sleeper], 0)[0].message


def test_folded_one_record_per_rank_openable_at_its_frames() -> None:
    rows = folded(HUNG, at=1_764_000_000)
    tracebacks = [tb for _, tb in reversed(rows.tracebacks())]
    assert len(rows.records) == len(HUNG) == 10 and len(tracebacks) == 10
    assert [tb.rank for tb in tracebacks[1:9]] == [f"TP{r}" for r in range(8)]
    tp3 = tracebacks[4]
    assert tp3.exception == DUMP and tp3.pid == HUNG[4].pid
    assert tp3.message == (
        f"idle in _wait_for_peers (worker.py:92), MainThread of sglang::scheduler_TP3 (PID {HUNG[4].pid})"
    )
    sites = tp3.sites
    assert (sites[-3].function, sites[-3].line) == ("_wait_for_peers", 92)  # outermost first, as Python prints
    assert sites[-3].file == "/opt/cockpit/cockpit/lab/standin/worker.py"


def test_the_incident_note_carries_every_thread_of_every_process() -> None:
    note = render(Incident(host="lab", unit="sglang-hang.service", stacks=StackCapture(1_764_000_000, HUNG)))
    section = note[note.index("## Stacks (py-spy dump at ") :]
    assert section.count("### TP") == 8 and "### sglang::detokenizer" in section
    assert f"### TP3 sglang::scheduler_TP3 (PID {HUNG[4].pid}): MainThread in _wait_for_peers" in section
    assert section.count(", Thread-1 (fire) of sglang::scheduler_TP") == 8  # the other threads too


async def test_a_host_without_py_spy_is_told_how_to_get_it(monkeypatch, tmp_path: Path) -> None:
    """The real script on this machine, with a PATH that holds no py-spy."""
    import os
    import shutil

    import pytest

    from cockpit.remote.base import HostError
    from cockpit.remote.local import LocalHost

    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "head", "tr", "systemctl"):
        if (found := shutil.which(tool)) is not None:
            os.symlink(found, bare / tool)
    monkeypatch.setenv("PATH", str(bare))
    with pytest.raises(HostError) as said:
        await stacks.read(LocalHost("gpu7"), "/system.slice/sglang.service")
    assert str(said.value) == "py-spy is not installed on gpu7: `pip install py-spy` there (any Python will do)"


async def test_a_cgroup_with_no_members_file_is_one_sentence() -> None:
    """The members script run on this machine for a cgroup that is not there: the sentence names
    the cgroup, the host and what the script said."""
    from cockpit.remote.base import HostError
    from cockpit.remote.local import LocalHost
    from cockpit.systemd import processes

    try:
        await processes.read(LocalHost("jump"), "/system.slice/no-such-cockpit-test.service")
    except HostError as e:
        said = str(e)
    else:
        raise AssertionError("a cgroup that is not there was read")
    assert said == (
        "the processes of /system.slice/no-such-cockpit-test.service on jump: "
        "no cgroup.procs for /system.slice/no-such-cockpit-test.service"
    )


def test_a_dump_nested_too_deep_to_decode_is_that_process_s_error_not_the_whole_dump() -> None:
    """A py-spy on the host is the host's: an answer nested past the decoder's recursion raised
    RecursionError out of the whole dump."""
    from cockpit.systemd.process_facts import PID_MARK, SEP

    deep = "[" * 100_000 + "]" * 100_000
    [hostile, fine] = stacks.parse(f"{PID_MARK}7\nevil\n{SEP}\n{deep}\n{PID_MARK}8\nok\n{SEP}\n[]\n")
    assert hostile.error is not None and hostile.threads == []
    assert (fine.pid, fine.error, fine.threads) == (8, None, [])


def test_the_tp1_scheduler_is_rank_0_in_its_stack() -> None:
    """SGLang titles its scheduler at tp 1 `sglang::scheduler`, with no `_TP0`
    (tests/data/sglang-0.5.23/real-tp1-processes.txt): its dump is TP0's, the resource tracker's
    and the detokenizer's are no rank's."""
    from cockpit.traceback.stack_dump import headline

    frame = StackFrame("event_loop_normal", "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/a.py", 9)
    thread = [ThreadStack("MainThread", False, [frame])]
    members = [
        ProcessStack(488, "/opt/sglang/venv/bin/python -c from multiprocessing.resource_tracker import main;main(6)"),
        ProcessStack(489, "sglang::scheduler", thread),
        ProcessStack(490, "sglang::detokenizer", thread),
    ]
    assert [rank_of(p.title) for p in members] == ["", "TP0", ""]
    assert headline(members[1]).startswith("TP0 sglang::scheduler (PID 489): MainThread in event_loop_normal")
    rows = folded(members, at=1_796_234_213)
    assert sorted((tb.pid, tb.rank) for _, tb in rows.tracebacks()) == [(489, "TP0"), (490, None)]
